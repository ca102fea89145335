#!/usr/bin/env bash
# The GPU check: what TokenScope's CUDA backend must show on a GPU, compiled
# here and only run there, on an offline GPU machine that may be lent for a
# few minutes (docs/gpu.md).
#
# Here (a machine with the CUDA toolkit, no GPU needed):
#   scripts/gpu-check.sh bundle [--from-build DIR] [--out DIR]
#       builds, GUI off, the GPU tests (ts_gpu_tests), tokenscope-bench and
#       tokenscope-cli for sm_90 + compute_90 PTX (TS_GPU_ARCHS to change) in
#       build-gpu-bundle/ (TS_GPU_BUNDLE_BUILD), then packs them into
#       build/gpu-bundle/ (--out): the binaries, the test fixtures and the
#       bundled model they read, the HF peer script, this script, the report
#       module, every shared library they need that is neither glibc nor
#       CUDA's, and a MANIFEST (sizes, checksums). At most 48 MiB. With
#       --from-build it packs an existing build folder instead of building.
#   scripts/gpu-check.sh prepare
#       downloads the .deb files the fallback build needs (GoogleTest,
#       nlohmann-json) into build/device-kit/; bundle copies them along.
#
# There (from the bundle; no compiler needed):
#   bash gpu-bundle/gpu-check.sh run
#       preflight (nvidia-smi, driver, the CUDA runtime the binaries resolve,
#       ldd of every binary), then the phases, each with its own time cap
#       inside one budget (TS_GPU_RUN_BUDGET, default 450 s, so that the whole
#       run fits a 10-minute command with 2 minutes to spare):
#         gpu_tests  every GPU test (a GPU test that skips on a GPU machine is
#                    a failure), 150 s
#         memcheck   compute-sanitizer memcheck on the kernel tests, 90 s
#                    ("not available" when the device refuses it)
#         bench      a random GPT-2 124M written there; fp32, CUDA graphs on,
#                    prefill 1,024, decode, lanes 1/2/4/8, cache on/off, 150 s
#         peer       HF transformers on the same weights (tools/peer), 120 s
#         bench_bf16 the same checkpoint's decode in bf16 weights, and f32,
#                    bf16 and f16 decode steps taken in turn in a run of
#                    their own (bench_formats16), 40 + 30 s
#       and the report (OUT/report.md, OUT/report.json), rewritten after every
#       phase so that a run cut short still reports what it measured. Only
#       when the bundle cannot load (a missing library, an older glibc) does
#       it fall back to building there from the checkout around the bundle
#       (-G Ninja, the device kit), which costs several minutes.
#   bash gpu-bundle/gpu-check.sh run-more
#       the optional second command: racecheck on the attention kernels, the
#       context-1000 bench, TF32 (bench and parity), CUDA graphs off.
#
# Without a GPU, run is a dry run: every GPU figure is "not run", with why.
# Environment: TS_GPU_CHECK_OUT (default gpu-check-out/), TS_GPU_CHECK_WORK
# (default /tmp/tokenscope-gpu-check: the 500 MB checkpoint and large JSON),
# TS_GPU_RUN_BUDGET (s), TS_GPU_ARCHS, TS_GPU_BUNDLE_BUILD, TS_DEVICE_KIT,
# TS_JOBS. Exit status: 0 when no check FAILED.
set -uo pipefail
self_dir="$(cd "$(dirname "$0")" && pwd)"
if [ -f "$self_dir/MANIFEST" ]; then
  # Running from a bundle. When the bundle sits in a checkout's build/ (as
  # scripts/gpu-check.sh bundle leaves it), that checkout serves the fallback.
  bundle="$self_dir"
  root="$(cd "$self_dir/../.." && pwd)"
  [ -f "$root/CMakeLists.txt" ] && [ -f "$root/scripts/gpu-check.sh" ] || root=""
