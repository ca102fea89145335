#include "app/app_options.h"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <system_error>

#include "app/app_state.h"
#include "app/render/colormap.h"
#include "model/config_json.h"
#include "sampling/sampling_params.h"
#include "session/dola_lane.h"
#include "session/model_flags.h"
#include "session/session.h"
#include "util/error.h"

namespace ts::app {

namespace {

int parse_int(const std::string& flag, const std::string& v, int lo, int hi) {
  return static_cast<int>(parse_whole_number(flag, v, lo, hi));
}

// A speculative lane needs the draft model and the KV cache (as in
// tokenscope-cli). A draft with no speculative lane is kept: the Lanes panel
// can add one while the window runs.
void check_spec_flags(const AppOptions& o) {
  std::vector<std::string> lanes = o.compare;
  if (lanes.empty()) lanes.push_back(o.strategy);
  for (const std::string& lane : lanes) {
    const SamplingParams p = parse_strategy(lane);
    if (!p.speculative()) continue;
    if (o.draft_model.empty())
      throw Error(format_strategy(p) +
                  " needs --draft-model DIR (any model sharing the target's vocabulary; the "
                  "target's own directory works)");
    if (!o.kv_cache)
      throw Error("--no-kv-cache and " + format_strategy(p) +
                  " conflict: speculative decoding verifies the drafts over the cached prefix");
  }
}

}  // namespace

void check_lanes_for_model(const AppOptions& o) {
  namespace fs = std::filesystem;
  if (!o.open.empty()) return;
  const fs::path model = o.setup.model.empty() ? default_model_path() : o.setup.model;
  std::error_code ec;
  fs::path config;
  if (fs::is_directory(model, ec))
    config = model / "config.json";
  else if (model.filename() == "config.json" || model.filename() == "model.safetensors")
    config = model.parent_path() / "config.json";
  if (config.empty() || !fs::is_regular_file(config, ec)) return;  // loading says why
  const ModelConfig cfg = load_config_json(config);
  const bool compare = !o.compare.empty();
  for (const std::string& lane : compare ? o.compare : std::vector<std::string>{o.strategy}) {
    const SamplingParams p = parse_strategy(lane);
    if (!p.dola()) continue;
    try {
      dola_layers_for(p, cfg);
    } catch (const Error& e) {
      throw Error(std::string(compare ? "--compare" : "--strategy") + " \"" + lane +
                  "\": " + e.what());
    }
  }
}

AppOptions parse_app_options(int argc, const char* const* argv) {
  AppOptions o;
  // --help wins over everything else on the line, even over a bad value.
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      o.help = true;
      return o;
    }
  FlagReader r(argc, argv);
  // The first flag that runs the model (--open has none to run).
  std::string needs_model;
  auto note_model_flag = [&](const std::string& flag) {
    if (needs_model.empty()) needs_model = flag;
  };
  std::vector<std::string> given;
  std::string precision_text;  // --compare-precision, checked once --device is known
  while (r.next()) {
    const std::string arg = r.flag();
    // As in tokenscope-cli: a second value is never silently taken over the first.
    if (std::find(given.begin(), given.end(), arg) != given.end())
      throw Error(arg + " is given twice");
    given.push_back(arg);
    auto need = [&]() { return r.value(); };
    static const char* const kSessionFlags[] = {"--prompt",       "--strategy",
                                                "--compare",      "--max-new-tokens",
                                                "--no-kv-cache",  "--lesson",
                                                "--rechoose",     "--cache-compare",
                                                "--json",         "--compare-precision",
                                                "--compare-model"};
    for (const char* f : kSessionFlags)
      if (arg == f) note_model_flag(arg);
    if (parse_model_flag(r, o.setup)) {
      note_model_flag(arg);
      continue;
    } else if (parse_draft_model_flag(r, o.draft_model)) {
      note_model_flag(arg);
      continue;
    } else if (parse_ban_words_flag(r, o.ban_words)) {
      note_model_flag(arg);
      // Read now, so that a bad list is refused with its file and line
      // before any window opens; it is tokenized once the model is loaded.
      if (o.ban_words.mode == BanWordsFlags::Mode::kFile) read_banned_word_list(o.ban_words.file);
      continue;
    } else if (arg == "--prompt") {
      o.prompt = need();
    } else if (arg == "--strategy") {
      o.strategy = need();
      parse_strategy_flag(arg, o.strategy);  // validates now, as tokenscope-cli does
    } else if (arg == "--compare") {
      // Every following argument up to the next option is one lane's strategy.
      o.compare = r.values_up_to_next_flag();
      for (const std::string& c : o.compare) parse_strategy_flag(arg, c);
      if (o.compare.empty()) throw Error("--compare: give one strategy per lane (see --help)");
      if (static_cast<int>(o.compare.size()) > kMaxLanes)
        throw Error("--compare: at most " + std::to_string(kMaxLanes) + " lanes (got " +
                    std::to_string(o.compare.size()) + ")");
    } else if (arg == "--compare-precision") {
      precision_text = need();
    } else if (arg == "--compare-model") {
      o.compare_model = non_empty(arg, need());
    } else if (arg == "--max-new-tokens") {
      o.max_new_tokens = parse_int(arg, need(), 1, 1 << 20);
    } else if (arg == "--open") {
      o.open = non_empty(arg, need());
    } else if (arg == "--screenshot") {
      o.screenshot = non_empty(arg, need());
    } else if (arg == "--steps") {
      o.steps = parse_int(arg, need(), -1, 1 << 20);
    } else if (arg == "--rechoose") {
      o.rechoose = need();
      parse_strategy_flag(arg, o.rechoose);
    } else if (arg == "--layout") {
      o.layout = need();
    } else if (arg == "--lesson") {
      o.lesson = non_empty(arg, need());
    } else if (arg == "--panel") {
      o.panel = need();
      PanelId id;
      if (!parse_panel_key(o.panel, id) || id == PanelId::kStatusBar)
        throw Error("--panel: no panel named '" + o.panel + "' (see --help)");
    } else if (arg == "--cache-compare") {
      o.cache_compare = parse_int(arg, need(), 1, 1 << 20);
    } else if (arg == "--json") {
      o.json = non_empty(arg, need());
    } else if (arg == "--no-kv-cache") {
      r.no_value();
      o.kv_cache = false;
    } else if (arg == "--width") {
      o.width = parse_int(arg, need(), 320, 8192);
    } else if (arg == "--height") {
      o.height = parse_int(arg, need(), 240, 8192);
    } else if (arg == "--presentation") {
      r.no_value();
      o.presentation = true;
    } else if (arg == "--theme") {
      const std::string t = need();
      if (t != "dark" && t != "light")
        throw Error("--theme: expected dark or light, got '" + t + "'");
      o.light_theme = t == "light";
    } else if (arg == "--colormap") {
      o.colormap = need();
      Colormap m;
      if (!parse_colormap(o.colormap, m))
        throw Error("--colormap: expected viridis, magma or grey, got '" + o.colormap + "'");
    } else if (arg == "--log-scale") {
      r.no_value();
      o.log_scale = true;
    } else if (arg == "--layer") {
      o.layer = parse_int(arg, need(), 0, 1000);
    } else if (arg == "--head") {
      o.head = parse_int(arg, need(), 0, 1000);
    } else if (arg == "--average-heads") {
      r.no_value();
      o.average_heads = true;
    } else if (arg == "--query") {
      o.query = parse_int(arg, need(), 0, 1 << 20);
    } else if (arg == "--lane") {
      o.lane = parse_int(arg, need(), 0, kMaxLanes - 1);
    } else if (arg == "--bench-frames") {
      o.bench_frames = parse_int(arg, need(), 1, 1000000);
    } else if (arg == "--bench-size") {
      o.bench_size = parse_int(arg, need(), 1, 4096);
    } else if (arg == "--config-dir") {
      o.config_dir = non_empty(arg, need());
    } else if (arg == "--no-save-layout") {
      r.no_value();
      o.save_layout = false;
    } else if (arg == "--hidden") {
      r.no_value();
      o.hidden = true;
    } else {
      throw Error("unknown option '" + arg + "' (see --help)");
    }
  }
  check_spec_flags(o);
  if (std::find(given.begin(), given.end(), "--compare-precision") != given.end()) {
    o.compare_precision =
        parse_precision_pair("--compare-precision", precision_text, o.setup.device);
    // The engines compared load in the formats of the list.
    if (std::find(given.begin(), given.end(), "--weights") != given.end())
      throw Error(
          "--compare-precision and --weights conflict: the Compare panel loads the model in "
          "the two formats of its list (the session keeps f32)");
  }
  if (!o.compare_model.empty() && o.compare_precision)
    throw Error(
        "--compare-precision and --compare-model conflict: the Compare panel runs one comparison "
        "(two formats of the model, or the model and another)");
  if (!o.open.empty() && !needs_model.empty())
    throw Error("--open and " + needs_model +
                " do not combine: a reopened session shows what its file recorded, without "
                "the model");
  return o;
}

