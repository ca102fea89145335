#!/usr/bin/env bash
# The one command for a GPU machine: build, test, benchmark and sanitize the CUDA backend:
#   scripts/gpu-check.sh [OUT_DIR]        (default: gpu-check-out/)
# 1. builds for the GPU it finds (CMAKE_CUDA_ARCHITECTURES from nvidia-smi's
#    compute capability: 90 on H100/H200) into build-gpu/;
# 2. runs the CUDA tests (a skip on a GPU machine counts as a failure) and the
#    whole suite;
# 3. runs tokenscope-bench --device cuda on a random GPT-2-124M (prefill of 1024
#    tokens, decode at context 64 and 1000, lanes), fp32 and TF32;
# 4. runs compute-sanitizer (memcheck on the CUDA tests; racecheck and
#    synccheck on the kernel tests);
# 5. runs the HF transformers peer (tools/peer/hf_peer.py) when torch and
#    transformers are installed;
# 6. writes OUT_DIR/report.json and OUT_DIR/report.md with every figure as a
#    ratio to its target / bound, measured in the same run.
# Exit status: 0 when every check passed, 1 otherwise (the report says which).
# Environment: TS_JOBS (build jobs), TS_SANITIZER_TIMEOUT (s, default 1800),
# TS_SKIP_SANITIZER=1, TS_SKIP_PEER=1.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
out="${1:-gpu-check-out}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
jobs="${TS_JOBS:-$(nproc)}"
status_file="$out/status.txt"
: >"$status_file"
note() { echo "gpu-check: $*" | tee -a "$out/log.txt"; }
record() { echo "$1=$2" >>"$status_file"; note "$1: $2"; }

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if ! command -v nvidia-smi >/dev/null 2>&1; then
  note "nvidia-smi not found: this is not a GPU machine (or the driver is missing)"
  exit 1
fi
nvidia-smi >"$out/nvidia-smi.txt" 2>&1
gpu_line="$(nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv,noheader | head -1)"
cc="$(echo "$gpu_line" | cut -d, -f2 | tr -d ' .')"
if ! [[ "$cc" =~ ^[0-9]+$ ]]; then
  note "could not read the compute capability from nvidia-smi ('$gpu_line')"
  exit 1
fi
note "GPU: $gpu_line -> CMAKE_CUDA_ARCHITECTURES=$cc"
echo "$gpu_line" >"$out/gpu.txt"

# ---- 1. build ----
build="build-gpu"
if cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTS_ENABLE_GUI=OFF \
     -DCMAKE_CUDA_ARCHITECTURES="$cc" -DTS_CUDA_KEEP_ARCHITECTURES=ON >"$out/configure.log" 2>&1 &&
   grep -q "CUDA backend ON" "$out/configure.log" &&
   cmake --build "$build" -j"$jobs" >"$out/build.log" 2>&1; then
  record build ok
else
  record build FAILED
  tail -40 "$out/configure.log" "$out/build.log" 2>/dev/null
  exit 1
fi

# ---- 2. tests ----
"$build/ts_tests" --gtest_filter='*Cuda*' --gtest_output="json:$out/cuda_tests.json" \
  >"$out/cuda_tests.log" 2>&1
cuda_rc=$?
skipped="$(grep -c '^\[  SKIPPED \] ' "$out/cuda_tests.log" || true)"
if [ "$cuda_rc" -eq 0 ] && [ "$skipped" -eq 0 ]; then
  record cuda_tests ok
elif [ "$cuda_rc" -eq 0 ]; then
  record cuda_tests "FAILED (skipped on a GPU machine: $(grep -m1 'no CUDA device' "$out/cuda_tests.log"))"
else
  record cuda_tests FAILED
fi
if "$build/ts_tests" --gtest_output="json:$out/all_tests.json" >"$out/all_tests.log" 2>&1; then
  record all_tests ok
else
  record all_tests FAILED
fi

# ---- 3. benchmark ----
model="$out/random-124m"
bench="$build/tokenscope-bench"
if "$bench" --device cuda --write-random-124m "$model" --prefill-tokens 1024 --context 64 \
     --decode-steps 50 --lanes 1,2,4,8 --cache-compare 256 >"$out/bench_cuda.json" 2>"$out/bench_cuda.log"; then
  record bench ok