else
  root="$(cd "$self_dir/.." && pwd)"
  bundle="$root/build/gpu-bundle"
fi
out="${TS_GPU_CHECK_OUT:-gpu-check-out}"
work="${TS_GPU_CHECK_WORK:-/tmp/tokenscope-gpu-check}"
kit="${TS_DEVICE_KIT:-${root:-.}/build/device-kit}"
jobs="${TS_JOBS:-$(nproc)}"
kit_packages=(nlohmann-json3-dev googletest)
max_bundle_mib=48
binaries=(ts_gpu_tests tokenscope-bench tokenscope-cli)

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
failed=0

usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }

# ---------------------------------------------------------------- bundle
# Shared libraries a binary needs that the GPU machine cannot be assumed to
# have in the same version: all but glibc's own and the CUDA toolkit's.
bundled_libs() {  # bundled_libs BINARY...
  ldd "$@" 2>/dev/null | awk '/=> \// {print $1, $3}' | sort -u | while read -r name path; do
    case "$name" in
      linux-vdso* | ld-linux* | libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | \
        libresolv.so* | libutil.so* | libmvec.so*) ;;
      libcuda.so* | libcudart* | libcublas* | libcublasLt* | libnvrtc* | libnvJitLink* | libcufft* | \
        libcurand* | libcusparse* | libcusolver* | libnvToolsExt*) ;;
      *) echo "$path" ;;
    esac
  done
}

