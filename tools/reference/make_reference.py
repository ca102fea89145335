#!/usr/bin/python3
"""Independent PyTorch reference for the engine's tests.

    /usr/bin/python3 tools/reference/make_reference.py [--out tests/fixtures/tiny]

Writes a tiny random GPT-2 in the Hugging Face layout plus what a
straightforward PyTorch forward pass computes for a few fixed prompts:

    config.json        HF GPT2Config fields
    model.safetensors  F32, HF tensor names without "transformer." prefix,
                       Conv1D weights stored [in, out], no lm_head (tied)
    vocab.json, merges.txt
                       a byte-level BPE with TINY_MERGES merges, trained by
                       tools/train/bpe.py on TINY_TEXT below
    reference.json     per prompt: token ids, byte spans, logits at every
                       position [T][V], attention probabilities
                       [n_layer][n_head][T][T] (row = query, column = key;
                       zero above the diagonal)

Weights come from numpy's PCG64 with a fixed seed and are scaled so that the
attention is far from uniform and every parameter (biases, LayerNorm gains)
matters. The forward pass runs in float64 on the stored float32 weights and
its results are rounded to float32 once. It is written out op by op (explicit LayerNorm,
softmax(QK^T / sqrt(d)) with a causal mask, gelu_new) and does not share code
with the trainer's model. Rerunning gives byte-identical files.
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))
import bpe  # noqa: E402
import safetensors_io  # noqa: E402
from hf_files import hf_config, write_config, f32_list  # noqa: E402

SEED = 20240611
N_LAYER, N_HEAD, N_EMBD, N_CTX = 2, 4, 64, 64
TINY_MERGES = 200
EPS = 1e-5

# Text the tiny tokenizer is trained on (written for this project).
TINY_TEXT = """\
The little engine reads one token at a time. It looks back at every token it has
seen, weighs them, and then it guesses the next one. When the guess is made,
the token is added to the cache, and the engine takes another step.

A student watches the steps. She sees the attention move from the start of the
sentence to the last word, and she sees the numbers change in the table. "What
is the model doing now?" she asks. The answer is on the screen: the keys and
values are stored, the query looks at them, and the softmax turns scores into
weights that add up to one.

There are 12 layers in a small GPT-2, 24 in a medium one, and 36 in a large
one. Each layer has the same parts: a layer norm, the attention, another layer
norm, and a small network with 4 times as many hidden units as the model has
dimensions. The vocabulary has 50257 tokens; ours has far fewer.

We'll test the tokenizer with words like don't, it's, they're, we've, I'm,
you'll and he'd, because the pattern treats those endings as pieces of their
own. Numbers such as 3.14, 2024 and 1,000,000 are split by the same rule, and
so is punctuation: commas, periods, colons: semicolons; dashes -- and (brackets).

    Indented lines keep their spaces.
\tTabs are bytes too.
Line one
Line two

