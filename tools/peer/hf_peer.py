#!/usr/bin/env python3
"""TokenScope's CUDA backend side by side with HF transformers (issue 4, item 6).

On a GPU machine, in one run on the same weights and prompt:
  1. builds a randomly initialised GPT-2-124M (GPT2Config defaults) and saves it
     with HF `save_pretrained` (config.json + model.safetensors), which
     TokenScope must load unchanged; the tokenizer files are the real `gpt2`
     ones when they are in the local HF cache, else a byte-level vocabulary
     (256 byte tokens + filler tokens to 50257 ids, no merges);
  2. compares logits: the prompt's last-position logits and the first
     --full-steps decode steps in full, then the top-5 logits of every step
     (TokenScope's trace) against HF's, all <= --tolerance (1e-3);
  3. compares greedy generation of --tokens (256) tokens: HF `generate` with its
     KV cache against `tokenscope-cli --device cuda --json`;
  4. prints tokens/s of both and their ratio (TokenScope engine time = the sum
     of its steps' forward times; also its whole-process wall time).
Writes OUT/peer.json; exit status 0 when logits and tokens agree.

  python3 tools/peer/hf_peer.py --cli build-gpu/tokenscope-cli --out peer-out
"""
import argparse
import json
import os
import subprocess
import sys
import time