cmd_bundle() {
  local from="" dest="$root/build/gpu-bundle"
  while [ $# -gt 0 ]; do
    case "$1" in
      --from-build) from="${2:?--from-build needs a folder}"; shift 2 ;;
      --out) dest="${2:?--out needs a folder}"; shift 2 ;;
      *) echo "gpu-check bundle: unknown argument '$1' (--from-build DIR, --out DIR)" >&2; return 2 ;;
    esac
  done
  [ -n "$root" ] || { echo "gpu-check bundle: run it from a checkout (scripts/gpu-check.sh bundle)" >&2; return 2; }
  local build t0=$SECONDS
  if [ -n "$from" ]; then
    build="$(cd "$from" && pwd)" || return 1
  else
    build="$root/${TS_GPU_BUNDLE_BUILD:-build-gpu-bundle}"
    command -v nvcc >/dev/null 2>&1 || { echo "gpu-check bundle: needs nvcc (the CUDA toolkit)" >&2; return 1; }
    local args=(-DCMAKE_BUILD_TYPE=Release -DTS_ENABLE_GUI=OFF -DTS_ENABLE_CUDA=ON
      "-DCMAKE_CUDA_ARCHITECTURES=${TS_GPU_ARCHS:-90}")
    if command -v ccache >/dev/null 2>&1; then
      args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
      export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
    fi
    mkdir -p "$build"
    if ! cmake -S "$root" -B "$build" "${args[@]}" >"$build/configure.log" 2>&1; then
      cat "$build/configure.log" >&2
      echo "gpu-check bundle: configure failed ($build/configure.log)" >&2
      return 1
    fi
    if ! grep -q "CUDA backend ON" "$build/configure.log"; then
      grep -m1 "CUDA backend OFF" "$build/configure.log" >&2
      echo "gpu-check bundle: the CUDA backend is off in this build" >&2
      return 1
    fi
    cmake --build "$build" -j"$jobs" --target "${binaries[@]}" || return 1
  fi
  local b
  for b in "${binaries[@]}"; do
    [ -x "$build/$b" ] || { echo "gpu-check bundle: $build/$b is missing" >&2; return 1; }
  done
  rm -rf "$dest"
  mkdir -p "$dest/bin" "$dest/lib" "$dest/models" "$dest/tools/peer"
  for b in "${binaries[@]}"; do cp "$build/$b" "$dest/bin/"; done
  # Debug sections are not needed to run; symbols stay for backtraces.
  command -v strip >/dev/null 2>&1 && strip --strip-debug "$dest"/bin/*
  local lib
  while read -r lib; do [ -n "$lib" ] && cp -L "$lib" "$dest/lib/"; done < <(bundled_libs "$dest"/bin/*)
  cp -r "$root/tests/fixtures" "$dest/fixtures"
  cp -r "$root/assets/models/tokenscope-tiny" "$dest/models/"
  cp "$root/tools/peer/hf_peer.py" "$dest/tools/peer/"
  cp "$root/tools/gpu_check/report.py" "$dest/report.py"
  cp "$root/scripts/gpu-check.sh" "$dest/gpu-check.sh"
  if ls "$kit"/*.deb >/dev/null 2>&1; then mkdir -p "$dest/device-kit" && cp "$kit"/* "$dest/device-kit/"; fi
  {
    echo "# TokenScope GPU bundle: built $(date -u +%Y-%m-%dT%H:%MZ) from $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo 'an unknown commit')"
    echo "# build: $build; CUDA architectures: $(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=//p' "$build/CMakeCache.txt")"
    echo "# nvcc: $(nvcc --version 2>/dev/null | tail -1)"
    echo "# needed from the GPU machine: glibc $(objdump -T "$dest"/bin/* 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1 | sed 's/GLIBC_//') or newer, the NVIDIA driver, and these CUDA libraries:"
    ldd "$dest"/bin/* 2>/dev/null | awk '/=>/ {print $1}' | grep -E '^lib(cudart|cublas|cublasLt|cuda)\.' | sort -u | sed 's/^/#   /'
    echo "# bytes sha256 path"
    (cd "$dest" && find . -type f ! -name MANIFEST | sort | while read -r f; do
      echo "$(stat -c %s "$f") $(sha256sum "$f" | cut -d' ' -f1) ${f#./}"
    done)
  } >"$dest/MANIFEST"
  local bytes mib
  bytes="$(du -sb "$dest" | cut -f1)"
  mib=$(((bytes + 1048575) / 1048576))
  if [ "$mib" -gt "$max_bundle_mib" ]; then
    echo "gpu-check bundle: $dest is $mib MiB, over the $max_bundle_mib MiB a GPU window can carry" >&2
    return 1
  fi
  local rel="${dest#"$root"/}"
  echo "gpu-check bundle: $rel/ ($mib MiB, $(grep -c '^[0-9]' "$dest/MANIFEST") files, $((SECONDS - t0)) s)"
  echo "Copy $rel/ to the GPU machine (in a checkout: the same path), then run there:"
  echo "  TS_GPU_CHECK_OUT=gpu-check-out bash $rel/gpu-check.sh run"
}

# ---------------------------------------------------------------- prepare
cmd_prepare() {
  command -v apt-get >/dev/null 2>&1 || { echo "gpu-check prepare: needs apt-get (a Debian/Ubuntu machine)" >&2; return 1; }
  mkdir -p "$kit"
  rm -f "$kit"/*.deb
  if ! (cd "$kit" && apt-get download "${kit_packages[@]}"); then
    echo "gpu-check prepare: apt-get download failed; run 'apt-get update' and try again" >&2
    return 1
  fi
  (cd "$kit" && sha256sum ./*.deb >SHA256SUMS)
  echo "gpu-check prepare: $(ls "$kit"/*.deb | wc -l) packages in $kit/ ($(du -sh "$kit" | cut -f1)); bundle carries them"
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

keep_tail() {  # keep_tail FILE [LINES]: the output folder stays small
  local f="$1" n="${2:-300}"
  [ -f "$f" ] || return 0
  if [ "$(wc -l <"$f")" -gt "$n" ]; then tail -n "$n" "$f" >"$f.tmp" && mv "$f.tmp" "$f"; fi
}

write_report() {
  local report="$bundle/report.py"
  [ -f "$report" ] || report="$root/tools/gpu_check/report.py"
  python3 "$report" "$out" || echo "gpu-check: writing the report failed" >&2
}

# Seconds a phase may take: its own cap, or what the run's budget has left
# (less 10 s for the report), whichever is smaller; 0 when under 15 s is left.
cap() {  # cap SECONDS
  local left=$((deadline - SECONDS - 10))
  if [ "$left" -lt 15 ]; then echo 0; elif [ "$1" -lt "$left" ]; then echo "$1"; else echo "$left"; fi
}

device_present() { python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["present"] else 1)' "$out/device.json"; }
device_why() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("why",""))' "$out/device.json"; }

# ---------------------------------------------------------------- preflight
# OUT/device.json: the GPU, its driver and CUDA version (nvidia-smi), the
# CUDA runtime and cuBLAS the binaries resolve, and whether they load.
cuda_lib_dirs() {  # where a CUDA runtime may live when the loader does not know it
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
    [ -d "$d" ] && echo "$d"
  done
  # pip's nvidia-* wheels (torch's CUDA libraries)
  timeout 5 python3 -c 'import glob, os, nvidia
for p in nvidia.__path__:
    for d in glob.glob(os.path.join(p, "*", "lib")): print(d)' 2>/dev/null
}

phase_preflight() {
  local t0=$SECONDS
  timeout 5 python3 - "$out/device.json" <<'EOF'
import json, shutil, subprocess, sys
info = {"present": False}
smi = shutil.which("nvidia-smi")
if not smi:
    info["why"] = "nvidia-smi not found (no NVIDIA driver on this machine)"
else:
    q = "name,driver_version,compute_cap,memory.total"
    try:
        p = subprocess.run([smi, f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True, text=True, timeout=4)
        line = p.stdout.strip().splitlines()[0] if p.returncode == 0 and p.stdout.strip() else ""
        if not line:
            info["why"] = "nvidia-smi failed: " + (p.stderr.strip().splitlines() or ["no output"])[-1]
        else:
            name, driver, cc, mem = [x.strip() for x in line.split(",")]
            info.update(present=True, name=name, driver=driver, compute_capability=cc, memory=mem)
            head = subprocess.run([smi], capture_output=True, text=True, timeout=4).stdout
            for part in head.split("|"):
                if "CUDA Version" in part:
                    info["driver_cuda_version"] = part.split("CUDA Version:")[-1].strip()
    except subprocess.TimeoutExpired:
        info["why"] = "nvidia-smi did not answer in 4 s"
with open(sys.argv[1], "w") as f:
    json.dump(info, f, indent=1)
EOF
  [ -f "$out/device.json" ] || echo '{"present": false, "why": "the device probe did not finish in 5 s"}' >"$out/device.json"
  # The binaries: the bundle's, with its libraries first on the loader path.
  bin="$bundle/bin"
  export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  if [ -x "$bin/ts_gpu_tests" ] && ldd "$bin/ts_gpu_tests" 2>&1 | grep -q 'libcudart.*not found'; then
    local d
    while read -r d; do
      LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
      ldd "$bin/ts_gpu_tests" 2>&1 | grep -q 'libcudart.*not found' || break
    done < <(cuda_lib_dirs)
  fi
  local b bad="" runtime
  for b in "${binaries[@]}"; do
    if [ ! -x "$bin/$b" ]; then
      bad+="$b missing; "
    elif ldd "$bin/$b" 2>&1 | grep -q 'not found'; then
      bad+="$b: $(ldd "$bin/$b" 2>&1 | grep 'not found' | head -2 | tr -s ' \t' ' ' | tr '\n' ';')"
    elif ! timeout 10 "$bin/$b" --help >/dev/null 2>&1; then
      bad+="$b does not start: $(timeout 10 "$bin/$b" --help 2>&1 >/dev/null | tail -1 | cut -c1-160); "
    fi
  done
  runtime="$(ldd "$bin/ts_gpu_tests" 2>/dev/null | awk '/libcudart|libcublas\./ {print $3}' | xargs -r -n1 readlink -f 2>/dev/null | xargs -r -n1 basename | tr '\n' ' ')"
  python3 - "$out/device.json" "${runtime:-not resolved}" "$bad" <<'EOF'
import json, sys
path, runtime, bad = sys.argv[1:]
d = json.load(open(path))
d["cuda_runtime_resolved"] = runtime.strip()
d["bundle_loads"] = not bad
if bad:
    d["bundle_problem"] = bad.strip()
json.dump(d, open(path, "w"), indent=1)
EOF
  if [ -z "$bad" ]; then
    record preflight ok "binaries load; CUDA libraries: ${runtime:-none resolved}" $((SECONDS - t0))
    return 0
  fi
  record preflight "bundle does not load" "$bad" $((SECONDS - t0))
  fallback_build
}

# ---------------------------------------------------------------- fallback build
# Only when the bundle cannot load: build the three binaries from the
# checkout around the bundle, for the local GPU only, with Ninja.
kit_prefix() {  # unpacks the device kit, builds GoogleTest; prints the prefix
  local k="$bundle/device-kit"
  ls "$k"/*.deb >/dev/null 2>&1 || k="$kit"
  ls "$k"/*.deb >/dev/null 2>&1 || return 0
  local prefix="$work/prefix"
  if [ ! -f "$prefix/.unpacked" ]; then
    rm -rf "$prefix" && mkdir -p "$prefix"
    local deb tmp
    for deb in "$k"/*.deb; do
      if command -v dpkg-deb >/dev/null 2>&1; then
        dpkg-deb -x "$deb" "$prefix" || return 1
      else  # a .deb is an ar archive holding data.tar.*
        tmp="$(mktemp -d)"
        (cd "$tmp" && ar x "$(realpath "$deb")" && tar -xf data.tar.* -C "$prefix") || return 1
        rm -rf "$tmp"
      fi
    done
    if [ -f "$prefix/usr/src/googletest/CMakeLists.txt" ]; then
      cmake -S "$prefix/usr/src/googletest" -B "$work/gtest-build" -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
        -DCMAKE_INSTALL_PREFIX="$prefix/usr" >"$work/gtest-build.log" 2>&1 &&
        cmake --build "$work/gtest-build" -j"$jobs" >>"$work/gtest-build.log" 2>&1 &&
        cmake --install "$work/gtest-build" >>"$work/gtest-build.log" 2>&1 || return 1
    fi
    touch "$prefix/.unpacked"
  fi
  echo "$prefix/usr"
}

fallback_build() {
  local t0=$SECONDS log="$out/logs/build.log" limit prefix arch
  limit="$(cap 300)"
  if [ -z "$root" ] || ! command -v cmake >/dev/null 2>&1 || ! command -v nvcc >/dev/null 2>&1; then
    record build "FAILED" "the bundle does not load and there is no checkout, cmake or nvcc to build with" 0
    return 1
  fi
  if [ "$limit" -eq 0 ]; then record build "not run" "the run's budget was spent"; return 1; fi
  : >"$log"
  prefix="$(kit_prefix 2>>"$log")" || { record build "FAILED" "unpacking the device kit (logs/build.log)" $((SECONDS - t0)); return 1; }
  arch="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("compute_capability","").replace(".",""))' "$out/device.json")"
  local b="$work/build" args=(-DCMAKE_BUILD_TYPE=Release -DTS_ENABLE_GUI=OFF -DTS_ENABLE_CUDA=ON)
  [ -n "$arch" ] && args+=(-DCMAKE_CUDA_ARCHITECTURES="$arch")
  [ -n "$prefix" ] && args+=(-DCMAKE_PREFIX_PATH="$prefix")
  command -v ninja >/dev/null 2>&1 && [ ! -f "$b/CMakeCache.txt" ] && args+=(-G Ninja)
  if timeout 60 cmake -S "$root" -B "$b" "${args[@]}" >>"$log" 2>&1 &&
    timeout "$limit" cmake --build "$b" -j"$jobs" --target "${binaries[@]}" >>"$log" 2>&1; then
    bin="$b"
    record build ok "built here for ${arch:-the default architectures} (the bundle did not load)" $((SECONDS - t0))
    keep_tail "$log"
    return 0
  fi
  record build "FAILED" "configure or compile failed or passed ${limit} s (logs/build.log)" $((SECONDS - t0))
  keep_tail "$log"
  return 1
}

# ---------------------------------------------------------------- gpu tests
gtest_summary() {  # prints "tests failures skipped names"
  python3 - "$1" <<'EOF'
import json, sys
try:
    d = json.load(open(sys.argv[1]))
except Exception as e:
    print(f"0 0 0 unreadable-{type(e).__name__}")
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
print(tests, failed, skipped, ",".join(names[:8]) or "-")
EOF
}

fixture_env() {
  local f="$bundle/fixtures" m="$bundle/models/tokenscope-tiny"
  [ -d "$f" ] || f="$root/tests/fixtures"
  [ -d "$m" ] || m="$root/assets/models/tokenscope-tiny"
  echo "TS_FIXTURE_DIR=$f" "TS_BUNDLED_MODEL_DIR=$m"
}

run_gpu_tests() {  # run_gpu_tests CHECK CAP [ENV=VALUE...] [-- GTEST ARGS...]
  local check="$1" c t0=$SECONDS envs=() args=()
  c="$(cap "$2")"
  shift 2
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  args=("$@")
  if [ "$c" -eq 0 ]; then record "$check" "not run" "the run's budget was spent"; return; fi
  # shellcheck disable=SC2046
  env $(fixture_env) "${envs[@]}" timeout "$c" "$bin/ts_gpu_tests" "${args[@]}" \
    --gtest_output="json:$out/$check.json" >"$out/logs/$check.log" 2>&1
  local rc=$? n f s names
  read -r n f s names <<<"$(gtest_summary "$out/$check.json")"
  if [ "$rc" -eq 124 ]; then
    record "$check" "FAILED" "stopped at its ${c} s cap (logs/$check.log)" $((SECONDS - t0))
  elif [ "$rc" -ne 0 ] || [ "${f:-0}" -gt 0 ] || [ "${n:-0}" -eq 0 ]; then
    record "$check" "FAILED" "rc $rc; $f of $n failed: $names (logs/$check.log)" $((SECONDS - t0))
  elif ! device_present; then
    record "$check" "not run" "$s of $n skipped, no CUDA device ($(device_why)); the $((n - s)) host-side tests passed" $((SECONDS - t0))
  elif [ "${s:-0}" -gt 0 ]; then
    record "$check" "FAILED" "$s of $n skipped on a GPU machine: $(grep -m1 -i 'skipped\|no CUDA' "$out/logs/$check.log" | cut -c1-160)" $((SECONDS - t0))
  else
    record "$check" ok "$n tests passed" $((SECONDS - t0))
  fi
  keep_tail "$out/logs/$check.log"
}

# ---------------------------------------------------------------- sanitizers
find_sanitizer() {
  command -v compute-sanitizer 2>/dev/null && return
  local p
  for p in /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    [ -x "$p" ] && { echo "$p"; return; }
  done
}

run_sanitizer() {  # run_sanitizer CHECK TOOL CAP FILTER [EXTRA...]
  local check="$1" tool="$2" c filter="$4" sanitizer t0=$SECONDS
  c="$(cap "$3")"
  shift 4
  sanitizer="$(find_sanitizer)"
  if ! device_present; then record "$check" "not run" "no CUDA device ($(device_why))"; return; fi
  if [ -z "$sanitizer" ]; then record "$check" "not available" "compute-sanitizer not found"; return; fi
  if [ "$c" -eq 0 ]; then record "$check" "not run" "the run's budget was spent"; return; fi
  local log="$out/logs/$check.log"
  # shellcheck disable=SC2046
  env $(fixture_env) timeout "$c" "$sanitizer" --tool "$tool" "$@" --error-exitcode 3 "$bin/ts_gpu_tests" \
    --gtest_filter="$filter" >"$log" 2>&1
  local rc=$? summary
  summary="$(grep -m1 'ERROR SUMMARY' "$log" | sed 's/^=* *//')"
  if [ "$rc" -eq 124 ]; then
    record "$check" "incomplete" "stopped at its ${c} s cap; ${summary:-no error reported before}" $((SECONDS - t0))
  elif [ -z "$summary" ] && [ "$rc" -ne 0 ]; then
    # The sanitizer never reached the kernels: it refuses this device or
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