The end of one story is the start of another. The model does not know which
story comes next, so it learns to begin again after the end-of-text token.
The cat sat on the mat. The dog sat on the log. The bird sat in the tree and
sang a song about the sun, the sea, and the sand.
"""

PROMPTS = [
    "The cat sat on the mat.",
    "Hello world\n  two spaces, then a tab:\tdone",
    "café 👋 naïve — ok",
    "The end.<|endoftext|>The start",
]


def make_weights(vocab_size):
    """-> list of (hf_name, float32 numpy array)."""
    rng = np.random.default_rng(SEED)
    C = N_EMBD

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def gain(n):
        return (1.0 + 0.2 * rng.standard_normal(n)).astype(np.float32)

    w = [("wte.weight", normal((vocab_size, C), 0.5)), ("wpe.weight", normal((N_CTX, C), 0.3))]
    for i in range(N_LAYER):
        p = f"h.{i}."
        c_attn = np.concatenate([normal((C, C), 0.25), normal((C, C), 0.25), normal((C, C), 0.15)], axis=1)
        w += [
            (p + "ln_1.weight", gain(C)), (p + "ln_1.bias", normal(C, 0.1)),
            (p + "attn.c_attn.weight", c_attn), (p + "attn.c_attn.bias", normal(3 * C, 0.1)),
            (p + "attn.c_proj.weight", normal((C, C), 0.1)), (p + "attn.c_proj.bias", normal(C, 0.05)),
            (p + "ln_2.weight", gain(C)), (p + "ln_2.bias", normal(C, 0.1)),
            (p + "mlp.c_fc.weight", normal((C, 4 * C), 0.15)), (p + "mlp.c_fc.bias", normal(4 * C, 0.1)),
            (p + "mlp.c_proj.weight", normal((4 * C, C), 0.08)), (p + "mlp.c_proj.bias", normal(C, 0.05)),
        ]
    w += [("ln_f.weight", gain(C)), ("ln_f.bias", normal(C, 0.1))]
    return w


def layer_norm(x, g, b):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + EPS) * g + b


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def forward(W, ids):
    """W: name -> float32 torch tensor (HF orientation). Returns logits [T, V]
    and attention probabilities [L, H, T, T]."""
    T = len(ids)
    C, H = N_EMBD, N_HEAD
    d = C // H
    idx = torch.tensor(ids, dtype=torch.long)
    x = W["wte.weight"][idx] + W["wpe.weight"][torch.arange(T)]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    atts = []
    for i in range(N_LAYER):
        p = f"h.{i}."
        h = layer_norm(x, W[p + "ln_1.weight"], W[p + "ln_1.bias"])
        qkv = h @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]   # [T, 3C]
        q, k, v = qkv[:, :C], qkv[:, C:2 * C], qkv[:, 2 * C:]
        heads, probs = [], []
        for hh in range(H):
            qh, kh, vh = q[:, hh * d:(hh + 1) * d], k[:, hh * d:(hh + 1) * d], v[:, hh * d:(hh + 1) * d]
            scores = (qh @ kh.t()) / math.sqrt(d)
            scores = scores.masked_fill(~causal, float("-inf"))
            pr = torch.softmax(scores, dim=-1)
            probs.append(pr)
            heads.append(pr @ vh)
        atts.append(torch.stack(probs))
        a = torch.cat(heads, dim=1) @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
        x = x + a
        h = layer_norm(x, W[p + "ln_2.weight"], W[p + "ln_2.bias"])
        m = gelu_new(h @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"])
        x = x + (m @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"])
    x = layer_norm(x, W["ln_f.weight"], W["ln_f.bias"])
    logits = x @ W["wte.weight"].t()
    return logits, torch.stack(atts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "tiny"))
    args = ap.parse_args()
    torch.set_num_threads(1)   # fixed reduction order
    os.makedirs(args.out, exist_ok=True)

    counts = bpe.count_pretokens([TINY_TEXT])
    merges = bpe.train(counts, 256 + TINY_MERGES + 1)
    vocab = bpe.save(args.out, merges)
    tok = bpe.Tokenizer(vocab, merges)
    V = len(vocab)

    weights = make_weights(V)
    safetensors_io.write(os.path.join(args.out, "model.safetensors"), weights, {"format": "pt"})
    write_config(os.path.join(args.out, "config.json"),
                 hf_config(V, N_CTX, N_EMBD, N_LAYER, N_HEAD, tok.eot, EPS))

    # Read back what was written, so the reference runs on the file's bytes.
    loaded, _ = safetensors_io.read(os.path.join(args.out, "model.safetensors"))
    # The arithmetic is done in float64 on the stored float32 weights and the
    # results are rounded to float32 once, so the fixture carries no float32
    # rounding of its own: an fp32 engine is compared with the exact answer.
    W = {k: torch.from_numpy(v).double() for k, v in loaded.items()}

    cases = []
    with torch.no_grad():
        for prompt in PROMPTS:
            ids, spans = tok.encode(prompt, with_spans=True)
            assert len(ids) <= N_CTX
            assert tok.decode_bytes(ids) == prompt.encode("utf-8")
            logits, att = forward(W, ids)
            cases.append({
                "prompt": prompt,
                "token_ids": ids,
                "token_spans": [list(s) for s in spans],
                "greedy_next": int(torch.argmax(logits[-1]).item()),
                "logits": f32_list(logits.numpy()),
                "attention": f32_list(att.numpy()),
            })
    ref = {
        "generator": "tools/reference/make_reference.py",
        "dtype": "float32",
        "note": "logits[t][v]: position t, vocabulary id v. attention[l][h][i][j]: layer l, head h, "
                "query position i, key position j (probabilities after the causal softmax; 0 for j > i). "
                "token_spans[t] = [begin, end) byte offsets of token t in the prompt's UTF-8 bytes.",
        "config": {"n_layer": N_LAYER, "n_head": N_HEAD, "n_embd": N_EMBD, "n_ctx": N_CTX,
                   "vocab_size": V, "layer_norm_epsilon": EPS, "eot_token_id": tok.eot},
        "cases": cases,
    }
    with open(os.path.join(args.out, "reference.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(ref, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    total = sum(os.path.getsize(os.path.join(args.out, n)) for n in os.listdir(args.out))
    print(f"wrote {args.out}: vocab {V}, prompts {[len(c['token_ids']) for c in cases]} tokens, "
          f"{total} bytes in all")


if __name__ == "__main__":
    main()
