#!/usr/bin/python3
"""Write tokenscope-tiny-llama's model card from measured figures only.

assets/models/tokenscope-tiny-llama/README.md is rendered from card_data.json,
which holds what the pipeline and TokenScope's engine produced; nothing in it
is typed by hand.

    /usr/bin/python3 tools/train/make_llama_card.py collect [--cli build/tokenscope-cli]
        gathers train_summary.json and export_summary.json of the Llama-shaped
        model (tools/train/work/llama/), tokenscope-tiny's config.json and
        card_data.json, and what the engine measures on both models: the
        KV bytes per token (`tokenscope-cli --model DIR --memory`, checked
        against 2 x n_layer x KV heads x head_dim x 4), the token ids of the
        card's prompts (`--json` trace; they must be tokenscope-tiny's), the
        validation loss (`--eval-loss`) and greedy continuations of the
        card's prompts, into card_data.json; then renders README.md from it.
    /usr/bin/python3 tools/train/make_llama_card.py classroom --log LOG
        the classroom-safety figures: LOG is the output of
        `TOKENSCOPE_MODEL=assets/models/tokenscope-tiny-llama build/ts_tests
        --gtest_also_run_disabled_tests --gtest_filter='Classroom.*'`
        (its "stage on: N of M" and "stage off: N of M" lines); stored in
        card_data.json with the model's SHA-256 (a later collect keeps them
        while the model file is the same), then README.md is rendered again.
    /usr/bin/python3 tools/train/make_llama_card.py render
    /usr/bin/python3 tools/train/make_llama_card.py check
        exit 1 unless README.md is what card_data.json renders to, the engine
        and PyTorch validation losses agree within 0.01 nats, vocab.json and
        merges.txt are byte-identical to tokenscope-tiny's (and the engine
        gave both models the same ids), and the engine's KV bytes per token
        are the configs' figures.
"""
import argparse
import json
import os
import re
import struct
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODEL_DIR = os.path.join(ROOT, "assets", "models", "tokenscope-tiny-llama")
TARGET_DIR = os.path.join(ROOT, "assets", "models", "tokenscope-tiny")
sys.path.insert(0, HERE)
from make_model_card import (CLASSROOM_COMMAND, CLASSROOM_RULE, engine_eval_loss, engine_greedy,  # noqa: E402
                             fmt_int, greedy_lines, rel, run_cli, stage_counts, training_rows)
from make_draft_card import (TOKENIZER_FILES, card_arguments, card_problems, exit_with, load,  # noqa: E402
                             render_readme, sha256, val_rows)
from train import lr_at  # noqa: E402

F32_BYTES = 4


def safetensors_dtypes(path):
    """The dtypes of a safetensors file's tensors, from its header."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n).decode("utf-8"))
    return sorted({h["dtype"] for name, h in header.items() if name != "__metadata__"})


def llama_shape(cfg, export):
    """The rows of the shape table for the Llama-shaped model, from its HF config."""
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    return {"n_layer": cfg["num_hidden_layers"], "width": cfg["hidden_size"],
            "q_heads": cfg["num_attention_heads"], "kv_heads": cfg["num_key_value_heads"],
            "head_dim": head_dim, "mlp_width": cfg["intermediate_size"],
            "mlp": f"SwiGLU (`{cfg['hidden_act']}` gate x up, then down)",
            "norm": f"RMSNorm (eps {cfg['rms_norm_eps']:g})",
            "positions": f"RoPE, rope_theta {cfg['rope_theta']:g}",
            "context": cfg["max_position_embeddings"], "vocab": cfg["vocab_size"],
            "params": export["params"], "safetensors_bytes": export["safetensors_bytes"]}


def gpt2_shape(cfg, card):
    """The same rows for tokenscope-tiny, from its GPT-2 config and card."""
    n_inner = cfg.get("n_inner") or 4 * cfg["n_embd"]
    return {"n_layer": cfg["n_layer"], "width": cfg["n_embd"], "q_heads": cfg["n_head"],
            "kv_heads": cfg["n_head"], "head_dim": cfg["n_embd"] // cfg["n_head"], "mlp_width": n_inner,
            "mlp": f"`{cfg['activation_function']}`, up then down",
            "norm": f"LayerNorm (eps {cfg['layer_norm_epsilon']:g})",
            "positions": "learned (`wpe`)", "context": cfg["n_positions"], "vocab": cfg["vocab_size"],
            "params": card["export"]["params"], "safetensors_bytes": card["export"]["safetensors_bytes"]}


def kv_formula(shape):
    # K and V, every layer, the KV heads only, fp32.
    return 2 * shape["n_layer"] * shape["kv_heads"] * shape["head_dim"] * F32_BYTES


def engine_kv_bytes_per_token(cli, model_dir):
    """The KV pool's bytes per token as `tokenscope-cli --memory` prints them."""
    out, _ = run_cli(cli, ["--model", model_dir, "--memory", "--steps", "0", "--quiet", "--device", "cpu"])
    m = re.search(r"^  KV pool .*; (\d+) B per token", out, re.M)
    if not m:
        raise RuntimeError(f"no 'B per token' in the KV pool line of --memory: {out!r}")
    return int(m.group(1))