# ---------------------------------------------------------------- bench
model="$work/random-124m"
ensure_model() {  # ensure_model CAP
  [ -f "$model/model.safetensors" ] && return 0
  mkdir -p "$work"
  # The checkpoint is written before the bench picks a device; the tiny run
  # after it is only what the flag requires.
  timeout "$1" "$bin/tokenscope-bench" --device cpu --write-random-124m "$model" --prefill-tokens 1 \
    --context 1 --decode-steps 1 --lanes 1 >/dev/null 2>"$work/write-model.log"
  [ -f "$model/model.safetensors" ]
}

bench_run() {  # bench_run CHECK CAP [ENV=VALUE...] -- BENCH ARGS...
  local check="$1" c t0=$SECONDS envs=()
  c="$(cap "$2")"
  shift 2
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  if ! device_present; then record "$check" "not run" "no CUDA device ($(device_why))"; return; fi
  if [ "$c" -eq 0 ]; then record "$check" "not run" "the run's budget was spent"; return; fi
  if ! ensure_model "$c"; then
    record "$check" "FAILED" "could not write the random GPT-2 124M: $(tail -1 "$work/write-model.log" | cut -c1-200)" $((SECONDS - t0))
    return
  fi
  c="$(cap $((c - (SECONDS - t0))))"
  if [ "$c" -eq 0 ]; then record "$check" "not run" "the run's budget was spent writing the model"; return; fi
  if env "${envs[@]}" timeout "$c" "$bin/tokenscope-bench" --device cuda --model "$model" "$@" \
    >"$out/$check.json" 2>"$out/logs/$check.log"; then
    record "$check" ok "$*" $((SECONDS - t0))
  else
    record "$check" "FAILED" "$(tail -1 "$out/logs/$check.log" | cut -c1-200)" $((SECONDS - t0))
    rm -f "$out/$check.json"
  fi
}

