#!/usr/bin/env bash
# The GPU check: everything TokenScope's CUDA backend must show on a GPU, in
# phases that each finish well within 10 minutes, on an offline machine.
#
#   scripts/gpu-check.sh prepare          on a machine with apt and network:
#                                         download the build's .deb files into
#                                         build/device-kit/ (carry that folder
#                                         to the GPU machine)
#   scripts/gpu-check.sh [PHASE...]       on the GPU machine; PHASE is one of
#                                         build test sanitize bench peer report,
#                                         or all (the default: every phase in
#                                         that order)
#
# build     unpacks build/device-kit/*.deb (when present) into a private prefix
#           under the work folder (never into /), builds GoogleTest from its
#           sources there, and builds ts_tests, tokenscope-bench and
#           tokenscope-cli for the local GPU's architecture only
# test      every CUDA test (a test that skips on a GPU machine is a failure),
#           then the rest of the unit suite
# sanitize  compute-sanitizer memcheck on the kernel tests (120 s) and
#           racecheck on the attention kernels (120 s); a missing
#           compute-sanitizer, or one that cannot instrument this device, is
#           "not available", not a failure
# bench     tokenscope-bench --device cuda on a random GPT-2-124M (written once
#           to the work folder): fp32, context 1000, TF32, graphs off
# peer      tools/peer/hf_peer.py: HF transformers on the same weights (logits,
#           greedy tokens, tokens/s), when torch with CUDA and transformers are
#           importable
# report    OUT/report.md and OUT/report.json (also rewritten after every
#           phase, so a phase that is killed leaves the ones before it)
#
# Without a GPU every phase still runs and the report marks each GPU figure
# "not run". Output (OUT, default gpu-check-out/) stays small: logs are cut to
# their last lines; checkpoints, build prefix and large JSON go to WORK.
# Environment: TS_GPU_CHECK_OUT, TS_GPU_CHECK_WORK (default
# /tmp/tokenscope-gpu-check), TS_GPU_CHECK_BUILD (default build-gpu),
# TS_DEVICE_KIT (default build/device-kit), TS_GPU_CHECK_ARCHS (CUDA
# architectures to build; default: the local GPU's, else CMake's default
# list), TS_GPU_CHECK_BUILD_TIMEOUT (s, default 360), TS_JOBS.
# Exit status: 0 when no check of the phases run FAILED.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root="$(pwd)"
out="${TS_GPU_CHECK_OUT:-gpu-check-out}"
work="${TS_GPU_CHECK_WORK:-/tmp/tokenscope-gpu-check}"
build="${TS_GPU_CHECK_BUILD:-build-gpu}"
kit="${TS_DEVICE_KIT:-build/device-kit}"
jobs="${TS_JOBS:-$(nproc)}"
kit_packages=(nlohmann-json3-dev googletest)

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
export TS_FIXTURE_DIR="$root/tests/fixtures"
failed=0

