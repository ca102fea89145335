"""GPT-2 in plain PyTorch, shared by train.py and export.py.

The layout follows GPT-2: token + learned position embeddings, n_layer
pre-LayerNorm blocks (LN -> causal self-attention -> residual, LN -> MLP with
gelu_new -> residual), a final LayerNorm, and logits from the token embedding
matrix (tied lm_head). Linear layers are torch's [out, in]; export.py
transposes them to GPT-2's Conv1D [in, out].
"""
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    vocab_size: int = 8192
    n_ctx: int = 256
    n_embd: int = 256
    n_layer: int = 4
    n_head: int = 4
    layer_norm_epsilon: float = 1e-5

    def to_dict(self):
        return asdict(self)


def gelu_new(x):
    # GPT-2's tanh approximation of GELU.
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * (x * x * x))))


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        mask = torch.tril(torch.ones(cfg.n_ctx, cfg.n_ctx, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, cfg.n_ctx, cfg.n_ctx), persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        H = self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, H, C // H).transpose(1, 2)
        k = k.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x):
        return self.c_proj(gelu_new(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.attn = Attention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = MLP(cfg)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT2(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.n_ctx, cfg.n_embd)
        self.h = nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)])
        self.ln_f = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.apply(self._init)
        # GPT-2: residual projections scaled by 1/sqrt(2 * n_layer).
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        pos = torch.arange(T, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        x = self.ln_f(x)
        logits = x @ self.wte.weight.t()       # tied lm_head
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    def num_params(self):
        return sum(p.numel() for p in self.parameters())


# The exported tensor names (HF GPT-2, no "transformer." prefix) and whether
# the torch weight must be transposed to Conv1D [in, out].
def hf_state(model):
    """Ordered list of (hf_name, float32 tensor in HF orientation)."""
    out = [("wte.weight", model.wte.weight), ("wpe.weight", model.wpe.weight)]
    for i, b in enumerate(model.h):
        p = f"h.{i}."
        out += [
            (p + "ln_1.weight", b.ln_1.weight), (p + "ln_1.bias", b.ln_1.bias),
            (p + "attn.c_attn.weight", b.attn.c_attn.weight.t()), (p + "attn.c_attn.bias", b.attn.c_attn.bias),
            (p + "attn.c_proj.weight", b.attn.c_proj.weight.t()), (p + "attn.c_proj.bias", b.attn.c_proj.bias),
            (p + "ln_2.weight", b.ln_2.weight), (p + "ln_2.bias", b.ln_2.bias),
            (p + "mlp.c_fc.weight", b.mlp.c_fc.weight.t()), (p + "mlp.c_fc.bias", b.mlp.c_fc.bias),
            (p + "mlp.c_proj.weight", b.mlp.c_proj.weight.t()), (p + "mlp.c_proj.bias", b.mlp.c_proj.bias),
        ]
    out += [("ln_f.weight", model.ln_f.weight), ("ln_f.bias", model.ln_f.bias)]
    return [(n, t.detach().to(torch.float32).contiguous()) for n, t in out]