# bf16 alone, then f32, bf16 and f16 side by side in a run of their own (one
# that fails leaves the other's figures).
phase_bench_bf16() {
  bench_run bench_bf16 40 -- --weights bf16 --prefill-tokens 128 --context 64 --decode-steps 50 --lanes 1
  bench_run bench_formats16 30 -- --prefill-tokens 8 --context 64 --decode-steps 50 --lanes 1 \
    --formats f32,bf16,f16
}

# ---------------------------------------------------------------- peer
phase_peer() {
  local c t0=$SECONDS why peer="$bundle/tools/peer/hf_peer.py"
  [ -f "$peer" ] || peer="$root/tools/peer/hf_peer.py"
  c="$(cap 120)"
  if ! device_present; then record peer "not run" "no CUDA device ($(device_why))"; return; fi
  if [ "$c" -eq 0 ]; then record peer "not run" "the run's budget was spent"; return; fi
  if ! why="$(timeout 60 python3 -c 'import torch, transformers, safetensors
assert torch.cuda.is_available(), "torch sees no CUDA device"' 2>&1)"; then
    record peer "not run" "python3 with CUDA torch + transformers: $(echo "$why" | tail -1 | cut -c1-160)"
    return
  fi
  if ! ensure_model "$c"; then record peer "FAILED" "could not write the random GPT-2 124M"; return; fi
  c="$(cap $((c - (SECONDS - t0))))"
  if timeout "$c" python3 "$peer" --cli "$bin/tokenscope-cli" --model "$model" \
    --work "$work/peer" --out "$out/peer.json" >"$out/logs/peer.log" 2>&1; then
    record peer ok "$(grep -m1 '^verdict:' "$out/logs/peer.log" | cut -c10-200)" $((SECONDS - t0))
  else
    record peer "FAILED" "$(tail -1 "$out/logs/peer.log" | cut -c1-200)" $((SECONDS - t0))
  fi
  keep_tail "$out/logs/peer.log"
}

