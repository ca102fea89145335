#!/usr/bin/env python3
"""TokenScope's CUDA backend beside HF transformers, offline, on the same weights.

On a GPU machine with torch (CUDA) and transformers, and no network:
  1. builds GPT2LMHeadModel from the config.json of --model (the random
     GPT-2-124M that `tokenscope-bench --write-random-124m DIR` writes) and
     loads that directory's model.safetensors into it (the tensor names are
     HF's without the "transformer." prefix; the unembedding is tied to wte);
  2. writes a byte-level tokenizer (ids 0-255 = bytes, filler tokens up to the
     vocabulary size, no merges, no end-of-text) into --work, so a prompt of
     N ASCII characters is N tokens on both sides;
  3. compares logits, fp32 on both sides (TF32 off in torch): the prompt's
     last position and the first --full-steps greedy steps in full, then the
     top-5 logits of every step, all <= --tolerance (1e-3);
  4. compares --tokens (256) greedy tokens: HF `generate` (use_cache=True,
     batch 1) against `tokenscope-cli --device cuda --json`;
  5. times both in the same run: HF generate tokens/s (best of --repeats)
     against TokenScope's (the sum of its steps' forward times; also its whole
     process, loading included).
Writes --out (a small JSON, no logits); large files stay in --work.
Exit status 0 when the prompt ids, logits and tokens agree (a divergence at a
near-tie of HF's top two logits is accepted and reported: see verdict()).

  python3 tools/peer/hf_peer.py --cli build-gpu/tokenscope-cli \\
      --model /tmp/ts-gpu/random-124m --work /tmp/ts-gpu/peer --out out/peer.json
"""
import argparse
import json
import os
import subprocess
import sys
import time

DEFAULT_PROMPT = ("The quick brown fox jumps over the lazy dog while a small model counts "
                  "its tokens one at a time, layer by layer, head by head...")  # 128 characters


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