else
  record bench FAILED
fi
if "$bench" --device cuda --model "$model" --prefill-tokens 128 --context 1000 --decode-steps 20 \
     --lanes 1,4 >"$out/bench_cuda_ctx1000.json" 2>"$out/bench_cuda_ctx1000.log"; then
  record bench_long_context ok
else
  record bench_long_context FAILED
fi
if TOKENSCOPE_CUDA_TF32=1 "$bench" --device cuda --model "$model" --prefill-tokens 1024 --context 64 \
     --decode-steps 50 --lanes 1 >"$out/bench_cuda_tf32.json" 2>"$out/bench_cuda_tf32.log"; then
  record bench_tf32 ok
else
  record bench_tf32 FAILED
fi
if TOKENSCOPE_CUDA_GRAPHS=0 "$bench" --device cuda --model "$model" --prefill-tokens 128 --context 64 \
     --decode-steps 50 --lanes 1 >"$out/bench_cuda_nographs.json" 2>"$out/bench_cuda_nographs.log"; then
  record bench_no_graphs ok
else
  record bench_no_graphs FAILED
fi

# ---- 4. compute-sanitizer ----
sanitizer="$(command -v compute-sanitizer || true)"
[ -z "$sanitizer" ] && [ -x /usr/local/cuda/bin/compute-sanitizer ] && sanitizer=/usr/local/cuda/bin/compute-sanitizer
if [ "${TS_SKIP_SANITIZER:-0}" = 1 ]; then
  record sanitizer "skipped (TS_SKIP_SANITIZER=1)"
elif [ -z "$sanitizer" ]; then
  record sanitizer "FAILED (compute-sanitizer not found)"
else
  t="${TS_SANITIZER_TIMEOUT:-1800}"
  # The out-of-memory test asks the driver for terabytes on purpose.
  if timeout "$t" "$sanitizer" --tool memcheck --leak-check full --error-exitcode 1 \
       "$build/ts_tests" --gtest_filter='CudaKernels.*:CudaBackend.*:-CudaBackend.OutOfMemoryIsAClearMessage' \
       >"$out/memcheck.log" 2>&1; then
    record memcheck ok
  else
    record memcheck "FAILED (see memcheck.log)"
  fi
  for tool in racecheck synccheck; do
    if timeout "$t" "$sanitizer" --tool "$tool" --error-exitcode 1 \
         "$build/ts_tests" --gtest_filter='CudaKernels.*' >"$out/$tool.log" 2>&1; then
      record "$tool" ok
    else
      record "$tool" "FAILED (see $tool.log)"
    fi
  done
fi

# ---- 5. the HF transformers peer ----
if [ "${TS_SKIP_PEER:-0}" = 1 ]; then
  record peer "skipped (TS_SKIP_PEER=1)"
elif python3 -c 'import torch, transformers; assert torch.cuda.is_available()' >/dev/null 2>&1; then
  if python3 tools/peer/hf_peer.py --cli "$build/tokenscope-cli" --out "$out/peer" \
       >"$out/peer.log" 2>&1; then
    record peer ok
  else
    record peer "FAILED (see peer.log)"
  fi
else
  record peer "skipped (python3 with torch + transformers and a CUDA torch is not installed)"
fi

# ---- 6. report ----
python3 - "$out" <<'EOF'
import json, os, sys
out = sys.argv[1]
def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except Exception:
        return None
status = {}
for line in open(os.path.join(out, "status.txt")):
    k, _, v = line.rstrip("\n").partition("=")
    status[k] = v
report = {"gpu": open(os.path.join(out, "gpu.txt")).read().strip(), "checks": status}

bw = None
tests = load("cuda_tests.json")
if tests:
    for suite in tests.get("testsuites", []):
        for t in suite.get("testsuite", []):
            if "copy_bandwidth_gb_per_s" in t:
                bw = float(t["copy_bandwidth_gb_per_s"]) * 1e9
    report["cuda_tests"] = {"tests": tests.get("tests"), "failures": tests.get("failures"),
                            "disabled": tests.get("disabled")}
report["device_copy_bandwidth_gb_per_s"] = bw and bw * 1e-9

