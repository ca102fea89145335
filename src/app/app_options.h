#pragma once
// Command line of the `tokenscope` window. No GL, no ImGui.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "session/model_flags.h"
#include "session/model_setup.h"
#include "session/precision_compare.h"

namespace ts::app {

struct AppOptions {
  ModelSetupOptions setup;
  std::string prompt = "Today's weather is so";
  std::string strategy = "greedy";
  std::vector<std::string> compare;  // several lanes sharing one prefill, one strategy each
  // --draft-model DIR: the draft of speculative lanes (spec=N); without it the
  // window offers no speculative lane.
  std::filesystem::path draft_model;
  // --compare-precision REF,FMT: the Compare panel runs the prompt under
  // these two weight formats as soon as the model is loaded.
  std::optional<PrecisionPair> compare_precision;
  // --compare-model PATH: the same panel compares the session's model with
  // the one at PATH (sharing its vocabulary) as soon as the model is loaded.
  std::filesystem::path compare_model;
  int max_new_tokens = 64;
  // --open FILE: step through an exported session without the model.
  std::filesystem::path open;

  // Headless picture: --screenshot FILE --steps N
  std::string screenshot;
  int steps = 0;            // decode steps after prefill; -1: stop before prefill
  std::string rechoose;     // then re-choose the newest step's token with this strategy
  std::string layout;       // empty: the saved layout (classroom on first run)
  std::string lesson;       // a guided lesson file to start with (docs/lessons.md)
  std::string panel;        // only this panel's rectangle goes into the PNG (a panel key)
  int cache_compare = 0;    // run the KV cache on/off comparison for N tokens first
  std::string json;         // also export the session and analysis JSON here
  bool kv_cache = true;     // false: --no-kv-cache (every decode step recomputes everything)
  BanWordsFlags ban_words;  // --ban-words FILE / --no-ban-words (read and checked when parsed)
  int width = 1600;
  int height = 900;

  bool presentation = false;
  bool light_theme = false;
  std::string colormap;  // empty: the saved setting (viridis by default)
  bool log_scale = false;
  int layer = -1;  // -1: keep / default
  int head = -1;
  bool average_heads = false;
  int query = -1;
  int lane = 0;

  // Frame-time benchmark with a synthetic attention map.
  int bench_frames = 0;
  int bench_size = 1024;

  // Where imgui.ini (window layout and settings) lives; empty: the user config dir.
  std::filesystem::path config_dir;
  bool save_layout = true;
  bool hidden = false;  // no visible window (tests; screenshots are always hidden)
  bool help = false;
};

// Throws ts::Error naming the flag on a bad command line.
AppOptions parse_app_options(int argc, const char* const* argv);
std::string app_help();

// Before any window opens: the lanes checked against the model's config.json
// (a DoLa layer the model lacks), so that bad input exits 2 with one line as
// in tokenscope-cli. Throws ts::Error; an llm.c file is checked once loaded.
void check_lanes_for_model(const AppOptions& options);

// $XDG_CONFIG_HOME/tokenscope, else ~/.config/tokenscope; empty when neither is known.
std::filesystem::path default_config_dir();

}  // namespace ts::app