def load_hf_model(model_dir):
    """GPT2LMHeadModel from model_dir's config.json with model_dir's safetensors loaded."""
    import torch
    from safetensors.torch import load_file
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config.from_json_file(os.path.join(model_dir, "config.json"))
    model = GPT2LMHeadModel(config)
    state = load_file(os.path.join(model_dir, "model.safetensors"))
    state = {k if k.startswith("transformer.") else "transformer." + k: v for k, v in state.items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    # Buffers (the causal mask) and the tied unembedding are not in the file.
    missing = [k for k in missing if not k.endswith((".attn.bias", ".attn.masked_bias")) and k != "lm_head.weight"]
    if missing or unexpected:
        sys.exit(f"hf_peer: weights do not match GPT2LMHeadModel: missing {missing[:5]}, unexpected {unexpected[:5]}")
    if model.lm_head.weight.data_ptr() != model.transformer.wte.weight.data_ptr():
        with torch.no_grad():
            model.lm_head.weight.copy_(model.transformer.wte.weight)
    return model.eval(), config


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True, help="path to tokenscope-cli (a CUDA build)")
    ap.add_argument("--model", required=True, help="GPT-2 directory: config.json + model.safetensors")
    ap.add_argument("--work", required=True, help="folder for the tokenizer and TokenScope's JSON (large)")
    ap.add_argument("--out", required=True, help="where to write the summary (small JSON)")
    ap.add_argument("--prompt", default=DEFAULT_PROMPT, help="ASCII text: one token per character")
    ap.add_argument("--tokens", type=int, default=256, help="greedy tokens to generate")
    ap.add_argument("--full-steps", type=int, default=8, help="steps whose logits are compared in full")
    ap.add_argument("--repeats", type=int, default=3, help="timed generate runs (best is reported)")
    ap.add_argument("--tolerance", type=float, default=1e-3)
    args = ap.parse_args()
    if not args.prompt.isascii():
        sys.exit("hf_peer: --prompt must be ASCII (one byte-level token per character)")

    import torch
    import transformers

    if not torch.cuda.is_available():
        sys.exit("hf_peer: torch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 like TokenScope's default
    torch.backends.cudnn.allow_tf32 = False
    os.makedirs(args.work, exist_ok=True)
    result = {"torch": torch.__version__, "transformers": transformers.__version__,
              "device": torch.cuda.get_device_name(0), "model": args.model, "tf32": False}

    model, config = load_hf_model(args.model)
    tok_dir = os.path.join(args.work, "tokenizer")
    os.makedirs(tok_dir, exist_ok=True)
    write_byte_vocab(tok_dir, config.vocab_size)
    prompt_ids = list(args.prompt.encode("ascii"))
    result["prompt_tokens"] = len(prompt_ids)
    n_new = args.tokens
    result["new_tokens"] = n_new

    # ---- HF: logits and greedy generate with its KV cache ----
    model = model.to("cuda")
    model.generation_config.eos_token_id = None  # generate every token
    model.generation_config.pad_token_id = 0
    ids = torch.tensor([prompt_ids], device="cuda")
    with torch.no_grad():
        prefill_logits = model(ids).logits[0, -1].float().cpu()
        gen_kwargs = dict(max_new_tokens=n_new, min_new_tokens=n_new, do_sample=False, use_cache=True,
                          return_dict_in_generate=True)
        try:
            traced = model.generate(ids, output_logits=True, **gen_kwargs)
            step_logits = [l[0].float().cpu() for l in traced.logits]
        except (TypeError, ValueError):  # older transformers: scores (= logits for plain greedy)
            traced = model.generate(ids, output_scores=True, **gen_kwargs)
            step_logits = [s[0].float().cpu() for s in traced.scores]
        hf_tokens = traced.sequences[0, len(prompt_ids):].tolist()
        times = []
        for _ in range(max(1, args.repeats)):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            timed = model.generate(ids, max_new_tokens=n_new, min_new_tokens=n_new, do_sample=False,
                                   use_cache=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    if timed.shape[1] - len(prompt_ids) != n_new:
        sys.exit(f"hf_peer: HF generated {timed.shape[1] - len(prompt_ids)} tokens, not {n_new}")
    hf_seconds = min(times)
    result["hf_seconds"] = hf_seconds
    result["hf_tokens_per_second"] = n_new / hf_seconds

    # ---- TokenScope ----
    def run_cli(steps, json_path, extra):
        cmd = [args.cli, "--model", args.model, "--tokenizer", tok_dir, "--device", "cuda",
               "--prompt", args.prompt, "--greedy", "--steps", str(steps), "--quiet", "--no-attention",
               "--json", json_path] + extra
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if p.returncode != 0:
            sys.exit(f"hf_peer: {' '.join(cmd)} failed ({p.returncode}):\n{p.stderr[-2000:]}")
        with open(json_path) as f:
            return json.load(f), wall

    # steps = decode steps after the prefill; the prefill picks the first token.
    full, _ = run_cli(args.full_steps - 1, os.path.join(args.work, "ts_full.json"), ["--json-full-logits"])
    run, wall = run_cli(n_new - 1, os.path.join(args.work, "ts_run.json"), [])
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
    ts_steps = list(full["steps"])
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
    result["full_step_logits_max_abs_diff"] = max(full_diffs) if full_diffs else None
    result["full_steps_compared"] = len(full_diffs)
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
    ok, result["verdict"] = verdict(result, args.tolerance)
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    for k in ("device", "same_prompt_ids", "prefill_logits_max_abs_diff", "logits_max_abs_diff",
              "logits_within_tolerance", "same_tokens", "tokens_agreeing_prefix", "hf_tokens_per_second",
              "tokenscope_tokens_per_second_engine", "tokens_per_second_ratio_engine",
              "tokenscope_tokens_per_second_process", "tokens_per_second_ratio_process"):
        print(f"{k}: {result.get(k)}")
    if "first_divergence" in result:
        print("first_divergence:", result["first_divergence"])
    print("verdict:", result["verdict"])
    sys.exit(0 if ok else 1)


def verdict(result, tolerance):
    """(passed, one line). The logits must agree within `tolerance` wherever
    both sides saw the same tokens. The greedy tokens must agree, except that
    one divergence is accepted where HF's two top logits are within
    2 x tolerance of each other: each side's logits may be off by `tolerance`,
    so such a near-tie can flip either way (random weights give near-ties
    within a few hundred steps). Tokens after that step are not compared."""
    if not result.get("same_prompt_ids"):
        return False, "the prompt's token ids differ"
    if not result.get("logits_within_tolerance"):
        return False, f"logits differ by {result.get('logits_max_abs_diff'):.3g} > {tolerance:g}"
    n = result.get("tokens_agreeing_prefix")
    if result.get("same_tokens"):
        return True, f"logits within {tolerance:g} and all {n} greedy tokens agree"
    d = result.get("first_divergence")
    if d is None:
        return False, f"the greedy tokens differ after {n} (no HF logits there to judge a tie)"
    gap = d["hf_top2_gap"]
    if gap <= 2 * tolerance:
        return True, (f"logits within {tolerance:g}; greedy tokens agree for {n} steps, then a near-tie "
                      f"(HF's top two logits {gap:.3g} apart, <= {2 * tolerance:g}) went the other way")
    return False, f"greedy tokens differ at step {d['step']} where HF's top two logits are {gap:.3g} apart"

if __name__ == "__main__":
    main()
