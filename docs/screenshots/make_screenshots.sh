#!/usr/bin/env bash
# Regenerates every picture in docs/screenshots/ with `tokenscope --screenshot`
# (headless: a hidden window, Mesa's software OpenGL under Xvfb is enough).
#   docs/screenshots/make_screenshots.sh                 # bundled model, build/tokenscope
#   TOKENSCOPE=build-gui/tokenscope MODEL=tests/fixtures/tiny docs/screenshots/make_screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${TOKENSCOPE:-build/tokenscope}
OUT=${OUT:-docs/screenshots}
MODEL_ARGS=()
if [ -n "${MODEL:-}" ]; then MODEL_ARGS=(--model "$MODEL"); fi
RUN=()
if [ -z "${DISPLAY:-}" ]; then RUN=(xvfb-run -a -s "-screen 0 1920x1080x24 -noreset"); fi
PROMPT="Today's weather is so"

shot() {  # shot NAME ARGS...
  local name=$1
  shift
  "${RUN[@]}" "$BIN" "${MODEL_ARGS[@]}" --prompt "$PROMPT" --screenshot "$OUT/$name.png" "$@"
}

# The whole window.
shot classroom --steps 3 --width 1600 --height 900
shot classroom-1024x768 --steps 3 --width 1024 --height 768  # a projector: the layout follows

# Presentation mode (projector fonts), every layout at a 720-line and a
# 1080-line projector's size. The cost layout runs the cache comparison first,
# the compare layout three lanes, so that their panels have something to show.
LAYOUTS="classroom lesson memory cost layers compare prompt transport attention kv logits sampling timeline roofline lens cache lanes help guided"
for layout in $LAYOUTS; do
  for size in 1280x720 1920x1080; do
    extra=(--steps 3)
    case $layout in
      cost | cache | roofline) extra=(--steps 8 --cache-compare 64) ;;
      compare | lanes) extra=(--steps 3 --compare greedy "top_p=0.9,seed=3" beams=3) ;;
      guided) extra=(--steps -1 --lesson assets/lessons/1-prefill-decode-kv-cache.lesson) ;;
    esac
    shot "presentation-$layout-$size" "${extra[@]}" --layout "$layout" --presentation \
      --width "${size%x*}" --height "${size#*x}"
  done
done

# A lesson running on a 720-line projector after three steps: the bar keeps
# its strip, the panel the step is about (Choosing) gets the left column.
shot presentation-guided-sampling-1280x720 --steps 3 \
  --lesson assets/lessons/2-how-sampling-chooses.lesson --presentation --width 1280 --height 720

# A guided lesson (assets/lessons, docs/lessons.md): its first step, the
# prompt panel outlined, the question under the text.
shot lesson-guided --steps -1 --lesson assets/lessons/1-prefill-decode-kv-cache.lesson --width 1600 --height 900