// The one-panel layouts, every panel's key, wrapped in the help's column:
// the list cannot fall behind the panels.
std::string single_panel_layouts() {
  const std::string indent(25, ' ');
  std::string out, line = indent;
  for (int i = 0; i < kNumWindowPanels; ++i) {
    const std::string word =
        std::string(panel_key(static_cast<PanelId>(i))) + (i + 1 < kNumWindowPanels ? "," : "");
    if (line.size() > indent.size() && line.size() + 1 + word.size() > 80) {
      out += line + "\n";
      line = indent;
    }
    line += (line.size() > indent.size() ? " " : "") + word;
  }
  return out + line + "\n";
}

std::string app_help() {
  return std::string(
      R"(tokenscope - watch GPT-2 generate text one step at a time

usage: tokenscope [options]

The window pauses after the prompt's prefill and after every decode step and
shows the attention, the KV cache, the logits and how the next token is chosen.
Keys: Space, Right or Page Down = prefill / step, Left or Page Up = step back
(not while a dialog or menu is open), F11 = presentation mode.

model
)" + model_flags_help() +
      draft_model_help() +
      R"(                          (the Lanes panel offers speculative lanes only with it)
)" +
      R"(  --open FILE             step through a session exported by File > Export session
                          or tokenscope-cli --json, without the model: every panel
                          its records can feed draws them; panels that recompute
                          with the model say so (takes no model or session flag);
                          speculative and DoLa lanes replay their rounds and layer
                          contrasts, lookahead and prompt-lookup lanes their passes
)" +
      R"(
