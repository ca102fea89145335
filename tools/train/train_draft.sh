#!/bin/sh
# Build the draft model of speculative decoding, tokenscope-tiny-draft, on the
# data and tokenizer of the bundled model: run tools/train/train.sh first (it
# leaves the filtered corpus, the tokenizer and the token ids in
# tools/train/work/). The draft is the same architecture, smaller: 2 layers,
# 128 dimensions, 2 heads, the same 256-token context and the same 8,192-token
# vocabulary (its vocab.json and merges.txt are byte-identical copies), about
# 1.48 M parameters, 5.9 MB.
#
#   tools/train/train_draft.sh
#
# Environment (all optional):
#   STEPS=2400    planned optimizer steps (batch 16 x 256 tokens)
#   RESUME=1      continue from tools/train/work/draft/ckpt.pt
#   SKIP_TRAIN=1  reuse the existing checkpoint, only export + card
#   NICE=5        niceness of the heavy Python steps
#
# Outputs: assets/models/tokenscope-tiny-draft/ (model, tokenizer files,
# card_data.json, README.md), tests/fixtures/bundled-draft/ (PyTorch logits of
# the card's prompts, the validation loss) and docs/loss_curve_draft.png.
set -eu
cd "$(dirname "$0")/../.."
PY="nice -n ${NICE:-5} /usr/bin/python3"
WORK=tools/train/work
DRAFT="$WORK/draft"
for f in train.npy val.npy val.txt tok/vocab.json tok/merges.txt corpus_stats.json; do
  if [ ! -e "$WORK/$f" ]; then
    echo "train_draft: $WORK/$f is missing: run tools/train/train.sh first" >&2
    exit 1
  fi
done
mkdir -p "$DRAFT"
for f in train.npy val.npy val.txt corpus_stats.json; do ln -sf "../$f" "$DRAFT/$f"; done
ln -sfn ../tok "$DRAFT/tok"

if [ "${SKIP_TRAIN:-0}" != 1 ]; then
  echo "== training the draft"
  set -- --work "$DRAFT" --n-layer 2 --n-embd 128 --n-head 2 --n-ctx 256 \
         --steps "${STEPS:-2400}" --batch 16 --lr 2e-3 --lr-min 1e-4 --warmup 100 \
         --eval-every 50 --eval-windows 24
  [ "${RESUME:-0}" = 1 ] && set -- "$@" --resume
  $PY tools/train/train.py "$@"
fi

echo "== export"
$PY tools/train/export.py --name tokenscope-tiny-draft --work "$DRAFT" \
  --out assets/models/tokenscope-tiny-draft --fixtures tests/fixtures/bundled-draft \
  --png docs/loss_curve_draft.png

echo "== model card"
if [ ! -x build/tokenscope-cli ]; then
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
  cmake --build build --target tokenscope-cli -j 2
fi
$PY tools/train/make_draft_card.py collect --work "$DRAFT" --cli build/tokenscope-cli
$PY tools/train/make_draft_card.py check
echo "done: assets/models/tokenscope-tiny-draft"
