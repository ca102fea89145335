#!/usr/bin/python3
"""Write the draft model's card, assets/models/tokenscope-tiny-draft/README.md,
from figures the pipeline and TokenScope's engine produced; nothing in it is
typed by hand.

    /usr/bin/python3 tools/train/make_draft_card.py collect [--cli build/tokenscope-cli]
        gathers train_summary.json and export_summary.json of the draft
        (tools/train/work/draft/), the bundled model's card_data.json, and
        what the engine measures: the draft's validation loss
        (`tokenscope-cli --model DRAFT --eval-loss`) and its acceptance rate
        against tokenscope-tiny (speculative lanes, greedy and sampled, over
        the card's prompts; see ACCEPTANCE below) into card_data.json; then
        renders README.md from it.
    /usr/bin/python3 tools/train/make_draft_card.py render
    /usr/bin/python3 tools/train/make_draft_card.py check
        exit 1 unless README.md is what card_data.json renders to, the engine
        and PyTorch validation losses agree within 0.01 nats, and the
        tokenizer files are byte-identical to tokenscope-tiny's.
"""
import argparse
import hashlib
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODEL_DIR = os.path.join(ROOT, "assets", "models", "tokenscope-tiny-draft")
TARGET_DIR = os.path.join(ROOT, "assets", "models", "tokenscope-tiny")
VAL_TXT = os.path.join(ROOT, "tests", "fixtures", "bundled", "val.txt")
sys.path.insert(0, HERE)
from make_model_card import AGREE_NATS, engine_eval_loss, fmt_int, rel, run_cli  # noqa: E402
TOKENIZER_FILES = ("vocab.json", "merges.txt")
GAMMA = 4
NEW_TOKENS = 40
SAMPLE_SEEDS = [1, 2, 3, 4, 5]
ACCEPTANCE = (f"tokenscope-tiny generates {NEW_TOKENS} new tokens after each of the card's prompts in a "
              f"speculative lane spec={GAMMA} with this draft: greedy (one run per prompt) and sampled at "
              f"temperature 1.0 (seeds {', '.join(map(str, SAMPLE_SEEDS))} per prompt). The acceptance rate "
              "is the drafts accepted over the drafts proposed, summed over every round (a round near the "
              "end proposes fewer than 4: the tokens left); tokens per target pass is the tokens committed "
              "over the rounds (each round is one forward pass of tokenscope-tiny).")


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def spec_run(cli, prompt, strategy):
    """One speculative lane of tokenscope-tiny with the draft: its rounds."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        run_cli(cli, ["--model", TARGET_DIR, "--draft-model", MODEL_DIR, "--prompt", prompt,
                      "--strategy", strategy, "--steps", str(NEW_TOKENS - 1), "--no-attention",
                      "--quiet", "--json", path])
        with open(path, encoding="utf-8") as f:
            trace = json.load(f)
    rounds = drafted = accepted = committed = 0
    for step in trace["steps"]:
        for lane in step["lanes"]:
            sp = lane.get("speculative")
            if not sp:
                continue
            rounds += 1
            drafted += sp["gamma"]
            accepted += sp["accepted"]
            committed += len(sp["committed"])
    return {"rounds": rounds, "drafted": drafted, "accepted": accepted, "committed": committed}


def acceptance(cli, prompts):
    out = {}
    for mode in ("greedy", "sampled"):
        total = {"rounds": 0, "drafted": 0, "accepted": 0, "committed": 0, "runs": 0}
        for p in prompts:
            strategies = ([f"spec={GAMMA}"] if mode == "greedy" else
                          [f"spec={GAMMA},temperature=1.0,seed={s}" for s in SAMPLE_SEEDS])
            for strategy in strategies:
                r = spec_run(cli, p, strategy)
                for k in ("rounds", "drafted", "accepted", "committed"):
                    total[k] += r[k]
                total["runs"] += 1
        total["acceptance_rate"] = total["accepted"] / total["drafted"] if total["drafted"] else 0.0
        total["tokens_per_target_pass"] = total["committed"] / total["rounds"] if total["rounds"] else 0.0
        out[mode] = total
    return out


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def collect(args):
    train = load(os.path.join(args.work, "train_summary.json"))
    export = load(os.path.join(args.work, "export_summary.json"))
    target_card = load(os.path.join(TARGET_DIR, "card_data.json"))
    config = load(os.path.join(MODEL_DIR, "config.json"))
    cli = args.cli if os.path.isabs(args.cli) else os.path.join(ROOT, args.cli)
    if not os.path.exists(cli):
        sys.exit(f"make_draft_card: {rel(cli)} not found; build it first")
    data = {
        "generated_by": "tools/train/make_draft_card.py collect",
        "train": train,
        "export": {k: v for k, v in export.items() if k != "pytorch_greedy"},
        "config": {k: config[k] for k in ("vocab_size", "n_positions", "n_embd", "n_layer", "n_head")},
        "tokenizer_sha256": {name: sha256(os.path.join(MODEL_DIR, name)) for name in TOKENIZER_FILES},
        "target": {
            "name": "tokenscope-tiny",
            "params": target_card["export"]["params"],
            "safetensors_bytes": target_card["export"]["safetensors_bytes"],
            "n_layer": target_card["config"]["n_layer"],
            "n_embd": target_card["config"]["n_embd"],
            "n_head": target_card["config"]["n_head"],
            "n_positions": target_card["config"]["n_positions"],
            "pytorch_val_loss": target_card["export"]["pytorch_val_loss"],
            "tokenizer_sha256": {name: sha256(os.path.join(TARGET_DIR, name)) for name in TOKENIZER_FILES},
        },
        "engine": {"cli": rel(cli), "val": engine_eval_loss(cli, MODEL_DIR, args.val),
                   "acceptance": acceptance(cli, export["prompts"]), "rule": ACCEPTANCE,
                   "gamma": GAMMA, "new_tokens": NEW_TOKENS, "seeds": SAMPLE_SEEDS},
    }
    with open(os.path.join(MODEL_DIR, "card_data.json"), "w", encoding="utf-8", newline="\n") as f:
        json.dump(data, f, indent=2, ensure_ascii=False, sort_keys=True)
        f.write("\n")
    render()


def val_rows(engine_val, export):
    """The validation-loss table's header and its engine and PyTorch rows."""
    return ["| Computed by | Loss | Predictions |", "|---|---|---|",
            f"| TokenScope engine (`tokenscope-cli --eval-loss`) | {engine_val['mean_loss_nats']:.4f} | "
            f"{fmt_int(engine_val['predictions'])} |",
            f"| PyTorch (`tools/train/export.py`, float32) | {export['pytorch_val_loss']:.4f} | "
            f"{fmt_int(export['val_predictions'])} |"]