# ---------------------------------------------------------------- prepare
prepare() {
  command -v apt-get >/dev/null 2>&1 || { echo "gpu-check prepare: needs apt-get (a Debian/Ubuntu machine)" >&2; return 1; }
  mkdir -p "$kit"
  rm -f "$kit"/*.deb
  if ! (cd "$kit" && apt-get download "${kit_packages[@]}"); then
    echo "gpu-check prepare: apt-get download failed; run 'apt-get update' and try again" >&2
    return 1
  fi
  (cd "$kit" && sha256sum ./*.deb >SHA256SUMS)
  {
    echo "# .deb files for an offline TokenScope GPU build (scripts/gpu-check.sh build unpacks them)"
    for p in "${kit_packages[@]}"; do
      echo "$p $(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ {print $2}')"
    done
  } >"$kit/MANIFEST"
  echo "gpu-check prepare: $(ls "$kit"/*.deb | wc -l) packages in $kit/ ($(du -sh "$kit" | cut -f1)):"
  ls -1 "$kit"/*.deb
  echo "Copy $kit/ to the GPU machine (same path in the checkout), then run scripts/gpu-check.sh there."
}

# ---------------------------------------------------------------- bookkeeping
# OUT/status.json: {check: {"result": ..., "detail": ..., "seconds": ...}}.
record() {  # record CHECK RESULT [DETAIL] [SECONDS]
  python3 - "$out/status.json" "$1" "$2" "${3:-}" "${4:-}" <<'EOF'
import json, os, sys
path, check, result, detail, seconds = sys.argv[1:]
try:
    with open(path) as f:
        status = json.load(f)
except Exception:
    status = {}
status[check] = {"result": result, "detail": detail}
if seconds:
    status[check]["seconds"] = float(seconds)
tmp = path + ".tmp"
with open(tmp, "w") as f:
    json.dump(status, f, indent=1)
os.replace(tmp, path)
EOF
  echo "gpu-check: $1: $2${3:+ ($3)}"
  case "$2" in FAILED*) failed=1 ;; esac
}

# Keeps the last lines of a log (the output folder stays small).
keep_tail() {  # keep_tail FILE [LINES]
  local f="$1" n="${2:-300}"
  [ -f "$f" ] || return 0
  if [ "$(wc -l <"$f")" -gt "$n" ]; then
    tail -n "$n" "$f" >"$f.tmp" && mv "$f.tmp" "$f"
  fi
}

# OUT/device.json: what nvidia-smi says about GPU 0 (or why there is none).
device_info() {
  python3 - "$out/device.json" <<'EOF'
import json, shutil, subprocess, sys
info = {"present": False}
smi = shutil.which("nvidia-smi")
if not smi:
    info["why"] = "nvidia-smi not found (no NVIDIA driver on this machine)"
else:
    q = "name,driver_version,compute_cap,memory.total"
    p = subprocess.run([smi, f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True, text=True)
    line = p.stdout.strip().splitlines()[0] if p.returncode == 0 and p.stdout.strip() else ""
    if not line:
        info["why"] = "nvidia-smi failed: " + (p.stderr.strip().splitlines() or ["no output"])[-1]
    else:
        name, driver, cc, mem = [x.strip() for x in line.split(",")]
        info.update(present=True, name=name, driver=driver, compute_capability=cc, memory=mem)
nvcc = shutil.which("nvcc")
if nvcc:
    v = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    info["nvcc"] = (v.strip().splitlines() or [""])[-1]
with open(sys.argv[1], "w") as f:
    json.dump(info, f, indent=1)
EOF
}
device_present() { python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["present"] else 1)' "$out/device.json"; }
device_why() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("why",""))' "$out/device.json"; }
local_arch() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d.get("compute_capability","").replace(".",""))' "$out/device.json"; }

# ---------------------------------------------------------------- build
# Unpacks the kit into WORK/prefix and builds GoogleTest there; prints the
# prefix for CMAKE_PREFIX_PATH (empty when there is no kit).
kit_prefix() {
  ls "$kit"/*.deb >/dev/null 2>&1 || return 0
  local prefix="$work/prefix" stamp="$work/prefix/.unpacked"
  if [ ! -f "$stamp" ] || [ -n "$(find "$kit" -name '*.deb' -newer "$stamp")" ]; then
    rm -rf "$prefix"
    mkdir -p "$prefix"
    for deb in "$kit"/*.deb; do
      if command -v dpkg-deb >/dev/null 2>&1; then
        dpkg-deb -x "$deb" "$prefix" || return 1
      else  # a .deb is an ar archive holding data.tar.*
        local tmp
        tmp="$(mktemp -d)"
        (cd "$tmp" && ar x "$(cd "$root" && realpath "$deb")" && tar -xf data.tar.* -C "$prefix") || return 1
        rm -rf "$tmp"
      fi
    done
    # GoogleTest comes as sources: built here with this machine's compiler.
    if [ -f "$prefix/usr/src/googletest/CMakeLists.txt" ]; then
      timeout 30 cmake -S "$prefix/usr/src/googletest" -B "$work/gtest-build" -DCMAKE_BUILD_TYPE=Release \
        -DBUILD_GMOCK=OFF -DCMAKE_INSTALL_PREFIX="$prefix/usr" >"$work/gtest-build.log" 2>&1 &&
        timeout 90 cmake --build "$work/gtest-build" -j"$jobs" >>"$work/gtest-build.log" 2>&1 &&
        cmake --install "$work/gtest-build" >>"$work/gtest-build.log" 2>&1 || {
        tail -20 "$work/gtest-build.log" >&2
        return 1
      }
    fi
    touch "$stamp"
  fi
  echo "$prefix/usr"
}

phase_build() {
  local t0=$SECONDS log="$out/logs/build.log" prefix archs gen=()
  : >"$log"
  if ! prefix="$(kit_prefix 2>>"$log")"; then
    record build "FAILED" "unpacking $kit or building GoogleTest from it (logs/build.log)" $((SECONDS - t0))
    keep_tail "$log"
    return
  fi
  archs="${TS_GPU_CHECK_ARCHS:-$(local_arch)}"
  local args=(-DCMAKE_BUILD_TYPE=Release -DTS_ENABLE_GUI=OFF -DTS_ENABLE_CUDA=ON)
  [ -n "$archs" ] && args+=(-DCMAKE_CUDA_ARCHITECTURES="$archs")
  [ -n "$prefix" ] && args+=(-DCMAKE_PREFIX_PATH="$prefix")
  if command -v ccache >/dev/null 2>&1; then
    args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
  echo "kit prefix: ${prefix:-none (system packages)}; architectures: ${archs:-CMake default}" >>"$log"
  if ! timeout 60 cmake -S . -B "$build" "${gen[@]}" "${args[@]}" >>"$log" 2>&1; then
    record build "FAILED" "configure (logs/build.log)" $((SECONDS - t0))
  elif ! grep -q "CUDA backend ON" "$log"; then
    record build "FAILED" "$(grep -m1 'CUDA backend OFF' "$log" | sed 's/^-- //')" $((SECONDS - t0))
  elif ! timeout "${TS_GPU_CHECK_BUILD_TIMEOUT:-360}" cmake --build "$build" -j"$jobs" --target ts_tests tokenscope-bench tokenscope-cli >>"$log" 2>&1; then
    record build "FAILED" "compile failed or passed its ${TS_GPU_CHECK_BUILD_TIMEOUT:-360} s (logs/build.log; run the build phase again to go on)" $((SECONDS - t0))
  else
    record build ok "architectures ${archs:-default}; dependencies from ${prefix:-the system}" $((SECONDS - t0))
  fi
  keep_tail "$log"
}

need_build() {
  if [ ! -x "$build/ts_tests" ] || [ ! -x "$build/tokenscope-bench" ] || [ ! -x "$build/tokenscope-cli" ]; then
    record "$1" "not run" "no build in $build (run the build phase)"
    return 1
  fi
}

# ---------------------------------------------------------------- test
# Summarises a gtest JSON file: "tests failures skipped" and the failed names.
gtest_summary() {
  python3 - "$1" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"0 0 0 unreadable ({type(e).__name__})")
    sys.exit()
tests = failed = skipped = 0
names = []
for suite in d.get("testsuites", []):
    for t in suite.get("testsuite", []):
        tests += 1
        if t.get("failures"):
            failed += 1
            names.append(f"{suite['name']}.{t['name']}")
        elif t.get("result") == "SKIPPED" or t.get("status") == "NOTRUN":
            skipped += 1
print(tests, failed, skipped, ",".join(names[:8]))
EOF
}

phase_test() {
  need_build cuda_tests || return
  local t0=$SECONDS filter='*Cuda*:*Gpu*:*GPU*'
  timeout 300 "$build/ts_tests" --gtest_filter="$filter" --gtest_output="json:$out/cuda_tests.json" \
    >"$out/logs/cuda_tests.log" 2>&1
  local rc=$?
  read -r n f s names <<<"$(gtest_summary "$out/cuda_tests.json")"
  if [ "$rc" -eq 124 ]; then
    record cuda_tests "FAILED" "timed out after 300 s" $((SECONDS - t0))
  elif [ "$rc" -ne 0 ] || [ "${f:-0}" -gt 0 ]; then
    record cuda_tests "FAILED" "$f of $n failed: $names" $((SECONDS - t0))
  elif ! device_present; then
    record cuda_tests "not run" "$s of $n skipped: no CUDA device ($(device_why))" $((SECONDS - t0))
  elif [ "${s:-0}" -gt 0 ]; then
    record cuda_tests "FAILED" "$s of $n skipped on a GPU machine: $(grep -m1 'no CUDA device' "$out/logs/cuda_tests.log")" $((SECONDS - t0))
  else
    record cuda_tests ok "$n tests" $((SECONDS - t0))
  fi
  keep_tail "$out/logs/cuda_tests.log"
  t0=$SECONDS
  timeout 200 "$build/ts_tests" --gtest_filter="-$filter" --gtest_output="json:$work/other_tests.json" \
    >"$out/logs/other_tests.log" 2>&1
  rc=$?
  read -r n f s names <<<"$(gtest_summary "$work/other_tests.json")"
  if [ "$rc" -eq 0 ]; then
    record other_tests ok "$n tests, $s skipped" $((SECONDS - t0))
  else
    record other_tests "FAILED" "rc $rc; $f of $n failed: $names" $((SECONDS - t0))
  fi
  keep_tail "$out/logs/other_tests.log"
}

# ---------------------------------------------------------------- sanitize
find_sanitizer() {
  command -v compute-sanitizer 2>/dev/null && return
  for p in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [ -x "$p" ] && { echo "$p"; return; }
  done
}

run_sanitizer() {  # run_sanitizer CHECK TOOL FILTER [EXTRA...]
  local check="$1" tool="$2" filter="$3" sanitizer t0=$SECONDS
  shift 3
  sanitizer="$(find_sanitizer)"
  if [ -z "$sanitizer" ]; then
    record "$check" "not available" "compute-sanitizer not found"
    return
  fi
  if ! device_present; then
    record "$check" "not run" "no CUDA device ($(device_why))"
    return
  fi
  local log="$out/logs/$check.log"
  timeout 120 "$sanitizer" --tool "$tool" "$@" --error-exitcode 3 "$build/ts_tests" \
    --gtest_filter="$filter" >"$log" 2>&1
  local rc=$? summary
  summary="$(grep -m1 'ERROR SUMMARY' "$log" | sed 's/^=* *//')"
  if [ "$rc" -eq 124 ]; then
    record "$check" "incomplete" "stopped at its 120 s budget; ${summary:-no error reported before}" $((SECONDS - t0))
  elif [ -z "$summary" ] && [ "$rc" -ne 0 ]; then
    # The sanitizer never got to the kernels: it refuses this device or
    # driver (some virtualised GPUs), which says nothing about TokenScope.
    record "$check" "not available" "compute-sanitizer could not run here: $(grep -v '^\s*$' "$log" | tail -1 | cut -c1-200)" $((SECONDS - t0))
  elif [ "$rc" -eq 0 ]; then
    record "$check" ok "$summary" $((SECONDS - t0))
  elif [ "$rc" -eq 3 ]; then
    record "$check" "FAILED" "$summary (logs/$check.log)" $((SECONDS - t0))
  else
    record "$check" "FAILED" "tests failed under $tool, rc $rc (logs/$check.log)" $((SECONDS - t0))
  fi
  keep_tail "$log" 200
}

