#!/usr/bin/python3
"""Train the bundled GPT-2 on the tokenized corpus (CPU, PyTorch).

    /usr/bin/python3 tools/train/train.py --steps N [--deadline-minutes M] [--resume]
    (the Llama-shaped model: --arch llama [--n-kv-head K --n-inner I --rope-theta T],
     as tools/train/train_llama.sh runs it; the model is in llama.py)
    /usr/bin/python3 tools/train/train.py --trial 10      (measure throughput, write nothing)

Inputs (tools/train/work/): train.npy, val.npy (token ids from bpe.py encode).
Outputs (tools/train/work/):
    ckpt.pt      model, optimizer, step, tokens seen, config; written atomically
                 every --ckpt-minutes and at the end, so a killed run resumes
                 (--resume) or exports from the last one
    loss.csv     step, tokens, lr, train_loss, val_loss (val on a fixed subset),
                 elapsed_s
    train_summary.json   written at the end: steps done, tokens seen, time, why
                 it stopped

Batches are B contiguous windows of n_ctx+1 tokens at offsets drawn from a
generator seeded by (seed, step), so a resumed run sees the same batches as an
uninterrupted one. The learning rate warms up linearly, then follows a cosine
to lr_min at the last step.

--deadline-minutes is the safety valve for a shared machine. It limits the
total training time (across --resume). At every eval the run projects its
finish from the recent step time and re-aims the plan (see replan): shorter
when the machine is slower than planned, longer again (up to --steps) when it
is faster; the cosine follows the new last step, so the run still ends
annealed. Each such change is logged as [at_step, new_total] in
train_summary.json; passing them back with --schedule "s:t,s:t" replays the
exact same schedule (and so the same weights) without a deadline. If the time
is still exceeded, the run stops cleanly with a checkpoint.
"""
import argparse
import csv
import json
import math
import os
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2 import GPT2, Config  # noqa: E402
from llama import Llama, LlamaConfig  # noqa: E402

WORK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "work")


def lr_at(step, total, args):
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    t = min(1.0, (step - args.warmup) / max(1, total - args.warmup))
    return args.lr_min + 0.5 * (args.lr - args.lr_min) * (1.0 + math.cos(math.pi * t))


def replan(step, total, recent, left_s, max_steps):
    """The step plan that fits the time left, from the recent seconds per
    step. Shrinks when the machine is slower than planned, grows back (up to
    --steps) when it is faster; changes smaller than 5% are ignored, the plan
    never ends less than 10% of itself ahead, and it is not extended once 85%
    of it is done (the cosine is then coming down)."""
    sps = (recent[-1][1] - recent[0][1]) / (recent[-1][0] - recent[0][0])
    fit = step + int(max(0.0, left_s - 60.0) / sps)   # a minute for the final save
    new_total = max(min(fit, max_steps), min(total, step + max(1, total // 10)))
    if new_total > total and step >= 0.85 * total:
        return total
    if abs(new_total - total) < 0.05 * total:
        return total
    return new_total


def batch(data, step, args, T):
    rng = np.random.default_rng([args.seed, step])
    offs = rng.integers(0, len(data) - T - 1, size=args.batch)
    x = np.stack([data[o:o + T] for o in offs]).astype(np.int64)
    y = np.stack([data[o + 1:o + T + 1] for o in offs]).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


@torch.no_grad()
def val_loss(model, val, T, max_windows=None):
    """Mean loss over non-overlapping windows: window k feeds
    val[k*T : k*T+T] and predicts val[k*T+1 : k*T+T+1], for
    k = 0 .. (len(val)-1)//T - 1 (the tail is dropped)."""
    model.eval()
    n = (len(val) - 1) // T
    if max_windows:
        n = min(n, max_windows)
    total, count = 0.0, 0
    for s in range(0, n, 8):
        ks = range(s, min(n, s + 8))
        x = torch.from_numpy(np.stack([val[k * T:k * T + T] for k in ks]).astype(np.int64))
        y = torch.from_numpy(np.stack([val[k * T + 1:k * T + T + 1] for k in ks]).astype(np.int64))
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1), reduction="sum")
        total += loss.item()
        count += y.numel()
    model.train()
    return total / count


def make_optimizer(model, args):
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}],
                             lr=args.lr, betas=(0.9, 0.95), eps=1e-8)