# ---------------------------------------------------------------- main
run_phase() {  # run_phase NAME COMMAND...: runs it, then rewrites the report
  local name="$1" t0=$SECONDS
  shift
  echo "gpu-check: phase $name"
  "$@"
  python3 - "$out/timings.json" "$name" $((SECONDS - t0)) <<'EOF'
import json, sys
path, name, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
try:
    t = json.load(open(path))
except Exception:
    t = {}
t[name] = seconds
json.dump(t, open(path, "w"), indent=1)
EOF
  write_report
}

start_run() {
  mkdir -p "$out/logs" "$work" || exit 1
  out="$(cd "$out" && pwd)"
  rm -f "$out"/status.json "$out"/timings.json "$out"/*.json.tmp
  deadline=$((SECONDS + ${TS_GPU_RUN_BUDGET:-450}))
  echo "gpu-check: bundle $bundle; report in $out; budget $((deadline - SECONDS)) s"
  run_phase preflight phase_preflight || true
}

cmd_run() {
  start_run
  run_phase gpu_tests run_gpu_tests gpu_tests 150
  run_phase memcheck run_sanitizer memcheck memcheck 90 'CudaKernels.*:HalfKernels.*' --leak-check full
  run_phase bench bench_run bench_fp32 150 -- --prefill-tokens 1024 --context 64 --decode-steps 50 \
    --lanes 1,2,4,8 --cache-compare 256
  run_phase peer phase_peer
  run_phase bench_bf16 phase_bench_bf16
  echo "gpu-check: report in $out/report.md"
  [ "$failed" -eq 0 ]
}

cmd_run_more() {
  start_run
  run_phase racecheck run_sanitizer racecheck racecheck 120 'CudaKernels.Attention*'
  run_phase tf32_tests run_gpu_tests tf32_tests 60 TOKENSCOPE_CUDA_TF32=1 -- --gtest_filter='CudaBackend.Tf32*'
  run_phase bench_ctx1000 bench_run bench_ctx1000 90 -- --prefill-tokens 128 --context 1000 --decode-steps 20 --lanes 1
  run_phase bench_tf32 bench_run bench_tf32 90 TOKENSCOPE_CUDA_TF32=1 -- --prefill-tokens 1024 --context 64 \
    --decode-steps 50 --lanes 1
  run_phase bench_no_graphs bench_run bench_no_graphs 90 TOKENSCOPE_CUDA_GRAPHS=0 -- --prefill-tokens 128 \
    --context 64 --decode-steps 50 --lanes 1
  echo "gpu-check: report in $out/report.md"
  [ "$failed" -eq 0 ]
}

case "${1:-}" in
  bundle) shift; cmd_bundle "$@" ;;
  prepare) cmd_prepare ;;
  run) cmd_run ;;
  run-more) cmd_run_more ;;
  -h | --help | help) usage ;;
  "") usage >&2; exit 2 ;;
  *) echo "gpu-check: unknown command '$1' (bundle, prepare, run, run-more, --help)" >&2; exit 2 ;;
esac