phase_sanitize() {
  need_build memcheck || return
  run_sanitizer memcheck memcheck 'CudaKernels.*' --leak-check full
  run_sanitizer racecheck racecheck 'CudaKernels.Attention*'
}

# ---------------------------------------------------------------- bench
model="$work/random-124m"
ensure_model() {
  [ -f "$model/model.safetensors" ] && return 0
  mkdir -p "$work"
  # Writes the checkpoint before it picks a device; the tiny run after it is
  # only what the flag requires.
  timeout 120 "$build/tokenscope-bench" --device cuda --write-random-124m "$model" --prefill-tokens 1 \
    --context 1 --decode-steps 1 --lanes 1 >/dev/null 2>"$work/write-model.log"
  [ -f "$model/model.safetensors" ]
}

bench_run() {  # bench_run CHECK [ENV=VALUE...] -- BENCH ARGS...
  local check="$1" t0=$SECONDS envs=()
  shift
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  if [ $((SECONDS - bench_t0)) -gt 300 ]; then
    record "$check" "not run" "the bench phase's budget (300 s before a run starts) was spent"
    return
  fi
  if env "${envs[@]}" timeout 150 "$build/tokenscope-bench" --device cuda --model "$model" "$@" \
      >"$out/$check.json" 2>"$out/logs/$check.log"; then
    record "$check" ok "$*" $((SECONDS - t0))
  else
    record "$check" "FAILED" "$(tail -1 "$out/logs/$check.log" | cut -c1-200)" $((SECONDS - t0))
    rm -f "$out/$check.json"
  fi
}