figures = []
def figure(name, value, unit, target=None, bound=None, note=""):
    f = {"name": name, "value": value, "unit": unit, "note": note}
    if target is not None and value is not None:
        f["target"] = target
        f["ratio_to_target"] = value / target
        f["meets_target"] = value <= target
    if bound is not None and value is not None:
        f["bound"] = bound
        f["ratio_to_bound"] = value / bound
    figures.append(f)

b = load("bench_cuda.json")
if b:
    report["bench"] = b
    wbytes = b["weight_bytes_fp32"]
    bound_ms = wbytes / bw * 1e3 if bw else None
    pre = {p["trace"]: p for p in b["prefill"]}
    figure("prefill 1024 tokens, tracing off", pre[False]["seconds"] * 1e3, "ms", target=10.0)
    figure("prefill 1024 tokens, attention + residuals traced", pre[True]["seconds"] * 1e3, "ms",
           target=10.0)
    dec = {d["trace"]: d for d in b["decode"]}
    figure("decode step, batch 1, context 64, tracing off", dec[False]["ms_per_step"], "ms",
           target=0.300, bound=bound_ms, note="bound = fp32 weight bytes / measured copy bandwidth")
    figure("decode step, batch 1, context 64, attention + residuals traced", dec[True]["ms_per_step"],
           "ms", target=0.400, bound=bound_ms)
    for lane in b.get("lanes", []):
        figure(f"decode step, {lane['lanes']} lanes", lane["ms_per_step"], "ms", bound=bound_ms)
    for c in b.get("kv_cache_on_vs_off", []):
        report["kv_cache_on_vs_off"] = c
b = load("bench_cuda_ctx1000.json")
if b:
    dec = {d["trace"]: d for d in b["decode"]}
    bound_ms = b["weight_bytes_fp32"] / bw * 1e3 if bw else None
    figure("decode step, batch 1, context 1000, tracing off", dec[False]["ms_per_step"], "ms",
           bound=bound_ms)
b = load("bench_cuda_tf32.json")
if b:
    pre = {p["trace"]: p for p in b["prefill"]}
    figure("prefill 1024 tokens, TF32 matmuls, tracing off", pre[False]["seconds"] * 1e3, "ms",
           target=10.0)
b = load("bench_cuda_nographs.json")
if b:
    dec = {d["trace"]: d for d in b["decode"]}
    figure("decode step, batch 1, context 64, CUDA graphs off", dec[False]["ms_per_step"], "ms",
           target=0.300)
peer = load("peer/peer.json")
if peer:
    report["peer"] = peer
    r = peer.get("tokens_per_second_ratio_engine")
    if r:
        figures.append({"name": "greedy tokens/s, TokenScope engine time / HF generate", "value": r,
                        "unit": "x", "target": 10.0, "meets_target": r >= 10.0})
report["figures"] = figures
report["passed"] = all(v == "ok" or v.startswith("skipped") for v in status.values()) and \
    not status.get("peer", "").startswith("FAILED")
with open(os.path.join(out, "report.json"), "w") as f:
    json.dump(report, f, indent=2)

md = ["# TokenScope GPU check", "", f"GPU: {report['gpu']}", ""]
if bw:
    md.append(f"Measured device-to-device copy bandwidth: {bw * 1e-9:.0f} GB/s")
    md.append("")
md += ["| check | result |", "|---|---|"] + [f"| {k} | {v} |" for k, v in status.items()]
md += ["", "| figure | value | target | ratio to target | bound | ratio to bound |", "|---|---|---|---|---|---|"]
for f in figures:
    def fmt(x, p=3):
        return "" if x is None else (f"{x:.{p}f}" if isinstance(x, float) else str(x))
    md.append(f"| {f['name']} | {fmt(f['value'])} {f['unit']} | {fmt(f.get('target'))} | "
              f"{fmt(f.get('ratio_to_target'), 2)} | {fmt(f.get('bound'))} | {fmt(f.get('ratio_to_bound'), 2)} |")
if peer:
    md += ["", "## HF transformers peer", "", "```", json.dumps({k: v for k, v in peer.items()
           if not isinstance(v, (list, dict))}, indent=1), "```"]
md += ["", f"Overall: {'PASSED' if report['passed'] else 'FAILED'}", ""]
with open(os.path.join(out, "report.md"), "w") as f:
    f.write("\n".join(md))
print("\n".join(md))
sys.exit(0 if report["passed"] else 1)
EOF
