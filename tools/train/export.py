#!/usr/bin/python3
"""Export the trained checkpoint to the Hugging Face GPT-2 layout, draw the
loss curve, and write the PyTorch fixtures the engine's tests compare with.

    /usr/bin/python3 tools/train/export.py [--work tools/train/work]
    (the draft model: --name tokenscope-tiny-draft --work tools/train/work/draft
     --out assets/models/tokenscope-tiny-draft --fixtures tests/fixtures/bundled-draft
     --png docs/loss_curve_draft.png, as tools/train/train_draft.sh runs it;
     the Llama-shaped model, whose checkpoint says arch "llama": the same with
     --name tokenscope-tiny-llama, as tools/train/train_llama.sh runs it)

Writes:
    assets/models/tokenscope-tiny/   config.json, model.safetensors (F32, HF
                                     names, no "transformer." prefix, Conv1D
                                     [in, out], no lm_head: tied), vocab.json,
                                     merges.txt; a Llama-shaped checkpoint
                                     gets HF Llama names and config instead
                                     ([out, in] weights, tied, no lm_head)
                                     plus tokenizer.json and
                                     tokenizer_config.json
    docs/loss_curve.png              train / validation loss against tokens seen
    tests/fixtures/bundled/reference.json
                                     fixed prompts: token ids, last-position
                                     logits (full vocabulary), PyTorch greedy
                                     continuation; the PyTorch validation loss
                                     and the exact rule it was computed with
    tests/fixtures/bundled/val.txt   the validation text (byte-exact copy; a model exported
                                     with another --fixtures points at this one)
    tools/train/work/export_summary.json
                                     figures for the model card
"""
import argparse
import hashlib
import json
import os
import shutil
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import bpe  # noqa: E402
import safetensors_io  # noqa: E402
import gpt2  # noqa: E402
import llama  # noqa: E402
from hf_files import hf_config, write_config, f32_list  # noqa: E402

MODEL_NAME = "tokenscope-tiny"

# Prompts of the fixtures and the model card (the card's continuations are
# produced by the engine for the same prompts).
PROMPTS = [
    "Today's weather is so",
    "The old man walked into the",
    "In the morning, the children",
    "The president said that the",
    "She opened the door and saw",
    "The most important thing about music is",
    "Once upon a time, there was a",
    "It was a dark and stormy night.\n",
    "café 👋 naïve",
]
GREEDY_STEPS = 24

VAL_RULE = (
    "ids = the tokenizer's encoding of val.txt (the whole file, <|endoftext|> as the special token, "
    "nothing added at either end); N = len(ids); W = 256 (the model's n_ctx). The ids are cut into "
    "consecutive non-overlapping windows ids[k*W : min(N, (k+1)*W)] for k = 0, 1, ... while k*W + 1 < N; "
    "a window shorter than 2 tokens is dropped. Each window is run from position 0 with no context from "
    "earlier windows; inside a window, every token but the first is predicted from the ones before it. "
    "val_loss = sum of -ln softmax(logits[i])[ids_window[i+1]] over every prediction of every window, "
    "divided by the number of predictions (natural log: nats per token).")


def windows(n, w):
    out = []
    b = 0
    while b + 1 < n:
        e = min(n, b + w)
        if e - b < 2:
            break
        out.append((b, e))
        b += w
    return out


@torch.no_grad()
def val_loss(model, ids, w, dtype=torch.float32):
    total, count = 0.0, 0
    for b, e in windows(len(ids), w):
        x = torch.tensor(ids[b:e], dtype=torch.long).unsqueeze(0)
        logits = model(x)[0].to(dtype)
        lp = torch.log_softmax(logits[:-1].double(), dim=-1)
        tgt = torch.tensor(ids[b + 1:e], dtype=torch.long)
        total += -lp.gather(1, tgt.unsqueeze(1)).sum().item()
        count += e - b - 1
    return total / count, count, len(windows(len(ids), w))


@torch.no_grad()
def greedy(model, ids, steps, n_ctx):
    ids = list(ids)
    out = []
    for _ in range(steps):
        if len(ids) >= n_ctx:
            break
        logits = model(torch.tensor([ids]))[0, -1]
        nxt = int(torch.argmax(logits).item())
        out.append(nxt)
        ids.append(nxt)
    return out


