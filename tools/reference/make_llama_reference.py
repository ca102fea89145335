#!/usr/bin/python3
"""Independent PyTorch reference for the Llama-family tests.

    /usr/bin/python3 tools/reference/make_llama_reference.py [--out tests/fixtures/llama]

Writes small random Llama and Qwen2 checkpoints of odd shapes in the Hugging
Face layout, one directory each, plus what a float64 PyTorch forward pass
written out op by op here (RMSNorm, RoPE in HF's rotate-half layout,
grouped-query attention with a causal mask, SwiGLU MLP; transformers is not
imported) computes for fixed token-id prompts:

    config.json        HF LlamaConfig / Qwen2Config fields
    model.safetensors  nn.Linear weights [out, in] (F32, or BF16 for one), or
                       model-0000N-of-00002.safetensors shards with
                       model.safetensors.index.json (weight_map) for one
    vocab.json, merges.txt
                       copied from tests/fixtures/tiny (457 tokens), so the
                       CLI's tokenizer loads the directory
    reference.json     the prompts' token ids and the shapes below
    reference.safetensors
                       <case>.logits [T][V] (every position) and, for the
                       "short" case, short.attention [L][H][T][T] (query head
                       h, query position i, key position j; 0 for j > i)

The cases cover GQA ratios 1, 2 and 4, a non-default rope_theta, an explicit
head_dim (q width != hidden size), Qwen2's q/k/v biases, tied and untied
embeddings, BF16 storage (the reference then runs on the BF16-rounded
weights) and a sharded checkpoint. The "long" prompt is longer than a KV
block (16 tokens). Weights come from numpy's PCG64 with fixed seeds; results
are rounded to float32 once. Rerunning gives byte-identical files.
"""
import argparse
import json
import os
import shutil
import struct

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TINY = os.path.join(ROOT, "tests", "fixtures", "tiny")
VOCAB = 457

# name, family, hidden, heads, kv heads, head_dim (None = hidden / heads),
# intermediate, layers, rope_theta, tied, storage, sharded
MODELS = [
    ("llama-gqa2", "llama", 48, 6, 3, None, 80, 2, 10000.0, False, "F32", False),
    ("llama-gqa4-theta", "llama", 40, 8, 2, 6, 72, 3, 500000.0, True, "F32", False),
    ("qwen2-mha", "qwen2", 32, 4, 4, None, 56, 2, 1000000.0, False, "F32", False),
    ("llama-bf16", "llama", 32, 4, 2, None, 64, 2, 10000.0, True, "BF16", False),
    ("qwen2-sharded", "qwen2", 36, 6, 3, None, 60, 2, 10000.0, True, "F32", True),
]
PROMPTS = {
    "short": [31, 250, 7, 456, 102, 88, 300],
    "long": [(i * 37 + 11) % VOCAB for i in range(37)],
}
N_CTX = 64
EPS = 1e-5


def bf16_round(a):
    """float32 -> nearest-even bfloat16, returned as (uint16 bits, float32 values)."""
    u = a.astype("<f4").view("<u4").astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    bits = u.astype("<u2")
    return bits, (bits.astype("<u4") << 16).view("<f4")