phase_bench() {
  need_build bench || return
  if ! device_present; then
    record bench "not run" "no CUDA device ($(device_why))"
    return
  fi
  if ! ensure_model; then
    record bench "FAILED" "could not write the random GPT-2-124M: $(tail -1 "$work/write-model.log")"
    return
  fi
  bench_t0=$SECONDS
  bench_run bench_fp32 -- --prefill-tokens 1024 --context 64 --decode-steps 50 --lanes 1,2,4,8 --cache-compare 256
  bench_run bench_ctx1000 -- --prefill-tokens 128 --context 1000 --decode-steps 20 --lanes 1
  bench_run bench_tf32 TOKENSCOPE_CUDA_TF32=1 -- --prefill-tokens 1024 --context 64 --decode-steps 50 --lanes 1
  bench_run bench_no_graphs TOKENSCOPE_CUDA_GRAPHS=0 -- --prefill-tokens 128 --context 64 --decode-steps 50 --lanes 1
}

# ---------------------------------------------------------------- peer
phase_peer() {
  need_build peer || return
  if ! device_present; then
    record peer "not run" "no CUDA device ($(device_why))"
    return
  fi
  local why
  if ! why="$(python3 -c 'import torch, transformers, safetensors
assert torch.cuda.is_available(), "torch sees no CUDA device"' 2>&1)"; then
    record peer "not run" "python3 with CUDA torch + transformers: $(echo "$why" | tail -1 | cut -c1-160)"
    return
  fi
  if ! ensure_model; then
    record peer "FAILED" "could not write the random GPT-2-124M"
    return
  fi
  local t0=$SECONDS
  if timeout 400 python3 tools/peer/hf_peer.py --cli "$build/tokenscope-cli" --model "$model" \
      --work "$work/peer" --out "$out/peer.json" >"$out/logs/peer.log" 2>&1; then
    record peer ok "logits and 256 greedy tokens agree" $((SECONDS - t0))
  else
    record peer "FAILED" "$(tail -1 "$out/logs/peer.log" | cut -c1-200)" $((SECONDS - t0))
  fi
  keep_tail "$out/logs/peer.log"
}

