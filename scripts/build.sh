#!/usr/bin/env bash
# Configures and builds one configuration.
#   scripts/build.sh [release|asan|tsan] [extra cmake args...]
# release: optimised, CUDA backend when nvcc is present, GUI when its
#          libraries are present.  -> build/
# asan:    AddressSanitizer + UndefinedBehaviorSanitizer, CPU only, GUI
#          included (its tests run under Xvfb), -O1 with line tables (-g1:
#          enough for the reports' stack traces). -> build-asan/
# tsan:    ThreadSanitizer, CPU only, GUI included, -O2 with line tables. -> build-tsan/
# The sanitizer configurations use -g1 and ASan -O1 (the optimisation level
# ASan's documentation recommends) because they are compile-bound on a
# 2-core machine: full debug info at -O2 took about 40% longer to build.
# When ccache is installed it caches the compiles (base directory: this
# checkout, so a clone elsewhere on the machine hits the same cache).
# Prints the configure summary: CUDA backend on/off and GUI on/off, each
# with the reason (e.g. "no CUDA compiler found", "missing glfw3").
set -euo pipefail
cd "$(dirname "$0")/.."
config="${1:-release}"
shift || true
jobs="${TS_JOBS:-$(nproc)}"

# nvcc is often installed outside PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

case "$config" in
  release)
    dir=build
    args=(-DCMAKE_BUILD_TYPE=Release)
    ;;
  asan)
    dir=build-asan
    args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
          -DTS_SANITIZE=ON -DTS_ENABLE_CUDA=OFF -DTS_ENABLE_GUI=ON)
    ;;
  tsan)
    dir=build-tsan
    args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
          -DTS_SANITIZE_THREAD=ON -DTS_ENABLE_CUDA=OFF -DTS_ENABLE_GUI=ON)
    ;;
  *)
    echo "usage: scripts/build.sh [release|asan|tsan]" >&2
    exit 2
    ;;
esac
if command -v ccache >/dev/null 2>&1 && [ -z "${TS_NO_CCACHE:-}" ]; then
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  [ "$config" = release ] && args+=(-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
fi
# The configure output goes to a log; its summary (what is built and, for what
# is not, why) is printed. On a failure the whole log is.
mkdir -p "$dir"
if ! cmake -S . -B "$dir" "${args[@]}" "$@" >"$dir/configure.log" 2>&1; then
  cat "$dir/configure.log" >&2
  echo "build.sh: configuring $config failed (log: $dir/configure.log)" >&2
  exit 1
fi
grep -E '^-- TokenScope:|CMake Warning' "$dir/configure.log" | sed 's/^-- /configure: /' || true
cmake --build "$dir" -j"$jobs"
echo "built $config in $dir/"