session
  --prompt TEXT          prompt to start with (default "Today's weather is so")
  --strategy STR         decoding strategy, e.g. greedy, "temperature=0.7,seed=3",
                         "top_p=0.9", "top_k=40,temperature=0.8" (default greedy);
                         every strategy tokenscope-cli --help lists, lookahead and
                         prompt_lookup included
  --compare STR...       several lanes sharing one prefill, one strategy each
                         (up to )" +
      std::to_string(kMaxLanes) +
      R"(), e.g. --compare greedy "top_p=0.9,seed=3" beams=4
  --compare-precision REF,FMT
                         open the Compare panel (layout formats) and run the
                         prompt greedily under two weight formats of the model,
                         e.g. f32,q8 or bf16,q4 (REF is the reference; f32, bf16,
                         f16, q8, q4, two different ones): the model is loaded
                         twice more, FMT teacher-forced on REF's tokens (KL,
                         top-1 and the top-10 tokens that moved, per step, on
                         the same context) beside FMT's own free-running greedy
                         text (the first divergence); the panel's controls pick
                         other formats; q8 and q4 run on the CPU (with either,
                         both do; --device cuda refuses them; not with --weights)
  --compare-model PATH   open the Compare panel in its two-models mode and run
                         the prompt greedily under the model and the one at
                         PATH (e.g. assets/models/tokenscope-tiny-draft, or a
                         Llama-shaped model with the same tokenizer), loaded as
                         --draft-model is; the same figures per step, plus each
                         model's weight MB and KV bytes per token; a model whose
                         tokenizer differs is refused naming the first id that
                         differs (in the panel); not with --compare-precision
  --max-new-tokens N     tokens to generate before stopping (default 64)
  --no-kv-cache          every decode step recomputes the whole sequence (the
                         naive loop), to compare with the cached steps
)" + ban_words_help() +
      R"(                         The Choosing panel's "Ban listed words" box switches
                         the stage on and off while the window runs.

