#!/bin/sh
# Wait for a detached training run to end, then export and write the card:
#   setsid nohup tools/train/finish.sh PID > tools/train/work/finish.log 2>&1 < /dev/null &
set -eu
cd "$(dirname "$0")/../.."
if [ $# -ge 1 ]; then
  while kill -0 "$1" 2>/dev/null; do sleep 30; done
fi
test -f tools/train/work/train_summary.json || { echo "no train_summary.json: training did not finish"; exit 1; }
PY="nice -n ${NICE:-5} /usr/bin/python3"
$PY tools/train/export.py
$PY tools/train/make_model_card.py collect --cli build/tokenscope-cli
$PY tools/train/make_model_card.py check
echo "finished: $(date -u)"
