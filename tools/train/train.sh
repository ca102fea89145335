#!/bin/sh
# Build the bundled model from nothing: corpora -> tokenizer -> training ->
# export (HF GPT-2 layout, fixtures, loss curve) -> model card.
#
#   tools/train/train.sh
#
# Environment (all optional):
#   STEPS=3600          planned optimizer steps
#   BATCH=16            sequences of 256 tokens per step
#   LR=2e-3             peak learning rate (cosine down to a twentieth of it)
#   DEADLINE_MIN=105    wall-clock limit of the training step in minutes; the
#                       plan is shortened to fit (see train.py) - 0 = none
#   SCHEDULE=           replay a shortened plan recorded in train_summary.json
#                       ("schedule_arg"), for a bit-identical rerun
#   RESUME=1            continue from tools/train/work/ckpt.pt
#   SKIP_TRAIN=1        reuse the existing checkpoint, only export + card
#   NICE=5              niceness of the heavy Python steps (the machine is shared)
#
# Needs: npm, /usr/bin/python3 with torch, numpy, regex, matplotlib; cmake and
# a C++ compiler for the engine's figures in the card.
set -eu
cd "$(dirname "$0")/../.."
PY="nice -n ${NICE:-5} /usr/bin/python3"
WORK=tools/train/work
mkdir -p "$WORK"

echo "== corpus"
$PY tools/train/fetch_corpus.py --work "$WORK"

echo "== tokenizer"
$PY tools/train/bpe.py train --input "$WORK/train.txt" --vocab-size 8192 --out "$WORK/tok"
$PY tools/train/bpe.py encode --model "$WORK/tok" --input "$WORK/train.txt" --output "$WORK/train.npy"
$PY tools/train/bpe.py encode --model "$WORK/tok" --input "$WORK/val.txt" --output "$WORK/val.npy"
$PY tools/train/bpe.py check --model "$WORK/tok" --input "$WORK/val.txt"

if [ "${SKIP_TRAIN:-0}" != 1 ]; then
  echo "== training"
  lr="${LR:-2e-3}"
  lr_min=$(awk -v lr="$lr" 'BEGIN { print lr / 20 }')
  set -- --steps "${STEPS:-3600}" --batch "${BATCH:-16}" --lr "$lr" --lr-min "$lr_min" --warmup 100 \
         --eval-every 50 --eval-windows 24 --deadline-minutes "${DEADLINE_MIN:-105}"
  [ -n "${SCHEDULE:-}" ] && set -- "$@" --schedule "$SCHEDULE"
  [ "${RESUME:-0}" = 1 ] && set -- "$@" --resume
  $PY tools/train/train.py "$@"
fi

echo "== export"
$PY tools/train/export.py --work "$WORK"

echo "== model card"
if [ ! -x build/tokenscope-cli ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
  cmake --build build --target tokenscope-cli -j 2
fi
$PY tools/train/make_model_card.py collect --work "$WORK" --cli build/tokenscope-cli
$PY tools/train/make_model_card.py check
echo "done: assets/models/tokenscope-tiny"