def bytes_to_unicode():
    """GPT-2's reversible byte -> printable character table (the published scheme)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(printable, (chr(c) for c in chars)))


def write_byte_vocab(directory, vocab_size):
    """vocab.json with id b = byte b, then distinct two-byte filler tokens; no merges.
    No <|endoftext|>: neither side stops early, so both generate every token."""
    table = bytes_to_unicode()
    vocab = {table[b]: b for b in range(256)}
    i = 256
    for first in range(256):
        for second in range(256):
            if i >= vocab_size:
                break
            vocab[table[first] + table[second]] = i
            i += 1
    with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(directory, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True, help="path to tokenscope-cli")
    ap.add_argument("--out", default="peer-out", help="output directory (model + results)")
    ap.add_argument("--prompt", default="The quick brown fox jumps over the lazy dog. Once upon a time")
    ap.add_argument("--tokens", type=int, default=256, help="greedy tokens to generate")
    ap.add_argument("--full-steps", type=int, default=8, help="decode steps compared in full")
    ap.add_argument("--tolerance", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    if not torch.cuda.is_available():
        sys.exit("hf_peer: torch sees no CUDA device")
    os.makedirs(args.out, exist_ok=True)
    model_dir = os.path.join(args.out, "random-gpt2-124m")
    os.makedirs(model_dir, exist_ok=True)
    result = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0)}
    import transformers
    result["transformers"] = transformers.__version__

    # ---- 1. the model, saved the HF way ----
    torch.manual_seed(args.seed)
    config = GPT2Config()  # GPT-2 124M: 12 layers, 12 heads, 768 wide, 1024 context, 50257 tokens
    model = GPT2LMHeadModel(config).eval()
    model.save_pretrained(model_dir, safe_serialization=True)
    tokenizer = None
    try:
        from transformers import GPT2TokenizerFast
        tokenizer = GPT2TokenizerFast.from_pretrained("gpt2", local_files_only=True)
        tokenizer.save_pretrained(model_dir)
        result["tokenizer"] = "gpt2 (local HF cache)"
    except Exception as e:  # offline machine without the files
        write_byte_vocab(model_dir, config.vocab_size)
        result["tokenizer"] = f"byte-level fallback ({type(e).__name__})"
    if tokenizer is not None:
        prompt_ids = tokenizer.encode(args.prompt)
    else:
        prompt_ids = list(args.prompt.encode("utf-8"))
    result["prompt"] = args.prompt
    result["prompt_ids"] = prompt_ids
    n_new = args.tokens

    # ---- 2. HF: logits and greedy generate with its KV cache ----
    model = model.to("cuda")
    model.generation_config.eos_token_id = None  # generate every token
    model.generation_config.pad_token_id = 0
    ids = torch.tensor([prompt_ids], device="cuda")
    with torch.no_grad():
        prefill_logits = model(ids).logits[0, -1].float().cpu()
        gen_kwargs = dict(max_new_tokens=n_new, do_sample=False, use_cache=True,
                          return_dict_in_generate=True)
        try:
            traced = model.generate(ids, output_logits=True, **gen_kwargs)
            step_logits = [l[0].float().cpu() for l in traced.logits]
        except (TypeError, ValueError):  # older transformers: scores (= logits for plain greedy)
            traced = model.generate(ids, output_scores=True, **gen_kwargs)
            step_logits = [s[0].float().cpu() for s in traced.scores]
        hf_tokens = traced.sequences[0, len(prompt_ids):].tolist()
        model.generate(ids, max_new_tokens=8, do_sample=False)  # warm-up
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        timed = model.generate(ids, max_new_tokens=n_new, do_sample=False, use_cache=True)
        torch.cuda.synchronize()
        hf_seconds = time.perf_counter() - t0
    assert timed.shape[1] - len(prompt_ids) == n_new
    result["hf_seconds"] = hf_seconds
    result["hf_tokens_per_second"] = n_new / hf_seconds

    # ---- 3. TokenScope ----
    def run_cli(steps, json_path, extra):
        cmd = [args.cli, "--model", model_dir, "--device", "cuda", "--prompt", args.prompt,
               "--greedy", "--steps", str(steps), "--quiet", "--no-attention", "--json", json_path] + extra
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if p.returncode != 0:
            sys.exit(f"hf_peer: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr}")
        with open(json_path) as f:
            return json.load(f), wall

    # steps = decode steps after the prefill; the prefill picks the first token.
    full, _ = run_cli(args.full_steps - 1, os.path.join(args.out, "ts_full.json"), ["--json-full-logits"])
    run, wall = run_cli(n_new - 1, os.path.join(args.out, "ts_run.json"), [])
    result["tokenscope_backend"] = run.get("backend")
    result["tokenscope_device"] = run.get("device")
    if run.get("backend") != "cuda":
        sys.exit(f"hf_peer: TokenScope ran on {run.get('backend')}, not cuda")
    ts_prompt = [t["id"] for t in run["prompt_tokens"]]
    result["same_prompt_ids"] = ts_prompt == prompt_ids
    ts_tokens = run["lanes"][0]["generated"]
    engine_seconds = sum(s["seconds"] for s in run["steps"])
    result["tokenscope_engine_seconds"] = engine_seconds
    result["tokenscope_process_seconds"] = wall
    result["tokenscope_tokens_per_second_engine"] = len(ts_tokens) / engine_seconds
    result["tokenscope_tokens_per_second_process"] = len(ts_tokens) / wall
    result["tokens_per_second_ratio_engine"] = result["tokenscope_tokens_per_second_engine"] / result["hf_tokens_per_second"]
    result["tokens_per_second_ratio_process"] = result["tokenscope_tokens_per_second_process"] / result["hf_tokens_per_second"]

    # ---- logits ----
    worst = 0.0
    ts_steps = [s for s in full["steps"]]
    first = ts_steps[0]["lanes"][0]["logits"]
    d = max(abs(a - b) for a, b in zip(first, prefill_logits.tolist()))
    result["prefill_logits_max_abs_diff"] = d
    worst = max(worst, d)
    full_diffs = []
    for i, s in enumerate(ts_steps):
        if i >= len(step_logits) or full["lanes"][0]["generated"][:i] != hf_tokens[:i]:
            break
        got = s["lanes"][0]["logits"]
        full_diffs.append(max(abs(a - b) for a, b in zip(got, step_logits[i].tolist())))
    result["full_step_logits_max_abs_diff"] = full_diffs
    worst = max([worst] + full_diffs)
    top_diffs = []
    for i, s in enumerate(run["steps"]):
        if i >= len(step_logits) or ts_tokens[:i] != hf_tokens[:i]:
            break
        ref = step_logits[i]
        top_diffs.append(max(abs(t["logit"] - float(ref[t["id"]])) for t in s["lanes"][0]["top_logits"]))
    result["top5_logits_steps_compared"] = len(top_diffs)
    result["top5_logits_max_abs_diff"] = max(top_diffs) if top_diffs else None
    worst = max([worst] + top_diffs)
    result["logits_max_abs_diff"] = worst
    result["logits_within_tolerance"] = worst <= args.tolerance

    # ---- tokens ----
    n_same = 0
    while n_same < min(len(ts_tokens), len(hf_tokens)) and ts_tokens[n_same] == hf_tokens[n_same]:
        n_same += 1
    result["tokens_generated"] = {"tokenscope": len(ts_tokens), "hf": len(hf_tokens)}
    result["tokens_agreeing_prefix"] = n_same
    result["same_tokens"] = ts_tokens == hf_tokens
    if not result["same_tokens"] and n_same < len(step_logits):
        # A flip between two nearly equal logits is a tie, not a bug: say how close.
        ref = step_logits[n_same]
        top2 = torch.topk(ref, 2).values.tolist()
        result["first_divergence"] = {"step": n_same, "tokenscope": ts_tokens[n_same] if n_same < len(ts_tokens) else None,
                                      "hf": hf_tokens[n_same], "hf_top2_gap": top2[0] - top2[1]}
    with open(os.path.join(args.out, "peer.json"), "w") as f:
        json.dump(result, f, indent=2)
    for k in ("device", "tokenizer", "same_prompt_ids", "prefill_logits_max_abs_diff", "logits_max_abs_diff",
              "logits_within_tolerance", "same_tokens", "tokens_agreeing_prefix", "hf_tokens_per_second",
              "tokenscope_tokens_per_second_engine", "tokens_per_second_ratio_engine",
              "tokenscope_tokens_per_second_process", "tokens_per_second_ratio_process"):
        print(f"{k}: {result.get(k)}")
    if "first_divergence" in result:
        print("first_divergence:", result["first_divergence"])
    ok = result["logits_within_tolerance"] and result["same_tokens"] and result["same_prompt_ids"]
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