def render_card(d):
    t, e, cfg, tg, eng = d["train"], d["export"], d["config"], d["target"], d["engine"]
    acc = eng["acceptance"]
    L = []
    a = L.append
    a("# tokenscope-tiny-draft")
    a("")
    a("The draft model of TokenScope's speculative decoding lesson: a smaller GPT-2 that proposes tokens "
      "for tokenscope-tiny (the bundled model) to verify, `--draft-model assets/models/tokenscope-tiny-draft` "
      "with a `spec=N` lane. It was trained by `tools/train/train_draft.sh` on the same filtered corpora as "
      "tokenscope-tiny (see that model's card for the data, its banned-words filter and its licences), "
      "with the same tokenizer.")
    a("")
    a("## Shape")
    a("")
    a("| | draft | tokenscope-tiny |")
    a("|---|---|---|")
    a(f"| Layers | {cfg['n_layer']} | {tg['n_layer']} |")
    a(f"| Width (n_embd) | {cfg['n_embd']} | {tg['n_embd']} |")
    a(f"| Heads | {cfg['n_head']} | {tg['n_head']} |")
    a(f"| Context | {cfg['n_positions']} tokens | {tg['n_positions']} tokens |")
    a(f"| Vocabulary | {fmt_int(cfg['vocab_size'])} tokens | the same |")
    a(f"| Parameters | {fmt_int(e['params'])} | {fmt_int(tg['params'])} |")
    a(f"| model.safetensors | {fmt_int(e['safetensors_bytes'])} bytes (F32) | "
      f"{fmt_int(tg['safetensors_bytes'])} bytes |")
    a("")
    same = d["tokenizer_sha256"] == tg["tokenizer_sha256"]
    a("`vocab.json` and `merges.txt` are " + ("byte-identical to tokenscope-tiny's" if same else
      "NOT identical to tokenscope-tiny's") + f" (SHA-256 `{d['tokenizer_sha256']['vocab.json']}` and "
      f"`{d['tokenizer_sha256']['merges.txt']}`).")
    a("")
    a("## Training")
    a("")
    a("| | |")
    a("|---|---|")
    a(f"| Steps | {fmt_int(t['steps_done'])} (batch {t['batch']} x {t['n_ctx']} tokens) |")
    a(f"| Tokens seen | {fmt_int(t['tokens_seen'])} ({t['epochs']:.2f} epochs) |")
    args = t["args"]
    a(f"| Learning rate | {args['warmup']} warm-up steps to {args['lr']:g}, cosine to {args['lr_min']:g} |")
    a(f"| Wall-clock time | {t['elapsed_s'] / 60:.1f} min |")
    a(f"| Where | {t['where']}, a machine shared with other jobs |")
    a("")
    a("![loss curve](../../../docs/loss_curve_draft.png)")
    a("")
    a("## Validation loss")
    a("")
    a("Mean next-token cross-entropy (nats/token) on tokenscope-tiny's held-out documents "
      "(`tests/fixtures/bundled/val.txt`), by the same rule as that model's card.")
    a("")
    L.extend(val_rows(eng["val"], e))
    a(f"| tokenscope-tiny, for comparison (PyTorch) | {tg['pytorch_val_loss']:.4f} | |")
    a("")
    a("## Acceptance rate against tokenscope-tiny")
    a("")
    a(eng["rule"])
    a("")
    a("| Verification | Runs | Rounds | Drafts accepted / proposed | Acceptance rate | Tokens per target pass |")
    a("|---|---|---|---|---|---|")
    for mode in ("greedy", "sampled"):
        m = acc[mode]
        a(f"| {mode} | {m['runs']} | {fmt_int(m['rounds'])} | {fmt_int(m['accepted'])} / "
          f"{fmt_int(m['drafted'])} | {m['acceptance_rate']:.3f} | {m['tokens_per_target_pass']:.2f} |")
    a("")
    a("Greedy speculative decoding commits exactly tokenscope-tiny's greedy tokens whatever the draft "
      "proposes; sampled speculative decoding keeps tokenscope-tiny's distribution. The draft only changes "
      "how many tokens each pass of the big model yields.")
    a("")
    a("## Reproduce")
    a("")
    a("```sh")
    a("tools/train/train.sh          # the corpora, the tokenizer and tokenscope-tiny")
    a("tools/train/train_draft.sh    # this model, its fixtures and this card")
    a("```")
    a("")
    return "\n".join(L)


