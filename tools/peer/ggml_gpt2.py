#!/usr/bin/env python3
"""TokenScope's CPU decode and prefill beside ggml's gpt-2 example.

Two steps, both offline:

  convert  writes a GPT-2 checkpoint in HF layout (config.json +
           model.safetensors, fp32: what `tokenscope-bench --write-random-124m`
           writes) as the file ggml's examples/gpt-2 programs load: f32
           weights, every linear layer stored [out][in] (ggml multiplies by
           rows), lm_head a copy of wte, and a stand-in vocabulary (one token
           per byte for ids 0-255, "<id>" above) since only the timings matter.
  compare  alternates runs of a built ggml gpt-2 program (`gpt-2-backend`) and
           `tokenscope-bench` on the same weights and thread count, so both see
           the same neighbours on a shared machine, and prints one JSON object:
           ggml's decode ms/token (128 tokens after a 1-token prompt) and its
           64-token prompt time, beside the bench's decode median and best at
           context 64 (with the read bound measured in that run) and prefill.
           --format q8 or q4 compares the block formats instead of f32: the
           converted f32 file is first quantised by ggml's own `gpt-2-quantize`
           (q8_0 or q4_0: the same matrices, wte/lm_head and the four layer
           matmuls, in 32-value blocks with an f16 scale, 34 or 18 bytes per
           block) and the bench runs with `--weights q8` or `q4`, so both read
           the same number of weight bytes a step. --format f16 writes ggml's
           f16 file (ftype 1: the same matrices in f16) from the checkpoint
           and runs the bench with `--weights f16`; --format bf16 sets the
           bench's bf16 beside that same f16 file (ggml's gpt-2 example has no
           bf16 file; the bytes a step are the same). The two quantise
           differently (TokenScope's q4 uses codes -7..7, ggml's Q4_0 -8..7, and
           ggml also rounds the activations to q8_0 for its dot products), so
           the figures compare speed, not outputs.

ggml is not vendored: build its gpt-2 example (and gpt-2-quantize for the
block formats) from a checkout yourself (cmake -DGGML_BUILD_EXAMPLES=ON, e.g. -DGGML_NATIVE=OFF -DGGML_AVX2=ON
-DGGML_FMA=ON -DGGML_F16C=ON to match TokenScope's x86-64-v3 build).
Needs numpy.
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys

import numpy as np

GGML_MAGIC = 0x67676D6C


def load_safetensors(path):
    raw = open(path, "rb").read()
    header_len = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8 : 8 + header_len])
    base = 8 + header_len

    def tensor(name):
        for key in (name, "transformer." + name):
            if key in header:
                meta = header[key]
                if meta["dtype"] != "F32":
                    sys.exit(f"{path}: {key} is {meta['dtype']}, only F32 is converted")
                begin, end = meta["data_offsets"]
                return np.frombuffer(raw[base + begin : base + end], dtype=np.float32).reshape(
                    meta["shape"]
                )
        sys.exit(f"{path}: no tensor {name}")

    return tensor


def convert(model_dir, out_path, f16=False):
    """f16: the file ggml's gpt-2 converters write with ftype 1 (wte, lm_head
    and the four layer matrices in f16; norms, biases and wpe f32)."""
    cfg = json.load(open(f"{model_dir}/config.json"))
    t = load_safetensors(f"{model_dir}/model.safetensors")
    vocab, n_layer = cfg["vocab_size"], cfg["n_layer"]
    with open(out_path, "wb") as f:
        f.write(struct.pack("i", GGML_MAGIC))
        for v in (vocab, cfg["n_positions"], cfg["n_embd"], cfg["n_head"], n_layer, int(f16)):
            f.write(struct.pack("i", v))  # the last: ftype, 0 = all f32, 1 = matrices f16
        f.write(struct.pack("i", vocab))
        for i in range(vocab):
            word = bytes([i]) if i < 256 else f"<{i}>".encode()
            f.write(struct.pack("i", len(word)))
            f.write(word)

        def put(name, array, matrix=False):
            half = f16 and matrix
            a = np.ascontiguousarray(array, dtype=np.float16 if half else np.float32)
            f.write(struct.pack("iii", a.ndim, len(name), int(half)))  # ggml type 1 = f16
            for size in reversed(a.shape):  # ggml lists the contiguous dimension first
                f.write(struct.pack("i", size))
            f.write(name.encode())
            f.write(a.tobytes())

        put("model/ln_f/g", t("ln_f.weight"))
        put("model/ln_f/b", t("ln_f.bias"))
        put("model/wte", t("wte.weight"), matrix=True)
        put("model/wpe", t("wpe.weight"))
        put("model/lm_head", t("wte.weight"), matrix=True)
        for i in range(n_layer):
            hf, gg = f"h.{i}.", f"model/h{i}/"
            for norm in ("ln_1", "ln_2"):
                put(gg + norm + "/g", t(hf + norm + ".weight"))
                put(gg + norm + "/b", t(hf + norm + ".bias"))
            for hf_name, gg_name in (
                ("attn.c_attn", "attn/c_attn"),
                ("attn.c_proj", "attn/c_proj"),
                ("mlp.c_fc", "mlp/c_fc"),
                ("mlp.c_proj", "mlp/c_proj"),
            ):
                # HF Conv1D is [in][out]
                put(gg + gg_name + "/w", t(hf + hf_name + ".weight").T, matrix=True)
                put(gg + gg_name + "/b", t(hf + hf_name + ".bias"))


def ggml_ms(binary, model, threads, prompt, n_predict):
    out = subprocess.run(
        [binary, "-m", model, "-t", str(threads), "-n", str(n_predict), "-b", "64", "-p", prompt,
         "--ignore-eos", "-s", "1"],
        # it prints the tokens it generates: stand-in bytes, not always UTF-8
        capture_output=True, text=True, errors="replace", check=True,
    ).stdout
    m = re.search(r"predict time =\s*([\d.]+) ms /\s*([\d.]+) ms per token", out)
    if not m:
        sys.exit("no 'predict time' line in the ggml program's output")
    return float(m.group(1)), float(m.group(2))


# TokenScope's --weights name for each compared format, and ggml's type name.
# bf16 has no ggml gpt-2 twin: it is set beside ggml's f16, the same bytes.
GGML_TYPE = {"f32": None, "f16": "f16", "bf16": "f16", "q8": "q8_0", "q4": "q4_0"}


def ggml_quantize(quantize_bin, f32_model, ggml_type, out_path):
    subprocess.run([quantize_bin, f32_model, out_path, ggml_type], capture_output=True,
                   text=True, errors="replace", check=True)
    return out_path


def bench(binary, model, threads, weights):
    out = subprocess.run(
        [binary, "--model", model, "--threads", str(threads), "--weights", weights, "--lanes",
         "1", "--decode-steps", "20", "--context", "64", "--prefill-tokens", "64"],
        capture_output=True, text=True, check=True,
    ).stdout
    d = json.loads(out)
    dec = next(x for x in d["decode"] if not x["trace"])
    pre = next(x for x in d["prefill"] if not x["trace"])
    return {
        "decode_ms_median": dec["ms_per_step_median"],
        "decode_ms_best": dec["ms_per_step_best"],
        "ratio_to_memory_bound_median": dec["ratio_to_memory_bound_median"],
        "read_bandwidth_gb_per_s": dec["read_bandwidth_gb_per_s"],
        "prefill_64_ms": pre["seconds"] * 1e3,
        "prefill_gflops": pre["gflops"],
    }


def compare(args):
    ggml_type = GGML_TYPE[args.format]
    ggml_model = args.ggml_model
    if ggml_type == "f16":
        ggml_model = f"{os.path.splitext(args.ggml_model)[0]}-f16.bin"
        convert(args.model, ggml_model, f16=True)
    elif ggml_type:
        quantize_bin = args.ggml_quantize or os.path.join(
            os.path.dirname(args.ggml_bin), "gpt-2-quantize")
        ggml_model = ggml_quantize(quantize_bin, args.ggml_model, ggml_type,
                                   f"{os.path.splitext(args.ggml_model)[0]}-{ggml_type}.bin")
    runs = []
    prompt64 = "abcdefgh" * 8  # 64 tokens with the stand-in vocabulary
    for _ in range(args.runs):
        _, decode_ms = ggml_ms(args.ggml_bin, ggml_model, args.threads, "A", 128)
        prefill_total, _ = ggml_ms(args.ggml_bin, ggml_model, args.threads, prompt64, 1)
        ours = bench(args.bench, args.model, args.threads, args.format)
        runs.append({
            "ggml_decode_ms_per_token": decode_ms,
            "ggml_prompt_64_plus_1_ms": prefill_total,
            "tokenscope": ours,
            "decode_speedup_over_ggml": decode_ms / ours["decode_ms_median"],
            "prefill_speedup_over_ggml": prefill_total / ours["prefill_64_ms"],
        })
    print(json.dumps({
        "format": args.format,
        "ggml_type": ggml_type or "f32",
        "threads": args.threads,
        "note": "ggml: 128 tokens after a 1-token prompt (contexts 1-128), and a 64-token "
                "prompt + 1 token, each its program's own 'predict time'; TokenScope: "
                "tokenscope-bench decode at context 64 (median step) and a 64-token prefill",
        "runs": runs,
    }, indent=2))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert")
    c.add_argument("--model", required=True, help="HF-layout GPT-2 directory (fp32 safetensors)")
    c.add_argument("--out", required=True, help="ggml gpt-2 model file to write")
    r = sub.add_parser("compare")
    r.add_argument("--ggml-bin", required=True, help="ggml's gpt-2-backend program")
    r.add_argument("--ggml-model", required=True, help="the (f32) file convert wrote")
    r.add_argument("--format", choices=sorted(GGML_TYPE), default="f32",
                   help="weight format of both sides (default f32); q8 / q4 quantise the "
                        "ggml file to q8_0 / q4_0 beside it (<name>-q8_0.bin) first; f16 and "
                        "bf16 write an f16 ggml file beside it (<name>-f16.bin) from --model")
    r.add_argument("--ggml-quantize", help="ggml's gpt-2-quantize program (default: "
                                           "beside --ggml-bin)")
    r.add_argument("--bench", default="build/tokenscope-bench")
    r.add_argument("--model", required=True, help="the same checkpoint, for tokenscope-bench")
    r.add_argument("--threads", type=int, default=2)
    r.add_argument("--runs", type=int, default=3)
    args = p.parse_args()
    if args.cmd == "convert":
        convert(args.model, args.out)
    else:
        compare(args)


if __name__ == "__main__":
    try:
        main()
    except (OSError, ValueError, KeyError, StopIteration) as e:
        sys.exit(f"ggml_gpt2.py: {type(e).__name__}: {e}")
    except subprocess.CalledProcessError as e:
        last = (e.stderr or "").strip().splitlines()[-1:] or ["no output"]
        sys.exit(f"ggml_gpt2.py: {e.cmd[0]} exited with {e.returncode}: {last[0]}")
