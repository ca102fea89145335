#pragma once
// The GUI's own state, kept outside the drawing functions: settings saved with
// the window layout, what the user selected, and a record of what each frame
// drew (tests read it). No GL, no ImGui.
#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "app/panels/panel_list.h"
#include "app/render/colormap.h"
#include "model/config.h"
#include "sampling/sampling_params.h"

namespace ts::app {

// The window panels (one row each in panel_list.h), then the status bar.
enum class PanelId {
#define TS_PANEL_ID(id, key, title, cls, classroom, open) k##id,
  TS_PANEL_LIST(TS_PANEL_ID)
#undef TS_PANEL_ID
      kStatusBar,
};
// Panels that are windows the user can open and close (the status bar is not).
inline constexpr int kNumWindowPanels = static_cast<int>(PanelId::kStatusBar);
inline constexpr int kNumPanels = kNumWindowPanels + 1;

const char* panel_title(PanelId id);  // window title
const char* panel_key(PanelId id);    // stable key: imgui.ini, --layout, file names
bool parse_panel_key(const std::string& key, PanelId& out);
// Where the classroom layout puts the panel (fractions of the work area) and
// whether it opens there.
struct Classroom {
  float x0 = 0, y0 = 0, x1 = 1, y1 = 1;
  constexpr Classroom(float a, float b, float c, float d) : x0(a), y0(b), x1(c), y1(d) {}
};
Classroom panel_classroom_rect(PanelId id);
bool panel_open_in_classroom(PanelId id);

enum class LogitView { kProbability = 0, kLogit = 1, kLogProb = 2 };

// Saved in imgui.ini ([TokenScope][Settings]) next to the window layout.
struct Settings {
  bool presentation = false;  // large fonts and lines for a projector
  bool light_theme = false;
  Colormap colormap = Colormap::kViridis;
  HeatScale scale = HeatScale::kLinear;
  bool show_thumbnails = true;
  LogitView logit_view = LogitView::kProbability;
  int top_n = 12;
  float run_speed = 2.0f;  // steps per second in Run mode
  // The work area (window minus menu and status bars) the saved panel
  // positions belong to; 0: unknown. A different window size at the next
  // launch scales them to fit.
  float work_w = 0, work_h = 0;
  // Which panels are open, by PanelId (saved by key); at first as the
  // classroom layout opens them.
  std::array<bool, kNumWindowPanels> open = classroom_open();
  bool& panel_open(PanelId id) { return open[static_cast<int>(id)]; }
  static std::array<bool, kNumWindowPanels> classroom_open();
};

struct AttentionSelection {
  int layer = 0;
  int head = 0;
  bool average = false;  // average over heads instead of one head
  int query = -1;        // position chosen in the token strip; -1: the newest row
};

struct AppState {
  Settings settings;
  int view_step = -1;  // history index shown; -1 follows the newest step
  int lane = 0;
  int pending_lane = -1;              // a branch asked for: show this lane as soon as it exists
  uint64_t pending_error_serial = 0;  // the session's error count when it was asked for
  AttentionSelection attention;

  std::string prompt_edit;          // the editor's text
  bool prompt_edit_synced = false;  // filled from the session once
  SamplingParams strategy;          // what the Sampling panel's controls say (lane `lane`)
  // Before prefill: every lane's strategy (the Lanes panel edits the list;
  // `strategy` is the selected lane's, kept apart while its controls move).
  std::vector<SamplingParams> lane_setup{SamplingParams{}};
  std::vector<SamplingParams> strategies() const {
    std::vector<SamplingParams> all = lane_setup;
    if (lane >= 0 && lane < static_cast<int>(all.size())) all[lane] = strategy;
    return all;
  }
  bool strategy_synced = false;
  std::string strategy_error;  // a control value the pipeline refused

  // Errors shown in the window (the session keeps its previous state).
  std::string error_text;
  uint64_t error_serial_seen = 0;

  std::string layout_request;  // applied at the start of the next frame ("classroom", ...)
  std::string notice;          // one line of good news (a file written), shown in the status bar
  // How many runs of the window's own measurements have finished (a lesson
  // step that asks for one waits for its count to grow).
  int comparisons_finished = 0;   // the Compare panel's comparisons
  int batch_sweeps_finished = 0;  // the Roofline panel's batch sweeps
  // A lesson's compare_model: the Compare panel takes it at its next frame
  // (its two-models mode with this path, a fresh panel, nothing run).
  std::filesystem::path compare_model_request;
  // The model the Compare panel's two-models mode loaded beside this
  // session's model (its name, shape and cache; empty name: none), so that the KV
  // panel can show what a token costs in each loaded model.
  std::string compared_model_name;
  ModelConfig compared_model_config;
  int64_t compared_model_kv_layer_bytes = 0;  // one token's K and V in one layer
  bool show_demo = false;
};

// Where a panel's window was, in pixels of the framebuffer.
struct PanelBox {
  float x = 0, y = 0, w = 0, h = 0;
};

// What one frame drew: every panel sets its flag when its window was visible.
struct FrameRecord {
  uint64_t frame = 0;
  std::array<bool, kNumPanels> drawn{};
  std::array<PanelBox, kNumPanels> boxes{};
  int gl_errors = 0;
  double seconds = 0;         // wall time of the whole frame
  double ui_seconds = 0;      // events + building every panel (CPU)
  double render_seconds = 0;  // drawing the UI (with Window::set_timed: until the GL work is done)
  double swap_seconds = 0;    // presenting the frame
  // Right edge of the status bar's last item (before the fps counter), in
  // the bar's coordinates: the bar fits when it is at most the window width.
  float status_right = 0;
  void mark(PanelId id) { drawn[static_cast<int>(id)] = true; }
  bool was_drawn(PanelId id) const { return drawn[static_cast<int>(id)]; }
};

}  // namespace ts::app