def write_tokenizer_json(out, tok, n_ctx):
    """tokenizer.json and tokenizer_config.json beside vocab.json / merges.txt:
    the same byte-level BPE in the Hugging Face tokenizers format (GPT-2's
    pre-tokenization: ByteLevel with its regex), <|endoftext|> a special
    added token, nothing added at either end."""
    with open(os.path.join(out, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    with open(os.path.join(out, "merges.txt"), encoding="utf-8") as f:
        merges = [line.rstrip("\n") for line in f if line.strip() and not line.startswith("#version")]
    eot = tok.decode([tok.eot])
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
    data = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": tok.eot, "content": eot, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True}],
        "normalizer": None,
        "pre_tokenizer": byte_level,
        "post_processor": None,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "ignore_merges": False, "vocab": vocab, "merges": merges},
    }
    with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(data, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")
    config = {"add_bos_token": False, "add_eos_token": False, "bos_token": eot, "eos_token": eot,
              "model_max_length": n_ctx, "tokenizer_class": "PreTrainedTokenizerFast"}
    write_config(os.path.join(out, "tokenizer_config.json"), config)


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def plot(csv_path, png_path, summary, name):
    import csv
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(csv_path) as f:
        rows = list(csv.DictReader(f))
    tok = [int(r["tokens"]) / 1e6 for r in rows]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
    ax.plot(tok, [float(r["train_loss"]) for r in rows], label="train (mean since last point)")
    ax.plot(tok, [float(r["val_loss"]) for r in rows], label="validation (first windows, during training)")
    ax.set_xlabel("training tokens seen (millions)")
    ax.set_ylabel("loss (nats / token)")
    ax.set_title(f"{name}: {summary['params'] / 1e6:.2f} M parameters, "
                 f"{summary['steps_done']} steps")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(png_path, metadata={"Software": None})
    plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--name", default=MODEL_NAME, help="the model's name in the fixtures and the plot")
    ap.add_argument("--work", default=os.path.join(HERE, "work"))
    ap.add_argument("--out", default=os.path.join(ROOT, "assets", "models", MODEL_NAME))
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "tests", "fixtures", "bundled"))
    ap.add_argument("--png", default=os.path.join(ROOT, "docs", "loss_curve.png"))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    ck = torch.load(os.path.join(args.work, "ckpt.pt"))
    is_llama = ck["config"].get("arch") == "llama"
    if is_llama:
        cfg = llama.LlamaConfig(**ck["config"])
        new_model, hf_state = lambda: llama.Llama(cfg), llama.hf_state
    else:
        cfg = gpt2.Config(**ck["config"])
        new_model, hf_state = lambda: gpt2.GPT2(cfg), gpt2.hf_state
    model = new_model()
    model.load_state_dict(ck["model"])
    model.eval()
    tok = bpe.Tokenizer.load(os.path.join(args.work, "tok"))
    assert len(tok.encoder) == cfg.vocab_size

    # --- the model directory
    os.makedirs(args.out, exist_ok=True)
    tensors = hf_state(model)
    safetensors_io.write(os.path.join(args.out, "model.safetensors"), tensors, {"format": "pt"})
    if is_llama:
        hf_cfg = llama.hf_llama_config(cfg, tok.eot, tok.eot)
    else:
        hf_cfg = hf_config(cfg.vocab_size, cfg.n_ctx, cfg.n_embd, cfg.n_layer, cfg.n_head, tok.eot,
                           cfg.layer_norm_epsilon)
    write_config(os.path.join(args.out, "config.json"), hf_cfg)
    for name in ("vocab.json", "merges.txt"):
        shutil.copyfile(os.path.join(args.work, "tok", name), os.path.join(args.out, name))
    if is_llama:
        write_tokenizer_json(args.out, tok, cfg.n_ctx)

    # The exported file, read back, must give the trained model's logits.
    loaded, _ = safetensors_io.read(os.path.join(args.out, "model.safetensors"))
    check = new_model()
    sd = {}
    for n, a in loaded.items():
        t = torch.from_numpy(a)
        if n.endswith(".weight") and any(k in n for k in ("c_attn", "c_proj", "c_fc")):
            t = t.t()  # GPT-2's Conv1D [in, out] back to torch's [out, in]
        if is_llama:
            n = n[len("model."):] if n.startswith("model.") else n
        sd[n] = t
    check.load_state_dict(sd)
    check.eval()
    probe = torch.tensor([tok.encode(PROMPTS[0])])
    with torch.no_grad():
        assert torch.equal(check(probe), model(probe)), "exported weights differ from the checkpoint"

    # --- validation loss (fp32, as trained)
    with open(os.path.join(args.work, "val.txt"), "rb") as f:
        val_bytes = f.read()
    val_ids = tok.encode(val_bytes.decode("utf-8"))
    assert tok.decode_bytes(val_ids) == val_bytes
    vl, n_pred, n_win = val_loss(model, val_ids, cfg.n_ctx)
    print(f"validation loss {vl:.5f} nats/token over {n_pred} predictions in {n_win} windows", flush=True)

    # --- fixtures: logits in float64 from the float32 weights, rounded once
    model64 = new_model().double()
    model64.load_state_dict({k: v.double() for k, v in model.state_dict().items()})
    model64.eval()
    cases = []
    with torch.no_grad():
        for p in PROMPTS:
            ids, spans = tok.encode(p, with_spans=True)
            x = torch.tensor([ids])
            l64 = model64(x)[0, -1]
            l32 = model(x)[0, -1]
            cont = greedy(model, ids, GREEDY_STEPS, cfg.n_ctx)
            cases.append({
                "prompt": p,
                "token_ids": ids,
                "token_spans": [list(s) for s in spans],
                "last_logits": f32_list(l64.numpy()),
                "pytorch_fp32_vs_fp64_max_abs_diff": float((l32.double() - l64).abs().max().item()),
                "greedy_continuation_ids": cont,
                "greedy_continuation_text": tok.decode(cont),
            })
    os.makedirs(args.fixtures, exist_ok=True)
    # One copy of the validation text: a second model trained on the same
    # split (the draft) points at the bundled model's.
    bundled_fixtures = os.path.join(ROOT, "tests", "fixtures", "bundled")
    val_file = "val.txt"
    if os.path.abspath(args.fixtures) == os.path.abspath(bundled_fixtures):
        shutil.copyfile(os.path.join(args.work, "val.txt"), os.path.join(args.fixtures, "val.txt"))
    else:
        val_file = os.path.relpath(os.path.join(bundled_fixtures, "val.txt"), args.fixtures)
        with open(os.path.join(bundled_fixtures, "val.txt"), "rb") as f:
            if f.read() != val_bytes:
                sys.exit("export: tests/fixtures/bundled/val.txt is not this model's validation text")
    fixture = {
        "generator": "tools/train/export.py",
        "model_dir": f"assets/models/{args.name}",
        "note": "last_logits[v]: logits of the LAST prompt position for vocabulary id v, computed in float64 "
                "from the float32 weights of model.safetensors and rounded to float32. greedy_continuation_ids: "
                f"{GREEDY_STEPS} argmax steps by PyTorch in float32 (no repetition penalty). token_spans[t] = "
                "[begin, end) byte offsets of token t in the prompt's UTF-8 bytes.",
        "cases": cases,
        "validation": {
            "file": val_file,
            "sha256": hashlib.sha256(val_bytes).hexdigest(),
            "bytes": len(val_bytes),
            "tokens": len(val_ids),
            "window": cfg.n_ctx,
            "windows": n_win,
            "predictions": n_pred,
            "rule": VAL_RULE,
            "pytorch_val_loss": vl,
            "precision": "PyTorch float32 forward pass; log-softmax and sum in float64",
        },
    }
    with open(os.path.join(args.fixtures, "reference.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(fixture, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")

    # --- loss curve and the card's figures
    with open(os.path.join(args.work, "train_summary.json")) as f:
        summary = json.load(f)
    os.makedirs(os.path.dirname(args.png), exist_ok=True)
    plot(os.path.join(args.work, "loss.csv"), args.png, summary, args.name)
    out = {
        "model_name": args.name,
        "config": cfg.to_dict(),
        "params": model.num_params(),
        "safetensors_bytes": os.path.getsize(os.path.join(args.out, "model.safetensors")),
        "pytorch_val_loss": vl,
        "val_tokens": len(val_ids),
        "val_predictions": n_pred,
        "val_windows": n_win,
        "pytorch_greedy": {c["prompt"]: c["greedy_continuation_text"] for c in cases},
        "prompts": PROMPTS,
        "greedy_steps": GREEDY_STEPS,
        "model_sha256": sha256(os.path.join(args.out, "model.safetensors")),
    }
    with open(os.path.join(args.work, "export_summary.json"), "w") as f:
        json.dump(out, f, indent=2, ensure_ascii=False)
    print(json.dumps({k: v for k, v in out.items() if k != "pytorch_greedy"}, ensure_ascii=False))


if __name__ == "__main__":
    main()
