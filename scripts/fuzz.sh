#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan) in build-fuzz/ and runs
# them.
#   scripts/fuzz.sh [TARGET|all] [SECONDS]       run each for SECONDS (default 20)
#   scripts/fuzz.sh TARGET runs:N                stop after N executions instead
# Targets: safetensors config_json vocab_merges encoder_bpe llmc strategy banned_words
# session_import tokenizer_json split_regex.
# Each run starts from the committed seeds (tests/fuzz/corpus/TARGET) and
# grows a working corpus in build-fuzz/corpus/TARGET (never the committed
# one). A crash leaves its input in build-fuzz/crashes/TARGET/ and makes this
# script exit 1: copy the file to tests/fuzz_regressions/TARGET/, where ctest
# replays it in every build (fuzz_replay.TARGET), and fix the bug.
# Summaries (executions, coverage, crashes) go to build-fuzz/logs/TARGET.log.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:-all}"
budget="${2:-20}"
all=(safetensors config_json vocab_merges encoder_bpe llmc strategy banned_words session_import
  tokenizer_json split_regex)
if [ "$target" = all ]; then
  targets=("${all[@]}")
else
  case " ${all[*]} " in
    *" $target "*) targets=("$target") ;;
    *)
      echo "fuzz: unknown target '$target' (one of: ${all[*]}, all)" >&2
      exit 2
      ;;
  esac
fi
case "$budget" in
  runs:*) limit=(-runs="${budget#runs:}") ;;
  *[!0-9]* | "")
    echo "fuzz: SECONDS must be a whole number or runs:N, got '$budget'" >&2
    exit 2
    ;;
  *) limit=(-max_total_time="$budget") ;;
esac

CXX="${TS_FUZZ_CXX:-clang++}"
if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "fuzz: $CXX not found (scripts/install-deps.sh installs clang)" >&2
  exit 2
fi
launcher=()
if command -v ccache >/dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S tests/fuzz -B build-fuzz -DCMAKE_CXX_COMPILER="$CXX" "${launcher[@]}" >/dev/null
cmake --build build-fuzz -j"${TS_JOBS:-$(nproc)}" --target "${targets[@]/#/fuzz_}"

status=0
for t in "${targets[@]}"; do
  work="build-fuzz/corpus/$t"
  crashes="build-fuzz/crashes/$t"
  log="build-fuzz/logs/$t.log"
  mkdir -p "$work" "$crashes" "$(dirname "$log")"
  echo "== fuzz $t (${limit[*]})"
  # -rss_limit_mb: a parser that allocates without bound is a finding too.
  if ! "build-fuzz/fuzz_$t" "${limit[@]}" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$crashes/" "$work" "tests/fuzz/corpus/$t" >"$log" 2>&1; then
    status=1
    echo "fuzz: $t FAILED; input(s) in $crashes/, log in $log" >&2
    grep -E "ERROR|FUZZ_CHECK|terminate|Test unit written" "$log" | head -5 >&2 || true
  fi
  # Executions, coverage (cov: edges, ft: features), corpus size, peak memory.
  grep -E "^#[0-9]+.*DONE|^stat::peak_rss_mb" "$log" || true
done
exit $status