def render_readme(model_dir, render_card):
    """README.md of model_dir, rendered from its card_data.json."""
    d = load(os.path.join(model_dir, "card_data.json"))
    with open(os.path.join(model_dir, "README.md"), "w", encoding="utf-8", newline="\n") as f:
        f.write(render_card(d))


def card_problems(model_dir, target_dir, render_card):
    """(card_data.json, what is wrong with the card of a model that shares
    target_dir's tokenizer): README.md is not what card_data.json renders
    to, the engine's and PyTorch's validation losses differ by more than
    AGREE_NATS, or a tokenizer file is not byte-identical to target_dir's."""
    d = load(os.path.join(model_dir, "card_data.json"))
    with open(os.path.join(model_dir, "README.md"), encoding="utf-8") as f:
        card = f.read()
    problems = []
    if card != render_card(d):
        problems.append("README.md differs from what card_data.json renders to")
    if abs(d["engine"]["val"]["mean_loss_nats"] - d["export"]["pytorch_val_loss"]) > AGREE_NATS:
        problems.append("engine and PyTorch validation losses differ by more than 0.01 nats")
    for name in TOKENIZER_FILES:
        if sha256(os.path.join(model_dir, name)) != sha256(os.path.join(target_dir, name)):
            problems.append(f"{name} differs from tokenscope-tiny's")
    return d, problems


def exit_with(problems):
    for p in problems:
        print(p, file=sys.stderr)
    sys.exit(1 if problems else 0)


def card_arguments(doc, work, model_dir, target_dir, target_help, more_commands=lambda sub: []):
    """The command line of a second model's card: collect [--work --cli --val],
    render, check and the parsers more_commands(sub) adds, each with
    --model-dir and --target-dir (the model whose tokenizer it shares)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--work", default=work)
    c.add_argument("--cli", default="build/tokenscope-cli")
    c.add_argument("--val", default=VAL_TXT)
    for p in [c] + more_commands(sub) + [sub.add_parser("render"), sub.add_parser("check")]:
        p.add_argument("--model-dir", default=model_dir)
        p.add_argument("--target-dir", default=target_dir, help=target_help)
    return ap.parse_args()


def render():
    render_readme(MODEL_DIR, render_card)


def check():
    exit_with(card_problems(MODEL_DIR, TARGET_DIR, render_card)[1])


def main():
    global MODEL_DIR, TARGET_DIR
    args = card_arguments(__doc__, os.path.join(HERE, "work", "draft"), MODEL_DIR, TARGET_DIR,
                          "the model the draft drafts for")
    MODEL_DIR, TARGET_DIR = args.model_dir, args.target_dir
    if args.cmd == "collect":
        collect(args)
    elif args.cmd == "render":
        render()
    else:
        check()


if __name__ == "__main__":
    main()