def write_safetensors(path, tensors):
    """tensors: list of (name, float32 array, dtype "F32" or "BF16")."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a, dtype in tensors:
        raw = bf16_round(a)[0].tobytes() if dtype == "BF16" else a.astype("<f4").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * ((8 - (8 + len(hj)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)) + hj + b"".join(blobs))


def make_weights(seed, fam, C, H, KV, D, I, L, tied):
    rng = np.random.Generator(np.random.PCG64(seed))
    def n(*shape, std=1.0):
        return (rng.standard_normal(shape) * std).astype(np.float32)
    W = {"model.embed_tokens.weight": n(VOCAB, C, std=0.35), "model.norm.weight": 1 + n(C, std=0.3)}
    if not tied:
        W["lm_head.weight"] = n(VOCAB, C, std=2 / np.sqrt(C))
    for l in range(L):
        p = f"model.layers.{l}."
        W[p + "input_layernorm.weight"] = 1 + n(C, std=0.3)
        W[p + "post_attention_layernorm.weight"] = 1 + n(C, std=0.3)
        W[p + "self_attn.q_proj.weight"] = n(H * D, C, std=1.5 / np.sqrt(C))
        W[p + "self_attn.k_proj.weight"] = n(KV * D, C, std=1.5 / np.sqrt(C))
        W[p + "self_attn.v_proj.weight"] = n(KV * D, C, std=1 / np.sqrt(C))
        if fam == "qwen2":
            W[p + "self_attn.q_proj.bias"] = n(H * D, std=0.5)
            W[p + "self_attn.k_proj.bias"] = n(KV * D, std=0.5)
            W[p + "self_attn.v_proj.bias"] = n(KV * D, std=0.5)
        W[p + "self_attn.o_proj.weight"] = n(C, H * D, std=1 / np.sqrt(H * D))
        W[p + "mlp.gate_proj.weight"] = n(I, C, std=1.5 / np.sqrt(C))
        W[p + "mlp.up_proj.weight"] = n(I, C, std=1 / np.sqrt(C))
        W[p + "mlp.down_proj.weight"] = n(C, I, std=1 / np.sqrt(I))
    return W


def rms_norm(x, w):
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + EPS) * w


def rotate(x, theta):
    """x [T, heads, d]; position t rotates pair (i, i + d/2) by t * theta^(-2i/d)."""
    T, _, d = x.shape
    half = d // 2
    inv = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / d)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv[None, :]
    cos, sin = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def forward(W, fam, C, H, KV, D, L, theta, tied, ids):
    t = {k: torch.tensor(v, dtype=torch.float64) for k, v in W.items()}
    T = len(ids)
    x = t["model.embed_tokens.weight"][ids]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    attn_all = []
    for l in range(L):
        p = f"model.layers.{l}."
        h = rms_norm(x, t[p + "input_layernorm.weight"])
        def proj(name):
            y = h @ t[p + f"self_attn.{name}.weight"].T
            return y + t[p + f"self_attn.{name}.bias"] if fam == "qwen2" else y
        q = rotate(proj("q_proj").view(T, H, D), theta)
        k = rotate(proj("k_proj").view(T, KV, D), theta)
        v = proj("v_proj").view(T, KV, D)
        k = k.repeat_interleave(H // KV, dim=1)  # query head h reads KV head h // (H / KV)
        v = v.repeat_interleave(H // KV, dim=1)
        scores = torch.einsum("ihd,jhd->hij", q, k) / np.sqrt(D)
        scores = scores.masked_fill(~mask, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        attn_all.append(probs)
        o = torch.einsum("hij,jhd->ihd", probs, v).reshape(T, H * D)
        x = x + o @ t[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, t[p + "post_attention_layernorm.weight"])
        g = h @ t[p + "mlp.gate_proj.weight"].T
        u = h @ t[p + "mlp.up_proj.weight"].T
        x = x + (g * torch.sigmoid(g) * u) @ t[p + "mlp.down_proj.weight"].T
    h = rms_norm(x, t["model.norm.weight"])
    head = t["model.embed_tokens.weight"] if tied else t["lm_head.weight"]
    return (h @ head.T).float().numpy(), torch.stack(attn_all).float().numpy()


def config_json(fam, C, H, KV, D, I, L, theta, tied):
    c = {
        "architectures": ["LlamaForCausalLM" if fam == "llama" else "Qwen2ForCausalLM"],
        "model_type": fam,
        "vocab_size": VOCAB,
        "hidden_size": C,
        "intermediate_size": I,
        "num_hidden_layers": L,
        "num_attention_heads": H,
        "num_key_value_heads": KV,
        "max_position_embeddings": N_CTX,
        "rms_norm_eps": EPS,
        "rope_theta": theta,
        "rope_scaling": None,
        "hidden_act": "silu",
        "tie_word_embeddings": tied,
        "torch_dtype": "float32",
        "bos_token_id": 456,
        "eos_token_id": 456,
    }
    if D is not None:
        c["head_dim"] = D
    if fam == "llama":
        c["attention_bias"] = False
        c["mlp_bias"] = False
    else:
        c["use_sliding_window"] = False
    return c


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "llama"))
    args = ap.parse_args()
    for seed, (name, fam, C, H, KV, D, I, L, theta, tied, dtype, sharded) in enumerate(MODELS):
        out = os.path.join(args.out, name)
        if os.path.isdir(out):
            shutil.rmtree(out)
        os.makedirs(out)
        W = make_weights(1000 + seed, fam, C, H, KV, D or C // H, I, L, tied)
        if dtype == "BF16":  # the reference runs on what the file holds
            W = {k: bf16_round(v)[1].reshape(v.shape) for k, v in W.items()}
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(config_json(fam, C, H, KV, D, I, L, theta, tied), f, indent=2)
            f.write("\n")
        for tok in ("vocab.json", "merges.txt"):
            shutil.copyfile(os.path.join(TINY, tok), os.path.join(out, tok))
        items = [(k, W[k], dtype) for k in sorted(W)]
        if sharded:
            names = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
            parts = [items[: len(items) // 2], items[len(items) // 2:]]
            weight_map = {}
            for shard, part in zip(names, parts):
                write_safetensors(os.path.join(out, shard), part)
                weight_map.update({k: shard for k, _, _ in part})
            with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
                json.dump({"metadata": {"total_size": sum(a.nbytes for _, a, _ in items)},
                           "weight_map": weight_map}, f, indent=2, sort_keys=True)
                f.write("\n")
        else:
            write_safetensors(os.path.join(out, "model.safetensors"), items)
        ref, cases = [], []
        for case, ids in PROMPTS.items():
            logits, attn = forward(W, fam, C, H, KV, D or C // H, L, theta, tied, ids)
            ref.append((case + ".logits", logits, "F32"))
            if case == "short":
                ref.append((case + ".attention", attn, "F32"))
            cases.append({"name": case, "token_ids": ids, "greedy_next": int(np.argmax(logits[-1]))})
        write_safetensors(os.path.join(out, "reference.safetensors"), ref)
        with open(os.path.join(out, "reference.json"), "w") as f:
            json.dump({"generator": "tools/reference/make_llama_reference.py",
                       "note": "<case>.logits [T][V] and short.attention [L][H][T][T] are in "
                               "reference.safetensors",
                       "cases": cases}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