# Each shipped lesson's first step as a class sees it: presentation mode (F11)
# on a 720-line projector.
for lesson in assets/lessons/*.lesson; do
  n=$(basename "$lesson" | cut -d- -f1)
  shot "lesson-$n-first-step-presentation-1280x720" --steps -1 --lesson "$lesson" --presentation \
    --width 1280 --height 720
done

# One per panel (the panel alone, filling the window).
shot panel-prompt --steps 3 --layout prompt --width 1100 --height 260
# Characters the font cannot draw (CJK) and beyond U+FFFF (emoji): named, never damaged.
"${RUN[@]}" "$BIN" "${MODEL_ARGS[@]}" --prompt "Café ☕ 日本語 😀 is" --steps 2 --layout prompt \
  --width 1100 --height 260 --screenshot "$OUT/panel-prompt-unicode.png"
shot panel-transport --steps 3 --layout transport --width 760 --height 260
shot panel-attention --steps 3 --layout attention --width 1200 --height 760
shot panel-attention-prefill --steps 0 --layout attention --width 1200 --height 760
shot panel-attention-log-average --steps 3 --layout attention --log-scale --average-heads --layer 1 --width 1200 --height 760
shot panel-kv --steps 3 --layout kv --width 1000 --height 560
shot panel-kv-prefill --steps 0 --layout kv --width 1000 --height 560
shot panel-logits --steps 3 --layout logits --width 900 --height 620
shot panel-sampling-greedy --steps 3 --layout sampling --width 1100 --height 620
shot panel-sampling-topp --steps 3 --layout sampling --rechoose "top_p=0.9" --width 1100 --height 620
shot panel-timeline --steps 8 --layout timeline --width 1000 --height 520
shot panel-help --steps 0 --layout help --width 900 --height 760
shot score --steps 0 --layout score --width 1300 --height 520

# The lesson in docs/classroom.md, step by step.
shot lesson-1-ready --steps -1 --layout lesson --width 1600 --height 900
shot lesson-2-prefill --steps 0 --layout lesson --width 1600 --height 900
shot lesson-3-decode --steps 3 --layout lesson --width 1600 --height 900
shot lesson-3-kv --steps 3 --layout memory --width 1600 --height 900
shot lesson-4-greedy --steps 3 --layout sampling --width 1100 --height 620
shot lesson-5-temperature --steps 3 --layout sampling --rechoose "temperature=0.7,seed=1" --width 1100 --height 620
shot lesson-6-top-p --steps 3 --layout sampling --rechoose "top_p=0.9,seed=1" --width 1100 --height 620

# Why the KV cache exists, why decode is memory bound, and what each layer predicts.
LONG="The old man walked into the village at dawn. He had not seen it for twenty years, and the houses looked smaller than he remembered. At the well he stopped and"
shot cost-lesson --steps 8 --cache-compare 64 --layout cost --width 1600 --height 900
shot panel-cache --steps 8 --cache-compare 64 --layout cache --width 1100 --height 700
"${RUN[@]}" "$BIN" "${MODEL_ARGS[@]}" --prompt "$LONG" --compare greedy "top_k=40,seed=1" "top_p=0.9,seed=2" "temperature=0.8,seed=3" \
  --steps 12 --cache-compare 64 --layout roofline --width 1100 --height 700 --screenshot "$OUT/panel-roofline.png"
shot panel-lens --steps 3 --layout lens --width 1100 --height 520

# Strategies side by side: four lanes over one prefill, the beam lane's tree shown.
"${RUN[@]}" "$BIN" "${MODEL_ARGS[@]}" --prompt "$LONG" --compare greedy "top_p=0.9,temperature=0.8,seed=3" "beams=3" "repetition_penalty=1.3" \
  --lane 2 --steps 8 --layout compare --width 1600 --height 900 --screenshot "$OUT/lanes-4.png"

# Greedy vs contrastive: the contrastive lane's candidates in the Choosing panel.
"${RUN[@]}" "$BIN" "${MODEL_ARGS[@]}" --prompt "Once upon a time" --compare greedy "contrastive=4,alpha=0.6" \
  --steps 24 --lane 1 --layout sampling --width 1100 --height 620 --screenshot "$OUT/contrastive.png"

# Re-opened: a session exported with --json (File > Export session), stepped
# through without the model (File > Open session, --open) at decode step 3.
"${RUN[@]}" "$BIN" "${MODEL_ARGS[@]}" --prompt "$PROMPT" --compare greedy "top_p=0.9,temperature=0.8,seed=3" \
  --steps 6 --screenshot "$OUT/.reopen-export.png" --json "$OUT/.reopen-session.json"
"${RUN[@]}" "$BIN" --open "$OUT/.reopen-session.json" --steps 3 --width 1600 --height 900 \
  --screenshot "$OUT/reopened.png"
rm -f "$OUT/.reopen-export.png" "$OUT/.reopen-session.json"
# Greedy vs DoLa: the DoLa lane's layer divergences and contrast in the Choosing panel.
"${RUN[@]}" "$BIN" "${MODEL_ARGS[@]}" --prompt "Once upon a time" --compare greedy "dola=0,1,2,3" \
  --steps 7 --lane 1 --layout sampling --width 1100 --height 720 --screenshot "$OUT/dola.png"
# The same DoLa lane in the Logit lens: each candidate layer's divergence, the premature one marked.
"${RUN[@]}" "$BIN" "${MODEL_ARGS[@]}" --prompt "Once upon a time" --compare greedy "dola=0,1,2,3" \
  --steps 7 --lane 1 --layout lens --width 1100 --height 420 --screenshot "$OUT/dola-lens.png"
# Speculative decoding: a round of a sampled spec lane with its verdicts, p and q,
# the residual at the rejection and the running acceptance rate, beside the
# Timeline. The draft is assets/models/tokenscope-tiny-draft when it is there
# (DRAFT overrides), else the target's first layer alone (written to a
# temporary directory: the same tokenizer, a weaker model, so some drafts are rejected).
TARGET_DIR=${MODEL:-assets/models/tokenscope-tiny}
DRAFT=${DRAFT:-assets/models/tokenscope-tiny-draft}
DRAFT_TMP=""
if [ ! -d "$DRAFT" ]; then
  DRAFT_TMP=$(mktemp -d)
  DRAFT="$DRAFT_TMP"
  python3 - "$TARGET_DIR" "$DRAFT" <<'PY'
# Keeps layer 0 of a GPT-2 safetensors file (embeddings, h.0.*, ln_f) and sets n_layer 1.
import json, shutil, struct, sys
src, dst = sys.argv[1], sys.argv[2]
with open(f"{src}/model.safetensors", "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    header = json.loads(f.read(n))
    data = f.read()
out, blobs, offset = {}, [], 0
for name, t in header.items():
    if name == "__metadata__" or (name.startswith("h.") and not name.startswith("h.0.")):
        continue
    begin, end = t["data_offsets"]
    blobs.append(data[begin:end])
    out[name] = dict(t, data_offsets=[offset, offset + end - begin])
    offset += end - begin
head = json.dumps(out).encode()
head += b" " * (-len(head) % 8)
with open(f"{dst}/model.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(head)) + head + b"".join(blobs))
config = json.load(open(f"{src}/config.json"))
config["n_layer"] = 1
json.dump(config, open(f"{dst}/config.json", "w"), indent=2)
for name in ("vocab.json", "merges.txt"):
    shutil.copy(f"{src}/{name}", f"{dst}/{name}")
PY
fi
"${RUN[@]}" "$BIN" "${MODEL_ARGS[@]}" --draft-model "$DRAFT" --prompt "Once upon a time" \
  --compare greedy "spec=4,temperature=0.8,seed=3" --steps 2 --lane 1 --layout speculative \
  --width 1400 --height 860 --screenshot "$OUT/speculative.png"
if [ -n "$DRAFT_TMP" ]; then rm -rf "$DRAFT_TMP"; fi

# Lookahead decoding: the third pass of a lookahead lane on a prompt that
# repeats itself (its window, the pool's candidates, one accepted).
"${RUN[@]}" "$BIN" "${MODEL_ARGS[@]}" --prompt "I'm not sure I'm not sure I'm not sure" \
  --compare greedy lookahead prompt_lookup --steps 3 --lane 1 --layout lookahead \
  --width 1100 --height 760 --screenshot "$OUT/lookahead.png"

# Two weight formats of the same model: f32 against q4, the first divergence
# marked in the table and the KL plot, the two continuations side by side.
shot precision --compare-precision f32,q4 --steps 2 --width 1600 --height 900

# Two models sharing a vocabulary: the bundled model against its draft, each
# one's weight MB and KV bytes per token under the heading.
shot compare-models --compare-model assets/models/tokenscope-tiny-draft --steps 2 --width 1600 \
  --height 900

# A Llama-family model (LLAMA and LLAMA_ROPE override; by default the bundled
# Llama-shaped twin, 8 query heads sharing 2 KV heads): Attention's KV-head
# groups, the KV cache's bytes per token, the RoPE view; and the Compare panel
# with GPT-2 (the bundled model) beside it.
LLAMA=${LLAMA:-assets/models/tokenscope-tiny-llama}
LLAMA_ROPE=${LLAMA_ROPE:-$LLAMA}
"${RUN[@]}" "$BIN" --model "$LLAMA" --prompt "the cat sat on the mat" --steps 3 --head 5 \
  --layout attention --width 1000 --height 700 --screenshot "$OUT/llama-attention.png"
"${RUN[@]}" "$BIN" --model "$LLAMA" --prompt "the cat sat on the mat" --steps 3 \
  --layout kv --width 1000 --height 560 --screenshot "$OUT/llama-kv.png"
"${RUN[@]}" "$BIN" --model "$LLAMA_ROPE" --prompt "the cat sat on the mat" --steps 3 --layer 1 \
  --head 4 --layout rope --width 1000 --height 600 --screenshot "$OUT/rope.png"
"${RUN[@]}" "$BIN" --model "$LLAMA_ROPE" --prompt "the cat sat on the mat" --steps 3 --layer 1 \
  --head 4 --layout rope --presentation --width 1280 --height 720 \
  --screenshot "$OUT/rope-presentation-1280x720.png"
shot compare-gpt2-llama --compare-model "$LLAMA" --steps 2 --width 1600 --height 900

# The Roofline panel's batch sweep, after prefill and 4 decode steps: no flag
# starts it, so the GUI test that drives it writes the picture (bundled model,
# measured roofs and times; GUI_TESTS names the test binary).
GUI_TESTS=${GUI_TESTS:-$(dirname "$BIN")/ts_gui_tests}
TS_BATCH_SWEEP_SCREENSHOT="$OUT/batch-sweep.png" "${RUN[@]}" "$GUI_TESTS" \
  --gtest_filter=BatchSweepGui.Screenshot

# Committed pictures are kept small: 256-colour palettes (text stays sharp),
# then lossless recompression, when the tools are installed
# (apt-get install pngquant optipng).
if command -v pngquant > /dev/null; then
  pngquant --quality=70-95 --speed 1 --force --ext .png --skip-if-larger "$OUT"/*.png || true
fi
if command -v optipng > /dev/null; then optipng -quiet -o2 "$OUT"/*.png; fi