def engine_prompt_ids(cli, model_dir, prompt):
    """The ids the engine's tokenizer gives the prompt (the --json trace's prompt_tokens)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        run_cli(cli, ["--model", model_dir, "--prompt", prompt, "--steps", "0", "--quiet", "--no-attention",
                      "--device", "cpu", "--json", path])
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    return [t["id"] for t in trace["prompt_tokens"]], trace["model"]


def collect(args):
    train = load(os.path.join(args.work, "train_summary.json"))
    export = load(os.path.join(args.work, "export_summary.json"))
    target_card = load(os.path.join(TARGET_DIR, "card_data.json"))
    config = load(os.path.join(MODEL_DIR, "config.json"))
    target_config = load(os.path.join(TARGET_DIR, "config.json"))
    cli = args.cli if os.path.isabs(args.cli) else os.path.join(ROOT, args.cli)
    if not os.path.exists(cli):
        sys.exit(f"make_llama_card: {rel(cli)} not found; build it first")
    model_st = os.path.join(MODEL_DIR, "model.safetensors")
    if sha256(model_st) != export["model_sha256"]:
        sys.exit(f"make_llama_card: {rel(model_st)} is not the file export_summary.json describes")

    shape = llama_shape(config, export)
    shape["dtype"] = safetensors_dtypes(model_st)
    tshape = gpt2_shape(target_config, target_card)
    tshape["dtype"] = safetensors_dtypes(os.path.join(TARGET_DIR, "model.safetensors"))
    kv = {}
    for name, directory, s in (("llama", MODEL_DIR, shape), ("target", TARGET_DIR, tshape)):
        kv[name] = {"formula": kv_formula(s), "engine": engine_kv_bytes_per_token(cli, directory)}
        if kv[name]["engine"] != kv[name]["formula"]:
            sys.exit(f"make_llama_card: the engine's KV bytes per token of {rel(directory)} "
                     f"({kv[name]['engine']}) are not 2 x n_layer x KV heads x head_dim x 4 "
                     f"({kv[name]['formula']})")

    ids = []
    for p in export["prompts"]:
        mine, model_info = engine_prompt_ids(cli, MODEL_DIR, p)
        theirs, _ = engine_prompt_ids(cli, TARGET_DIR, p)
        if model_info["family"] != "llama" or model_info["parameters"] != export["params"]:
            sys.exit(f"make_llama_card: the engine did not load {rel(MODEL_DIR)} as the exported Llama "
                     f"model: {model_info}")
        ids.append({"prompt": p, "ids": mine, "target_ids": theirs})

    greedy = []
    for p in export["prompts"]:
        g = engine_greedy(cli, MODEL_DIR, p, export["greedy_steps"])
        g["prompt"] = p
        g["same_as_pytorch"] = g["continuation"] == export["pytorch_greedy"][p]
        greedy.append(g)

    tengine = target_card.get("engine", {})
    tclass = target_card.get("classroom")
    data = {
        "generated_by": "tools/train/make_llama_card.py collect",
        "train": train,
        "export": export,
        "shape": shape,
        "tokenizer": {
            "sha256": {name: sha256(os.path.join(MODEL_DIR, name)) for name in TOKENIZER_FILES},
            "tokenizer_json_sha256": sha256(os.path.join(MODEL_DIR, "tokenizer.json")),
            "prompt_ids": ids,
        },
        "target": {
            "name": "tokenscope-tiny",
            "shape": tshape,
            "pytorch_val_loss": target_card["export"]["pytorch_val_loss"],
            "tokens_seen": target_card["train"]["tokens_seen"],
            "engine_val_loss": tengine["val"]["mean_loss_nats"] if tengine.get("available") else None,
            "tokenizer_sha256": {name: sha256(os.path.join(TARGET_DIR, name)) for name in TOKENIZER_FILES},
            "classroom": ({k: tclass[k] for k in ("stage_on", "stage_off")} if tclass else None),
        },
        "engine": {"cli": rel(cli), "kv_bytes_per_token": kv,
                   "val": engine_eval_loss(cli, MODEL_DIR, args.val), "greedy": greedy},
    }
    # The classroom figures come from a separate run of 2,000 sampled
    # continuations: keep them while they are of this very model file.
    path = os.path.join(MODEL_DIR, "card_data.json")
    if os.path.exists(path):
        old = load(path).get("classroom")
        if old and old.get("model_sha256") == export["model_sha256"]:
            data["classroom"] = old
    write_data(data)
    render()


def write_data(d):
    with open(os.path.join(MODEL_DIR, "card_data.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(d, f, indent=2, ensure_ascii=False, sort_keys=True)
        f.write("\n")


def classroom(args):
    d = load(os.path.join(MODEL_DIR, "card_data.json"))
    now = stage_counts(args.log)
    if "on" not in now or "off" not in now:
        sys.exit(f"make_llama_card: {args.log} has no 'stage on' and 'stage off' lines")
    d["classroom"] = {"rule": CLASSROOM_RULE,
                      "command": f"TOKENSCOPE_MODEL={rel(MODEL_DIR)} {CLASSROOM_COMMAND}",
                      "stage_on": now["on"], "stage_off": now["off"],
                      "model_sha256": sha256(os.path.join(MODEL_DIR, "model.safetensors"))}
    write_data(d)
    render()


def schedule_text(t):
    """The learning-rate schedule that was run, with the re-plans train.py logged."""
    args = t["args"]
    lr = argparse.Namespace(**{k: args[k] for k in ("lr", "lr_min", "warmup")})
    text = (f"{args['warmup']} warm-up steps to {args['lr']:g}, then a cosine to {args['lr_min']:g} "
            f"at the plan's last step")
    changes = t.get("schedule_changes") or []
    if not changes:
        return text + f" (step {fmt_int(t['steps_final_plan'])})"
    total = t["steps_planned"]
    parts = []
    for step, new_total in changes:
        parts.append(f"at step {fmt_int(step)} the plan went from {fmt_int(total)} to {fmt_int(new_total)} "
                     f"steps and the cosine from there ends at step {fmt_int(new_total)} (learning rate "
                     f"{lr_at(step, total, lr):.3g} -> {lr_at(step, new_total, lr):.3g} at that step)")
        total = new_total
    return (text + f". Planned {fmt_int(t['steps_planned'])} steps; " + "; ".join(parts) +
            f" (replay: `--schedule {t['schedule_arg']}`)")


def rate(r):
    return (f"{fmt_int(r['with_listed'])} of {fmt_int(r['continuations'])} "
            f"({100.0 * r['with_listed'] / r['continuations']:.1f}%)")


def render_card(d):
    t, e, s, tg, eng, tok = d["train"], d["export"], d["shape"], d["target"], d["engine"], d["tokenizer"]
    ts = tg["shape"]
    kv = eng["kv_bytes_per_token"]
    L = []
    a = L.append
    a("# tokenscope-tiny-llama")
    a("")
    a("The Llama-shaped twin of tokenscope-tiny (the bundled GPT-2): the same data, tokenizer, context and "
      "width, in the shape of today's decoders (RMSNorm, rotary positions, a SwiGLU MLP, grouped-query "
      "attention). It was trained from scratch by `tools/train/train_llama.sh` on tokenscope-tiny's "
      "filtered corpora (see that model's card for the data, its banned-words filter and its licences) "
      "and is stored in the Hugging Face Llama layout (`config.json`, `model.safetensors`, "
      "`tokenizer.json`, `vocab.json`, `merges.txt`). Open it with `--model assets/models/tokenscope-tiny-llama`, "
      "or beside tokenscope-tiny with `tokenscope-cli --compare-model assets/models/tokenscope-tiny-llama`.")
    a("")
    a("_Every figure in this card is read from `card_data.json`, which `tools/train/make_llama_card.py collect` "
      "writes from the training pipeline's summaries and TokenScope's engine; `make_llama_card.py check` "
      "verifies the two agree._")
    a("")
    a("## Shape")
    a("")
    a("| | tokenscope-tiny-llama | tokenscope-tiny |")
    a("|---|---|---|")
    a(f"| Layers | {s['n_layer']} | {ts['n_layer']} |")
    a(f"| Width | {s['width']} | {ts['width']} |")
    a(f"| Query heads | {s['q_heads']} | {ts['q_heads']} |")
    a(f"| Key/value heads | {s['kv_heads']} (grouped-query: {s['q_heads'] // s['kv_heads']} query heads "
      f"share each) | {ts['kv_heads']} (one per query head) |")
    a(f"| Head dimension | {s['head_dim']} | {ts['head_dim']} |")
    a(f"| MLP | {s['mlp_width']} wide, {s['mlp']} | {ts['mlp_width']} wide, {ts['mlp']} |")
    a(f"| Norm | {s['norm']} | {ts['norm']} |")
    a(f"| Positions | {s['positions']} | {ts['positions']} |")
    a(f"| Context | {s['context']} tokens | {ts['context']} tokens |")
    a(f"| Vocabulary | {fmt_int(s['vocab'])} tokens | {fmt_int(ts['vocab'])} tokens |")
    a(f"| Parameters | {fmt_int(s['params'])} | {fmt_int(ts['params'])} |")
    a(f"| model.safetensors | {fmt_int(s['safetensors_bytes'])} bytes ({', '.join(s['dtype'])}) | "
      f"{fmt_int(ts['safetensors_bytes'])} bytes ({', '.join(ts['dtype'])}) |")
    a(f"| KV cache per token (fp32) | {fmt_int(kv['llama']['engine'])} bytes | "
      f"{fmt_int(kv['target']['engine'])} bytes |")
    a("")
    a(f"KV cache per token = 2 (K and V) x layers x key/value heads x head dimension x 4 bytes: "
      f"2 x {s['n_layer']} x {s['kv_heads']} x {s['head_dim']} x 4 = {fmt_int(kv['llama']['formula'])} against "
      f"2 x {ts['n_layer']} x {ts['kv_heads']} x {ts['head_dim']} x 4 = {fmt_int(kv['target']['formula'])}; "
      "the table's figures are the engine's (`tokenscope-cli --model DIR --memory`, the KV pool's bytes "
      "per token), which `collect` requires to be these.")
    a("")
    a("## Tokenizer")
    a("")
    same_files = tok["sha256"] == tg["tokenizer_sha256"]
    same_ids = all(p["ids"] == p["target_ids"] for p in tok["prompt_ids"])
    a("`vocab.json` and `merges.txt` are " + ("byte-identical to tokenscope-tiny's" if same_files else
      "NOT identical to tokenscope-tiny's") + f" (SHA-256 `{tok['sha256']['vocab.json']}` and "
      f"`{tok['sha256']['merges.txt']}`); `tokenizer.json` holds the same byte-level BPE in the Hugging Face "
      f"tokenizers format (SHA-256 `{tok['tokenizer_json_sha256']}`). For each of the card's "
      f"{len(tok['prompt_ids'])} prompts the engine gave this model " +
      ("the same token ids as tokenscope-tiny" if same_ids else "OTHER token ids than tokenscope-tiny") +
      " (the `prompt_tokens` of `tokenscope-cli --json`), so the two run as lanes on one prompt.")
    a("")
    a("## Training")
    a("")
    L.extend(training_rows(t))
    a(f"| Learning rate | {schedule_text(t)} |")
    a(f"| Wall-clock time | {t['elapsed_s'] / 60:.1f} min ({t['elapsed_s'] / 3600:.1f} h, summed over the "
      "resumed runs) |")
    a(f"| Where | {t['where']}, a machine shared with other jobs |")
    a(f"| Stopped by | {t['stopped_by']} |")
    a("")
    a("![loss curve](../../../docs/loss_curve_llama.png)")
    a("")
    a("## Validation loss")
    a("")
    a("Mean next-token cross-entropy (nats/token) on tokenscope-tiny's held-out documents "
      "(`tests/fixtures/bundled/val.txt`), by the same rule as that model's card (consecutive, "
      f"non-overlapping windows of {t['n_ctx']} tokens, each run from position 0).")
    a("")
    L.extend(val_rows(eng["val"], e))
    if tg.get("engine_val_loss") is not None:
        a(f"| tokenscope-tiny, for comparison (engine) | {tg['engine_val_loss']:.4f} | |")
    a(f"| tokenscope-tiny, for comparison (PyTorch) | {tg['pytorch_val_loss']:.4f} | |")
    a("")
    a(f"Engine against PyTorch: {abs(eng['val']['mean_loss_nats'] - e['pytorch_val_loss']):.2e} nats/token.")
    a("")
    if tg.get("tokens_seen"):
        a(f"The two losses do not rank the designs: tokenscope-tiny trained on {fmt_int(tg['tokens_seen'])} "
          f"tokens, this model on {fmt_int(t['tokens_seen'])} ({tg['tokens_seen'] / t['tokens_seen']:.1f} "
          "times fewer) and in a different shape, so the gap mixes the two.")
        a("")
    k = d.get("classroom")
    if k:
        a("## In a classroom")
        a("")
        a(f"Measured with TokenScope's engine: {k['rule']}. `{k['command']}` runs both.")
        a("")
        a("| Banned-words stage | tokenscope-tiny-llama | tokenscope-tiny |")
        a("|---|---|---|")
        tk = tg.get("classroom") or {}
        a(f"| on (the default) | {rate(k['stage_on'])} | "
          f"{rate(tk['stage_on']) if tk.get('stage_on') else 'not measured'} |")
        a(f"| off (`--no-ban-words`) | {rate(k['stage_off'])} | "
          f"{rate(tk['stage_off']) if tk.get('stage_off') else 'not measured'} |")
        a("")
    a("## Greedy continuations")
    a("")
    same = sum(1 for g in eng["greedy"] if g["same_as_pytorch"])
    a(f"Produced by TokenScope's engine, {e['greedy_steps']} new tokens each: "
      f"`tokenscope-cli --model assets/models/tokenscope-tiny-llama --prompt P --steps {e['greedy_steps'] - 1} "
      f"--greedy` (prefill picks the first token). {same} of {len(eng['greedy'])} are identical to "
      "PyTorch's greedy continuations.")
    a("")
    L.extend(greedy_lines(eng["greedy"]))
    a("## Reproduce")
    a("")
    a("```sh")
    a("tools/train/train.sh          # the corpora, the tokenizer and tokenscope-tiny")
    replay = f"SCHEDULE={t['schedule_arg']} " if t.get("schedule_arg") else ""
    a(f"{replay}tools/train/train_llama.sh    # this model, its fixtures and this card")
    if k:
        a(f"{k['command']} > classroom.log")
        a("tools/train/make_llama_card.py classroom --log classroom.log")
    a("```")
    a("")
    a("Training is deterministic for a given step plan and thread count; "
      "`tools/train/work/llama/train_summary.json` records the plan that was run.")
    a("")
    a("## Licence and limitations")
    a("")
    a("The weights and tokenizer are derived from tokenscope-tiny's corpora and inherit their terms. Like "
      "tokenscope-tiny, it is a tiny teaching model trained on a few million tokens: it makes grammatical "
      "slips, repeats itself under greedy decoding, knows little about the world, and can produce offensive "
      "text learned from its data.")
    return "\n".join(L) + "\n"


def render():
    render_readme(MODEL_DIR, render_card)


def check():
    d, problems = card_problems(MODEL_DIR, TARGET_DIR, render_card)
    for p in d["tokenizer"]["prompt_ids"]:
        if p["ids"] != p["target_ids"]:
            problems.append(f"the engine's ids of {p['prompt']!r} differ from tokenscope-tiny's")
    shapes = {"llama": d["shape"], "target": d["target"]["shape"]}
    for name, kv in d["engine"]["kv_bytes_per_token"].items():
        if not kv["engine"] == kv["formula"] == kv_formula(shapes[name]):
            problems.append(f"KV bytes per token of {name}: engine {kv['engine']}, formula {kv['formula']}")
    exit_with(problems)


def classroom_parser(sub):
    k = sub.add_parser("classroom")
    k.add_argument("--log", required=True)
    return [k]


def main():
    global MODEL_DIR, TARGET_DIR
    args = card_arguments(__doc__, os.path.join(HERE, "work", "llama"), MODEL_DIR, TARGET_DIR,
                          "tokenscope-tiny, the model compared with", classroom_parser)
    MODEL_DIR, TARGET_DIR = args.model_dir, args.target_dir
    {"collect": lambda: collect(args), "classroom": lambda: classroom(args), "render": render,
     "check": check}[args.cmd]()


if __name__ == "__main__":
    main()
