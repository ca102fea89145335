#!/usr/bin/python3
"""Independent PyTorch reference for contrastive search (Su et al., 2022).

    /usr/bin/python3 tools/reference/contrastive_reference.py

For the test fixture model (tests/fixtures/tiny) and the bundled model
(assets/models/tokenscope-tiny) it runs contrastive search with Hugging Face
transformers' semantics, written from their description and recomputed
from scratch here (no transformers package, no KV cache):

  * candidates: the top-k of softmax(logits) at the last position;
  * each candidate's hidden state: the last layer's output after ln_f at the
    candidate's position, from a FULL forward pass over context + candidate;
  * degeneration penalty: the largest cosine similarity between that state
    and the same layer's state at every earlier position (prompt and
    generated), recomputed by a full forward pass over the context;
  * score = (1 - alpha) * p - alpha * penalty; the largest score wins, ties
    going to the candidate with the higher probability (the first of the
    top-k).

Generation stops after max_new tokens, after the end-of-text token, or
when the next candidate would not fit the model's context.

Writes tests/fixtures/contrastive/<model>.json: per prompt and (k, alpha),
the chosen tokens, the chosen candidate's penalty and score at every step,
and every candidate (token, p, penalty, most similar position, score) for
the first DETAIL_STEPS steps. The forward pass runs in float64 on the
stored float32 weights, op by op (explicit LayerNorm, causal softmax,
gelu_new), and shares no code with the engine.
"""
import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tools", "train"))
import bpe  # noqa: E402
import safetensors_io  # noqa: E402

KS = [2, 4, 8]
ALPHAS = [0.0, 0.3, 0.6, 1.0]
MAX_NEW = 64
DETAIL_STEPS = 16

MODELS = [
    ("tiny", os.path.join(ROOT, "tests", "fixtures", "tiny"), ["The cat sat on the mat."]),
    ("bundled", os.path.join(ROOT, "assets", "models", "tokenscope-tiny"),
     ["Once upon a time"]),
]


class Model:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        self.n_layer, self.n_head, self.n_embd = cfg["n_layer"], cfg["n_head"], cfg["n_embd"]
        self.n_ctx = cfg.get("n_positions", cfg.get("n_ctx"))
        self.eps = cfg.get("layer_norm_epsilon", 1e-5)
        loaded, _ = safetensors_io.read(os.path.join(model_dir, "model.safetensors"))
        self.W = {k.removeprefix("transformer."): torch.from_numpy(v).double()
                  for k, v in loaded.items()}
        self.tok = bpe.Tokenizer.load(model_dir)

    def layer_norm(self, x, g, b):
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + self.eps) * g + b

    def forward(self, ids):
        """-> (hidden after ln_f [T, C], logits of the last position [V]), no cache."""
        W, T, C, H = self.W, len(ids), self.n_embd, self.n_head
        d = C // H
        x = W["wte.weight"][torch.tensor(ids)] + W["wpe.weight"][torch.arange(T)]
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        for i in range(self.n_layer):
            p = f"h.{i}."
            h = self.layer_norm(x, W[p + "ln_1.weight"], W[p + "ln_1.bias"])
            qkv = h @ W[p + "attn.c_attn.weight"] + W[p + "attn.c_attn.bias"]
            q, k, v = qkv[:, :C], qkv[:, C:2 * C], qkv[:, 2 * C:]
            heads = []
            for hh in range(H):
                s = slice(hh * d, (hh + 1) * d)
                scores = (q[:, s] @ k[:, s].t()) / math.sqrt(d)
                scores = scores.masked_fill(~mask, float("-inf"))
                heads.append(torch.softmax(scores, dim=-1) @ v[:, s])
            x = x + torch.cat(heads, dim=1) @ W[p + "attn.c_proj.weight"] + W[p + "attn.c_proj.bias"]
            h = self.layer_norm(x, W[p + "ln_2.weight"], W[p + "ln_2.bias"])
            a = h @ W[p + "mlp.c_fc.weight"] + W[p + "mlp.c_fc.bias"]
            m = 0.5 * a * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (a + 0.044715 * a ** 3)))
            x = x + m @ W[p + "mlp.c_proj.weight"] + W[p + "mlp.c_proj.bias"]
        hidden = self.layer_norm(x, W["ln_f.weight"], W["ln_f.bias"])
        return hidden, hidden[-1] @ W["wte.weight"].t()


