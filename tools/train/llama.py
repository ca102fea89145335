"""A Llama-shaped decoder in plain PyTorch, for train.py (--arch llama) and
export.py: the model of tokenscope-tiny-llama.

Where it differs from gpt2.py (the four places that separate today's decoders
from GPT-2):
  * RMSNorm (a gain, no bias, no mean subtraction) instead of LayerNorm;
  * rotary position embeddings on q and k, Hugging Face's rotate-half layout
    (dimension i pairs with i + head_dim/2), base rope_theta; no learned
    position table;
  * a SwiGLU MLP: down(silu(gate(x)) * up(x)), no biases;
  * grouped-query attention: n_kv_head key/value heads, each shared by
    n_head / n_kv_head query heads, so the KV cache holds n_kv_head heads.
No linear layer has a bias; lm_head is tied to the token embedding.
Linear weights are torch's [out, in], which is also Hugging Face Llama's
layout: hf_state exports them as they are.
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class LlamaConfig:
    vocab_size: int = 8192
    n_ctx: int = 256
    n_embd: int = 256
    n_layer: int = 4
    n_head: int = 8
    n_kv_head: int = 2
    n_inner: int = 688
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-5
    arch: str = "llama"

    def to_dict(self):
        return asdict(self)

    @property
    def head_dim(self):
        return self.n_embd // self.n_head


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(n_ctx, head_dim, theta, dtype=torch.float32):
    """cos and sin [n_ctx, head_dim]: position p, frequency pair i (and i + d/2)
    turned by p * theta^(-2i/d)."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    ang = torch.arange(n_ctx, dtype=torch.float64)[:, None] * inv[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos().to(dtype), ang.sin().to(dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head, self.n_kv_head, self.d = cfg.n_head, cfg.n_kv_head, cfg.head_dim
        self.q_proj = nn.Linear(cfg.n_embd, cfg.n_head * self.d, bias=False)
        self.k_proj = nn.Linear(cfg.n_embd, cfg.n_kv_head * self.d, bias=False)
        self.v_proj = nn.Linear(cfg.n_embd, cfg.n_kv_head * self.d, bias=False)
        self.o_proj = nn.Linear(cfg.n_head * self.d, cfg.n_embd, bias=False)
        mask = torch.tril(torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, cfg.n_ctx, cfg.n_ctx), persistent=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_head, self.d).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv_head, self.d).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv_head, self.d).transpose(1, 2)
        c, s = cos[:T].to(x.dtype), sin[:T].to(x.dtype)
        q = q * c + rotate_half(q) * s
        k = k * c + rotate_half(k) * s
        group = self.n_head // self.n_kv_head
        k = k.repeat_interleave(group, dim=1)   # query head h reads KV head h // group
        v = v.repeat_interleave(group, dim=1)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.d))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, self.n_head * self.d)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.n_embd, cfg.n_inner, bias=False)
        self.up_proj = nn.Linear(cfg.n_embd, cfg.n_inner, bias=False)
        self.down_proj = nn.Linear(cfg.n_inner, cfg.n_embd, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.n_embd, cfg.rms_norm_eps)
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg.n_embd, cfg.rms_norm_eps)
        self.mlp = MLP(cfg)

    def forward(self, x, cos, sin):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        x = x + self.mlp(self.post_attention_layernorm(x))
        return x


class Llama(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        assert cfg.n_embd % cfg.n_head == 0 and cfg.n_head % cfg.n_kv_head == 0
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.layers = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.norm = RMSNorm(cfg.n_embd, cfg.rms_norm_eps)
        cos, sin = rope_tables(cfg.n_ctx, cfg.head_dim, cfg.rope_theta)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
        # As gpt2.py: the projections back into the residual stream scaled by 1/sqrt(2 * n_layer).
        for name, p in self.named_parameters():
            if name.endswith("o_proj.weight") or name.endswith("down_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    def forward(self, idx, targets=None):
        x = self.embed_tokens(idx)
        for block in self.layers:
            x = block(x, self.cos, self.sin)
        x = self.norm(x)
        logits = x @ self.embed_tokens.weight.t()   # tied lm_head
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    def num_params(self):
        return sum(p.numel() for p in self.parameters())

    def kv_bytes_per_token(self, bytes_per_value=4):
        return 2 * self.cfg.n_layer * self.cfg.n_kv_head * self.cfg.head_dim * bytes_per_value


def hf_state(model):
    """Ordered list of (Hugging Face Llama name, float32 tensor); tied, so no lm_head."""
    out = [("model.embed_tokens.weight", model.embed_tokens.weight)]
    for i, b in enumerate(model.layers):
        p = f"model.layers.{i}."
        out += [
            (p + "input_layernorm.weight", b.input_layernorm.weight),
            (p + "self_attn.q_proj.weight", b.self_attn.q_proj.weight),
            (p + "self_attn.k_proj.weight", b.self_attn.k_proj.weight),
            (p + "self_attn.v_proj.weight", b.self_attn.v_proj.weight),
            (p + "self_attn.o_proj.weight", b.self_attn.o_proj.weight),
            (p + "post_attention_layernorm.weight", b.post_attention_layernorm.weight),
            (p + "mlp.gate_proj.weight", b.mlp.gate_proj.weight),
            (p + "mlp.up_proj.weight", b.mlp.up_proj.weight),
            (p + "mlp.down_proj.weight", b.mlp.down_proj.weight),
        ]
    out.append(("model.norm.weight", model.norm.weight))
    return [(n, t.detach().to(torch.float32).contiguous()) for n, t in out]


def hf_llama_config(cfg, bos_id, eos_id):
    """config.json of a Hugging Face LlamaForCausalLM with cfg's shape."""
    return {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "bos_token_id": bos_id,
        "eos_token_id": eos_id,
        "head_dim": cfg.head_dim,
        "hidden_act": "silu",
        "hidden_size": cfg.n_embd,
        "initializer_range": 0.02,
        "intermediate_size": cfg.n_inner,
        "max_position_embeddings": cfg.n_ctx,
        "mlp_bias": False,
        "model_type": "llama",
        "num_attention_heads": cfg.n_head,
        "num_hidden_layers": cfg.n_layer,
        "num_key_value_heads": cfg.n_kv_head,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_scaling": None,
        "rope_theta": cfg.rope_theta,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "use_cache": True,
        "vocab_size": cfg.vocab_size,
    }