view
  --layout NAME          classroom (the seven main panels; default on first
                         run), lesson (tokens, steps, attention, choosing),
                         memory (tokens, steps, KV cache, timeline), cost
                         (tokens, steps, KV cache on vs off, roofline), layers
                         (tokens, steps, attention, logit lens), compare
                         (tokens, steps, lanes, KV cache), speculative
                         (tokens, steps, speculative decoding, timeline),
                         formats (tokens, steps, precision, logits), or
                         one panel filling the window:
)" + single_panel_layouts() +
      R"(  --lesson FILE          start a guided lesson (a .lesson file; the bundled ones
                         are in the Lessons menu; docs/lessons.md: the format)
  --presentation         large fonts and lines for a projector
  --theme dark|light     colour theme (default dark)
  --colormap NAME        viridis (default), magma or grey
  --log-scale            attention colour scale logarithmic instead of linear
  --layer L --head H     attention layer and head to show (default 0, 0)
  --average-heads        show the average over the heads of the layer
  --query POS            highlight the attention row of this position
  --lane N               lane to show (default 0); with --open, a lane of the
                         file (a branch shows from the step after it was made)

headless pictures and measurements
  --screenshot FILE.png  run the steps without a visible window, render a few
                         frames and write the window as a PNG, then exit
  --steps N              with --screenshot: decode steps after prefill
                         (default 0: prefill only; -1: before prefill; with
                         --open: steps of the file after its prefill)
  --rechoose STR         with --screenshot: after the steps, re-choose the newest
                         step's token with strategy STR (same logits, new choice)
  --cache-compare N      with --screenshot: first run the prompt N tokens with
                         and without the KV cache (the "KV cache on vs off" panel)
  --panel KEY            with --screenshot: write only this panel (a key as in
                         --layout, e.g. roofline)
  --json FILE            with --screenshot: also export the session and what the
                         analysis panels show as JSON (File > Export in the window)
  --width W --height H   window size in pixels (default 1600 x 900)
  --bench-frames N       frame-time benchmark: N frames with a synthetic
                         attention map on screen; prints median and p99 frame
                         time as JSON, then exits
  --bench-size N         side of the synthetic attention map (default 1024)

settings
  --config-dir DIR       where imgui.ini (layout and settings) is kept
                         (default $XDG_CONFIG_HOME/tokenscope or ~/.config/tokenscope)
  --no-save-layout       neither read nor write imgui.ini
  --hidden               no visible window (for tests)
  -h, --help             this help (wins over every other flag)

Every flag is given once (a repeated one is refused, as in tokenscope-cli) and
written "--flag value" or "--flag=value"; a value that itself starts with "--"
needs the second form. A strategy's seed=N needs a sampling key, as --seed
does in tokenscope-cli (greedy decoding draws nothing). Exit codes as tokenscope-cli's: 0 done,
2 bad input (one line on stderr; a lane the model cannot run, such as a DoLa
layer it lacks, is refused before any window opens; a model that cannot load is
shown in the window and still exits 2), 3 internal error.
)");
}

std::filesystem::path default_config_dir() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg)
    return std::filesystem::path(xdg) / "tokenscope";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::filesystem::path(home) / ".config" / "tokenscope";
  return {};
}

}  // namespace ts::app