def r6(x):
    """Seven significant digits: far below the tests' 1e-4 tolerance, small files."""
    return float(f"{float(x):.7g}")


def contrastive(model, prompt_ids, k, alpha):
    ids = list(prompt_ids)
    tokens, penalties, scores, detail, margins = [], [], [], [], []
    while len(tokens) < MAX_NEW and len(ids) < model.n_ctx:
        hidden, logits = model.forward(ids)  # the context's states, recomputed in full
        probs = torch.softmax(logits, dim=-1)
        top_p, top_ids = torch.sort(probs, descending=True, stable=True)
        top_p, top_ids = top_p[:k], top_ids[:k]
        ctx = hidden / hidden.norm(dim=-1, keepdim=True)
        cands = []
        for p, tok in zip(top_p.tolist(), top_ids.tolist()):
            h, _ = model.forward(ids + [tok])  # the candidate's state, recomputed in full
            cand = h[-1] / h[-1].norm()
            cos = ctx @ cand
            pen, where = torch.max(cos, dim=0)
            score = (1.0 - alpha) * p - alpha * pen.item()
            cands.append({"token": tok, "p": p, "penalty": pen.item(),
                          "similar": int(where.item()), "score": score})
        best = 0
        for i, c in enumerate(cands):
            if c["score"] > cands[best]["score"]:
                best = i
        others = [c["score"] for i, c in enumerate(cands) if i != best]
        margins.append(cands[best]["score"] - max(others))
        chosen = cands[best]
        tokens.append(chosen["token"])
        penalties.append(r6(chosen["penalty"]))
        scores.append(r6(chosen["score"]))
        if len(detail) < DETAIL_STEPS:
            detail.append({"chosen": best, "candidates": [
                [c["token"], r6(c["p"]), r6(c["penalty"]), c["similar"], r6(c["score"])]
                for c in cands]})
        ids.append(chosen["token"])
        if chosen["token"] == model.tok.eot:
            break
    return {"k": k, "alpha": alpha, "tokens": tokens, "penalties": penalties, "scores": scores,
            "min_margin": r6(min(margins)), "steps": detail}


def main():
    torch.set_num_threads(1)
    out_dir = os.path.join(ROOT, "tests", "fixtures", "contrastive")
    os.makedirs(out_dir, exist_ok=True)
    with torch.no_grad():
        for name, model_dir, prompts in MODELS:
            model = Model(model_dir)
            cases = []
            for prompt in prompts:
                ids = model.tok.encode(prompt)
                runs = [contrastive(model, ids, k, a) for k in KS for a in ALPHAS]
                cases.append({"prompt": prompt, "prompt_ids": ids, "runs": runs})
                print(name, repr(prompt), "min margin",
                      min(r["min_margin"] for r in runs), flush=True)
            ref = {
                "generator": "tools/reference/contrastive_reference.py",
                "model_dir": os.path.relpath(model_dir, ROOT),
                "note": "runs[i].steps[s].candidates[j] = [token, p, penalty, position of the most "
                        "similar earlier state, score], best probability first; chosen indexes "
                        "them. tokens / penalties / scores: the chosen candidate at every step. "
                        "min_margin: smallest gap between the winner's score and the next best.",
                "max_new_tokens": MAX_NEW,
                "cases": cases,
            }
            path = os.path.join(out_dir, name + ".json")
            with open(path, "w", encoding="utf-8", newline="\n") as f:
                json.dump(ref, f, ensure_ascii=False, separators=(",", ":"))
                f.write("\n")
            print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