# ---------------------------------------------------------------- report
write_report() {
  python3 - "$out" <<'EOF'
import json, os, sys
out = sys.argv[1]

def load(name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except Exception:
        return None

status = load("status.json") or {}
device = load("device.json") or {"present": False, "why": "device not probed"}
NOT_RUN = "not run"

def check_note(*names):
    for n in names:
        s = status.get(n)
        if s and s["result"] != "ok":
            return f"{n}: {s['result']}" + (f" ({s['detail']})" if s.get("detail") else "")
    return "not run"

figures = []
def figure(name, value, unit, target=None, better="lower", bound=None, why=None):
    f = {"name": name, "unit": unit}
    if value is None:
        f["value"] = NOT_RUN
        f["why"] = why or NOT_RUN
    else:
        f["value"] = value
    if target is not None:
        f["target"] = target
        if value is not None:
            f["meets_target"] = value <= target if better == "lower" else value >= target
    if bound is not None and value is not None:
        f["bound"] = bound
        f["ratio_to_bound"] = value / bound
    figures.append(f)

def by_trace(rows):
    return {r["trace"]: r for r in rows or []}

b = load("bench_fp32.json")
why = check_note("bench_fp32", "bench", "build")
pre = by_trace(b and b.get("prefill"))
dec = by_trace(b and b.get("decode"))
figure("prefill 1,024 tokens, tracing off", pre.get(False, {}).get("seconds") and pre[False]["seconds"] * 1e3, "ms", 5.0, why=why)
figure("prefill 1,024 tokens, attention + residuals traced", pre.get(True, {}).get("seconds") and pre[True]["seconds"] * 1e3, "ms", 10.0, why=why)
for trace, target, label in ((False, 0.300, "tracing off"), (True, 0.400, "attention + residuals traced")):
    d = dec.get(trace)
    figure(f"decode step, 1 lane, context 64, {label} (median)", d and d["ms_per_step_median"], "ms", target,
           bound=d and d["memory_bound_ms"], why=why)
lanes = {l["lanes"]: l for l in (b or {}).get("lanes", [])}
for k in (1, 2, 4, 8):
    l = lanes.get(k)
    figure(f"decode step, {k} lane{'s' if k > 1 else ''}", l and l["ms_per_step"], "ms", why=why)
figure("8 lanes / 1 lane", lanes.get(8) and lanes[8]["ratio_to_one_lane"], "x", 2.0, why=why)
c = load("bench_ctx1000.json")
d = by_trace(c and c.get("decode")).get(False)
figure("decode step, 1 lane, context 1000, tracing off (median)", d and d["ms_per_step_median"], "ms",
       bound=d and d["memory_bound_ms"], why=check_note("bench_ctx1000", "bench", "build"))
t = load("bench_tf32.json")
p = by_trace(t and t.get("prefill")).get(False)
figure("prefill 1,024 tokens, TF32 matmuls, tracing off", p and p["seconds"] * 1e3, "ms", 5.0,
       why=check_note("bench_tf32", "bench", "build"))
g = load("bench_no_graphs.json")
d = by_trace(g and g.get("decode")).get(False)
figure("decode step, context 64, CUDA graphs off (median)", d and d["ms_per_step_median"], "ms",
       why=check_note("bench_no_graphs", "bench", "build"))
peer = load("peer.json")
pw = check_note("peer", "build")
figure("TokenScope tokens/s / HF generate tokens/s (engine time)", peer and peer.get("tokens_per_second_ratio_engine"),
       "x", 10.0, better="higher", why=pw)
figure("logits vs HF transformers, max abs difference", peer and peer.get("logits_max_abs_diff"), "", 1e-3, why=pw)

# Parity tests (CPU vs CUDA at GPT-2 124M size, TF32) come from the test run.
tests = load("cuda_tests.json")
parity = {}
if tests:
    for suite in tests.get("testsuites", []):
        for tc in suite.get("testsuite", []):
            name = f"{suite['name']}.{tc['name']}"
            skipped = tc.get("result") == "SKIPPED"
            parity[name] = NOT_RUN if skipped else ("FAILED" if tc.get("failures") else "passed")
def test_result(name):
    return parity.get(name, check_note("cuda_tests", "build"))

bench_device = next((x.get("device_after_run") or x.get("device") for x in (b, c, t, g) if x), None)
graphs = NOT_RUN
if b and b.get("device_after_run"):
    s = b["device_after_run"]
    graphs = s[s.find("decode graphs"):].rstrip(")") if "decode graphs" in s else s
report = {
    "device": device,
    "backend_device": bench_device or NOT_RUN,
    "cuda_graphs": graphs,
    "tf32": "off in every run but bench_tf32 and the TF32 parity test (TOKENSCOPE_CUDA_TF32=1)",
    "checks": status,
    "figures": figures,
    "parity_tests": {
        "CPU vs CUDA, GPT-2 124M shape, 1,000-token context (logits <= 1e-3)":
            test_result("CudaBackend.MatchesTheCpuAtGpt2SmallSizeWithAThousandTokenContext"),
        "TF32 vs CPU (logits <= 1e-2)": test_result("CudaBackend.Tf32MatchesTheCpuAtItsOwnTolerance"),
        "decode across context buckets vs CPU": test_result("CudaBackend.DecodeAcrossContextBucketsEqualsTheCpu"),
        "graph replay == eager across buckets": test_result("CudaBackend.DecodeGraphReplayEqualsEagerAcrossBuckets"),
    },
}
if b:
    report["bench_bounds"] = b.get("machine")
if peer:
    report["peer"] = {k: v for k, v in peer.items() if not isinstance(v, (list, dict))}
report["failed"] = [k for k, v in status.items() if v["result"].startswith("FAILED")]
with open(os.path.join(out, "report.json.tmp"), "w") as f:
    json.dump(report, f, indent=1)
os.replace(os.path.join(out, "report.json.tmp"), os.path.join(out, "report.json"))

def fmt(x):
    if isinstance(x, float):
        return f"{x:.4g}"
    return "" if x is None else str(x)

md = ["# TokenScope GPU check", ""]
if device.get("present"):
    md.append(f"Device: {device['name']}, compute capability {device['compute_capability']}, "
              f"driver {device['driver']}, {device['memory']}")
else:
    md.append(f"Device: none ({device.get('why', '')})")
md += [f"CUDA compiler: {device.get('nvcc', 'not found')}",
       f"Backend: {report['backend_device']}",
       f"CUDA graphs (decode): {graphs}",
       f"TF32: {report['tf32']}", ""]
if b and b.get("machine"):
    m = b["machine"]
    md += [f"Bounds measured in the same run on the device: copy bandwidth {m['read_bandwidth_gb_per_s']:.0f} GB/s, "
           f"fp32 SGEMM {m['peak_gflops']:.0f} GFLOP/s", ""]
md += ["## Checks", "", "| check | result | detail | seconds |", "|---|---|---|---|"]
for k, v in status.items():
    md.append(f"| {k} | {v['result']} | {v.get('detail', '')} | {fmt(v.get('seconds'))} |")
md += ["", "## Figures", "", "| figure | value | target | meets | bound | ratio to bound |", "|---|---|---|---|---|---|"]
for f in figures:
    val = f["value"] if f["value"] == NOT_RUN else f"{fmt(f['value'])} {f['unit']}".strip()
    if f["value"] == NOT_RUN:
        val += f" ({f['why']})" if f.get("why") and f["why"] != NOT_RUN else ""
    meets = "" if "meets_target" not in f else ("yes" if f["meets_target"] else "NO")
    md.append(f"| {f['name']} | {val} | {fmt(f.get('target'))} | {meets} | {fmt(f.get('bound'))} | {fmt(f.get('ratio_to_bound'))} |")
md += ["", "## Parity tests", "", "| test | result |", "|---|---|"]
md += [f"| {k} | {v} |" for k, v in report["parity_tests"].items()]
if peer:
    md += ["", "## HF transformers peer", "", "| | |", "|---|---|"]
    md += [f"| {k} | {fmt(v)} |" for k, v in report["peer"].items()]
md += ["", "Failed: " + (", ".join(report["failed"]) if report["failed"] else "nothing"), ""]
with open(os.path.join(out, "report.md"), "w") as f:
    f.write("\n".join(md))
EOF
}

# ---------------------------------------------------------------- main
if [ "${1:-}" = prepare ]; then
  prepare
  exit $?
fi
phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(all)
if [ "${phases[0]}" = all ]; then phases=(build test sanitize bench peer report); fi
for p in "${phases[@]}"; do
  case "$p" in
    build | test | sanitize | bench | peer | report) ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-check: unknown phase '$p' (prepare, build, test, sanitize, bench, peer, report, all)" >&2; exit 2 ;;
  esac
done
mkdir -p "$out/logs" "$work"
out="$(cd "$out" && pwd)"
device_info
for p in "${phases[@]}"; do
  echo "gpu-check: phase $p"
  [ "$p" != report ] && "phase_$p"
  write_report
done
echo "gpu-check: report in $out/report.md"
[ "$failed" -eq 0 ]