def save_ckpt(path, model, opt, step, tokens, elapsed, args, cfg, total, changes):
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": step,
                "total": total, "changes": changes,
                "tokens_seen": tokens, "elapsed_s": elapsed, "args": vars(args),
                "config": cfg.to_dict()}, tmp)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", default=WORK)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--lr-min", type=float, default=1e-4)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=256)
    ap.add_argument("--n-ctx", type=int, default=256)
    ap.add_argument("--arch", choices=("gpt2", "llama"), default="gpt2")
    ap.add_argument("--n-kv-head", type=int, default=2, help="llama: key/value heads (grouped-query attention)")
    ap.add_argument("--n-inner", type=int, default=688, help="llama: SwiGLU hidden size")
    ap.add_argument("--rope-theta", type=float, default=10000.0, help="llama: rotary base")
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-windows", type=int, default=32)
    ap.add_argument("--ckpt-minutes", type=float, default=5.0)
    ap.add_argument("--deadline-minutes", type=float, default=0.0,
                    help="stop cleanly once this much wall-clock time has passed (0: no limit)")
    ap.add_argument("--schedule", default="",
                    help="replay schedule changes 'at_step:new_total,...' from a previous summary")
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--trial", type=int, default=0, help="time this many steps and exit")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    train = np.load(os.path.join(args.work, "train.npy"))
    val = np.load(os.path.join(args.work, "val.npy"))
    with open(os.path.join(args.work, "tok", "vocab.json"), encoding="utf-8") as f:
        vocab_size = len(json.load(f))
    if args.arch == "llama":
        cfg = LlamaConfig(vocab_size=vocab_size, n_ctx=args.n_ctx, n_embd=args.n_embd, n_layer=args.n_layer,
                          n_head=args.n_head, n_kv_head=args.n_kv_head, n_inner=args.n_inner,
                          rope_theta=args.rope_theta)
        model = Llama(cfg)
    else:
        cfg = Config(vocab_size=vocab_size, n_ctx=args.n_ctx, n_embd=args.n_embd,
                     n_layer=args.n_layer, n_head=args.n_head)
        model = GPT2(cfg)
    opt = make_optimizer(model, args)
    T = cfg.n_ctx
    print(f"params {model.num_params()} train tokens {len(train)} val tokens {len(val)}", flush=True)

    if args.trial:
        model.train()
        for s in range(args.trial + 2):
            if s == 2:
                t0 = time.time()   # first steps warm up allocators
            x, y = batch(train, s, args, T)
            _, loss = model(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        dt = time.time() - t0
        t1 = time.time()
        val_loss(model, val, T, args.eval_windows)
        ev = time.time() - t1
        print(json.dumps({"steps": args.trial, "s_per_step": dt / args.trial,
                          "tokens_per_s": args.trial * args.batch * T / dt, "eval_s": ev}), flush=True)
        return

    ckpt_path = os.path.join(args.work, "ckpt.pt")
    csv_path = os.path.join(args.work, "loss.csv")
    step, tokens, elapsed_before = 0, 0, 0.0
    replay = {}
    for item in filter(None, args.schedule.split(",")):
        a, b = item.split(":")
        replay[int(a)] = int(b)
    changes = []
    total = args.steps
    if args.resume and os.path.exists(ckpt_path):
        ck = torch.load(ckpt_path)
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
        step, tokens, elapsed_before = ck["step"], ck["tokens_seen"], ck["elapsed_s"]
        total, changes = ck.get("total", total), ck.get("changes", [])
        print(f"resumed at step {step}", flush=True)
        # Keep only the CSV rows the checkpoint covers.
        if os.path.exists(csv_path):
            with open(csv_path) as f:
                rows = list(csv.reader(f))
            with open(csv_path, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(rows[0])
                w.writerows(r for r in rows[1:] if int(r[0]) <= step)
    else:
        with open(csv_path, "w", newline="") as f:
            csv.writer(f).writerow(["step", "tokens", "lr", "train_loss", "val_loss", "elapsed_s"])

    start = time.time()
    last_ckpt = start
    deadline = args.deadline_minutes * 60.0 if args.deadline_minutes > 0 else None
    stop_reason = "steps"
    model.train()
    running, running_n = 0.0, 0
    recent = [(step, start)]   # (step, time) at evals, for the projection
    while step < total:
        if step in replay:
            total = replay[step]
            changes.append([step, total])
        lr = lr_at(step, total, args)
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batch(train, step, args, T)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        step += 1
        tokens += x.numel()
        running += loss.item()
        running_n += 1
        now = time.time()
        elapsed = elapsed_before + (now - start)
        if step % args.eval_every == 0 or step == total:
            vl = val_loss(model, val, T, args.eval_windows)
            tl = running / running_n
            running, running_n = 0.0, 0
            with open(csv_path, "a", newline="") as f:
                csv.writer(f).writerow([step, tokens, f"{lr:.6g}", f"{tl:.5f}", f"{vl:.5f}", f"{elapsed:.1f}"])
            print(f"step {step}/{total} tokens {tokens} lr {lr:.2e} train {tl:.4f} val {vl:.4f} "
                  f"{elapsed / 60:.1f} min", flush=True)
            recent.append((step, now))
            recent = recent[-3:]
            if deadline is not None and not replay and len(recent) >= 2 and step < total:
                new_total = replan(step, total, recent, deadline - elapsed, args.steps)
                if new_total != total:
                    total = new_total
                    changes.append([step, total])
                    print(f"deadline: plan changed to {total} steps", flush=True)
        if deadline is not None and elapsed >= deadline:
            stop_reason = "deadline"
            break
        if now - last_ckpt >= args.ckpt_minutes * 60:
            save_ckpt(ckpt_path, model, opt, step, tokens, elapsed, args, cfg, total, changes)
            last_ckpt = time.time()

    elapsed = elapsed_before + (time.time() - start)
    save_ckpt(ckpt_path, model, opt, step, tokens, elapsed, args, cfg, total, changes)
    summary = {"steps_planned": args.steps, "steps_final_plan": total, "schedule_changes": changes,
               "schedule_arg": ",".join(f"{a}:{b}" for a, b in changes), "steps_done": step, "tokens_seen": tokens,
               "batch": args.batch, "n_ctx": T, "train_tokens": int(len(train)),
               "epochs": tokens / len(train), "elapsed_s": elapsed, "stopped_by": stop_reason,
               "threads": args.threads, "where": "CPU (%d threads), PyTorch %s" % (args.threads, torch.__version__),
               "params": model.num_params(), "args": vars(args)}
    with open(os.path.join(args.work, "train_summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
