#!/bin/sh
# Train tokenscope-tiny-llama, the Llama-shaped twin of the bundled model, on
# its data and tokenizer: run tools/train/train.sh first (it leaves the
# filtered corpus, the tokenizer and the token ids in tools/train/work/; the
# tokenizer can also be the bundled model's vocab.json and merges.txt copied
# into tools/train/work/tok/, then only bpe.py encode is needed).
# The same 8,192-token vocabulary and 256-token context as tokenscope-tiny, so
# the two run as lanes on one prompt; 4 layers of 256 dimensions like it, but
# RMSNorm, rotary positions, a SwiGLU MLP (688 wide) and grouped-query
# attention: 8 query heads of 32 dimensions share 2 key/value heads, so a
# token's KV cache is 2,048 bytes instead of tokenscope-tiny's 8,192 (fp32).
# About 4.87 M parameters, 19.5 MB in F32 (llama.py).
#
#   tools/train/train_llama.sh
#
# Environment (all optional):
#   STEPS=2400    planned optimizer steps (batch 16 x 256 tokens): two thirds of
#                 tokenscope-tiny's 3,600, as one of its steps costs about 1.4 of
#                 tokenscope-tiny's on a 2-core CPU (PyTorch profile: 8 heads of
#                 32 dimensions, RoPE, SwiGLU)
#   RESUME=1      continue from tools/train/work/llama/ckpt.pt (checkpointed
#                 every 5 minutes, so a run killed with the session resumes)
#   SCHEDULE=s:t  replay the step plan's changes (train.py --schedule; the
#                 card's Reproduce section gives the run's own)
#   SKIP_TRAIN=1  reuse the existing checkpoint, only export + card
#   NICE=5        niceness of the heavy Python steps
#
# Outputs: tools/train/work/llama/ (checkpoint, loss.csv); with the export,
# assets/models/tokenscope-tiny-llama/ (HF Llama layout: config.json,
# model.safetensors, tokenizer.json, tokenizer_config.json, vocab.json,
# merges.txt, card_data.json, README.md), tests/fixtures/bundled-llama/ and
# docs/loss_curve_llama.png. The card's classroom rows come from a separate,
# longer run (make_llama_card.py classroom; see tools/train/README.md).
set -eu
cd "$(dirname "$0")/../.."
PY="nice -n ${NICE:-5} /usr/bin/python3"
WORK=tools/train/work
LLAMA="$WORK/llama"
for f in train.npy val.npy val.txt tok/vocab.json tok/merges.txt; do
  if [ ! -e "$WORK/$f" ]; then
    echo "train_llama: $WORK/$f is missing: run tools/train/train.sh first" >&2
    exit 1
  fi
done
mkdir -p "$LLAMA"
for f in train.npy val.npy val.txt; do ln -sf "../$f" "$LLAMA/$f"; done
ln -sfn ../tok "$LLAMA/tok"

if [ "${SKIP_TRAIN:-0}" != 1 ]; then
  echo "== training the Llama-shaped model"
  set -- --work "$LLAMA" --arch llama --n-layer 4 --n-embd 256 --n-head 8 --n-kv-head 2 \
         --n-inner 688 --rope-theta 10000 --n-ctx 256 \
         --steps "${STEPS:-2400}" --batch 16 --lr 2e-3 --lr-min 1e-4 --warmup 100 \
         --eval-every 50 --eval-windows 24
  [ "${RESUME:-0}" = 1 ] && set -- "$@" --resume
  [ -n "${SCHEDULE:-}" ] && set -- "$@" --schedule "$SCHEDULE"
  $PY tools/train/train.py "$@"
fi

echo "== export"
$PY tools/train/export.py --name tokenscope-tiny-llama --work "$LLAMA" \
  --out assets/models/tokenscope-tiny-llama --fixtures tests/fixtures/bundled-llama \
  --png docs/loss_curve_llama.png

echo "== model card"
if [ ! -x build/tokenscope-cli ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
  cmake --build build --target tokenscope-cli -j 2
fi
$PY tools/train/make_llama_card.py collect --work "$LLAMA" --cli build/tokenscope-cli
$PY tools/train/make_llama_card.py check
echo "done: assets/models/tokenscope-tiny-llama"
