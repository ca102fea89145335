#pragma once
// The visualizer: one window, the panels (one file each), the state they
// share, and the session worker behind them. frame() draws one frame;
// run() is the interactive loop; run_screenshot() and the frame benchmark
// are the headless entry points.
#include <chrono>
#include <memory>
#include <string>

#include "app/app_options.h"
#include "app/app_state.h"
#include "app/controller.h"
#include "app/exports/exports.h"
#include "app/layout.h"
#include "app/panels/attention.h"
#include "app/panels/cache.h"
#include "app/panels/guided.h"
#include "app/panels/help.h"
#include "app/panels/kv.h"
#include "app/panels/lanes.h"
#include "app/panels/lens.h"
#include "app/panels/logits.h"
#include "app/panels/lookahead.h"
#include "app/panels/panel_table.h"
#include "app/panels/precision.h"
#include "app/panels/prompt.h"
#include "app/panels/quiz.h"
#include "app/panels/roofline.h"
#include "app/panels/rope.h"
#include "app/panels/sampling.h"
#include "app/panels/score.h"
#include "app/panels/spec.h"
#include "app/panels/timeline.h"
#include "app/panels/transport.h"
#include "app/render/heatmap.h"
#include "app/render/window.h"

namespace ts::app {

class App {
 public:
  // Opens the window and the GL resources; throws ts::Error. Does not load a model.
  explicit App(const AppOptions& options);
  ~App();
  App(const App&) = delete;
  App& operator=(const App&) = delete;

  void load_model_blocking();  // throws ts::Error
  void load_model_async();
  // File > Load model: loads `model` in the background with the window's
  // other model flags; the session's prompt and lanes carry over, and the
  // Compare panel takes it as its reference.
  void load_model(const std::filesystem::path& model);
  // File > Load model...: opens its dialog at the next frame.
  void open_load_model_dialog() { open_load_popup_ = true; }
  // File > Open session and --open: the session `file` recorded, stepped
  // through without the model. Throws ts::Error ("FILE: reason"); then the
  // current session stays. `lane` (--lane) is the lane to show: shown from
  // the step it exists (a branch, from the step after it was made); one the
  // file does not hold throws ("--lane N: ...") after the file has opened.
  void open_session(const std::filesystem::path& file, int lane = 0);

  // One frame: events, every panel, render, swap.
  void frame();
  // Frames until the worker is idle and every panel has its data (at least min_frames).
  void settle(int min_frames = 3, int max_frames = 120);
  // Interactive loop until the window closes. Returns the exit code.
  int run();
  // Renders the current frame off screen and writes it as PNG; throws ts::Error.
  void write_screenshot(const std::string& path);
  // The same, cropped to one panel as the last frame drew it; throws ts::Error
  // when that panel was not drawn.
  void write_panel_screenshot(PanelId id, const std::string& path);

  // Keyboard commands (Space / Right, Left), also for tests.
  void advance();
  void back();

  Controller& controller() { return ctl_; }
  AppState& state() { return state_; }
  Window& window() { return *window_; }
  const FrameRecord& last_frame() const { return record_; }
  // File > Save panel as PNG: offered for the panels on screen; the file
  // (tokenscope-KEY-stepN.png in the working directory) is written after the
  // next frame renders. False when the panel is not on screen.
  bool can_save_panel(PanelId id) const { return saveable_[static_cast<int>(id)]; }
  bool request_panel_save(PanelId id);
  // File > Export for slides (app_export.cpp). export_to writes one export
  // of what is on show to `path`; true when written ("wrote ..." in the
  // status bar), else the one-line reason is shown and nothing changes.
  bool export_to(ExportKind kind, const std::string& path);
  // A panel as PNG at `scale` times its size on screen: the window is drawn
  // again at that scale off screen (fonts rasterised at that size, see
  // Window::set_render_scale), the panel cut out and written atomically,
  // then the window goes back to 1x. Throws ts::Error (not on screen, bad
  // path). Returns where things were, for tests.
  struct PanelCapture {
    int width = 0, height = 0;  // of the PNG
    PanelBox panel_1x;          // the panel on screen before
    PanelBox heatmap;           // Attention: its heatmap in the PNG's pixels
  };
  PanelCapture write_panel_png_scaled(PanelId id, const std::string& path, int scale);
  // The panels, for tests (each is the class its row in panel_list.h names).
  AttentionPanel& attention_panel() { return panel<AttentionPanel>(PanelId::kAttention); }
  SamplingPanel& sampling_panel() { return panel<SamplingPanel>(PanelId::kSampling); }
  PromptPanel& prompt_panel() { return panel<PromptPanel>(PanelId::kPrompt); }
  LogitsPanel& logits_panel() { return panel<LogitsPanel>(PanelId::kLogits); }
  LessonPanel& lesson_panel() { return panel<LessonPanel>(PanelId::kLesson); }
  LanesPanel& lanes_panel() { return panel<LanesPanel>(PanelId::kLanes); }
  RooflinePanel& roofline_panel() { return panel<RooflinePanel>(PanelId::kRoofline); }
  TimelinePanel& timeline_panel() { return panel<TimelinePanel>(PanelId::kTimeline); }
  KvCachePanel& kv_cache_panel() { return panel<KvCachePanel>(PanelId::kKvCache); }
  RopePanel& rope_panel() { return panel<RopePanel>(PanelId::kRope); }
  // Starts the lesson in `path`; a malformed file leaves the window as it
  // was and shows one line naming the file and the line.
  bool start_lesson(const std::filesystem::path& path);
  CacheComparePanel& cache_compare_panel() {
    return panel<CacheComparePanel>(PanelId::kCacheCompare);
  }
  QuizPanel& quiz_panel() { return panel<QuizPanel>(PanelId::kQuiz); }
  ScorePanel& score_panel() { return panel<ScorePanel>(PanelId::kScore); }
  SpeculativePanel& speculative_panel() { return panel<SpeculativePanel>(PanelId::kSpeculative); }
  LookaheadPanel& lookahead_panel() { return panel<LookaheadPanel>(PanelId::kLookahead); }
  PrecisionPanel& precision_panel() { return panel<PrecisionPanel>(PanelId::kPrecision); }
  bool has_heatmap_renderer() const { return renderer_ != nullptr; }
  // Problems that do not stop the window (font, shaders).
  const std::string& notices() const { return notices_; }

 private:
  bool attention_settled();
  void sync_state();
  void handle_keys();
  void draw_menu_bar();
  void draw_load_model_popup();
  void draw_export_popup();
  void draw_open_session_popup();
  void draw_lessons_menu();
  void draw_open_lesson_popup();
  void draw_slides_export_popup();  // app_export.cpp
  void run_pending_capture();       // the 2x PNG asked for in that popup
  void save_requested_panel();
  void apply_options_to_state(const AppOptions& o);

  AppOptions options_;
  std::unique_ptr<Window> window_;
  std::unique_ptr<HeatmapRenderer> renderer_;
  Controller ctl_;
  AppState state_;
  Settings saved_settings_;  // to notice changes that must reach imgui.ini
  FrameRecord record_;
  FrameRecord shown_;                        // the previous frame's record (what is on screen now)
  std::array<bool, kNumPanels> saveable_{};  // what the last menu bar offered to save
  std::vector<int> lane_parents_;            // each lane's parent in the last snapshot seen
  // The layout last applied and whether presentation mode was on then:
  // switching presentation mode applies that layout again in its other form.
  std::string last_layout_ = "classroom";
  bool laid_out_presentation_ = false;
  // The panels' shares of the work area, followed when it changes size, and
  // the arrangement before presentation mode was switched on (given back
  // when it is switched off; a layout chosen in presentation mode drops it).
  LayoutFollower layout_;
  bool toggled_layout_ = false;  // the pending layout request came from switching presentation mode
  uint64_t frames_ = 0;
  SnapshotPtr snap_;
  StepView view_;
  const void* synced_session_ = nullptr;  // Controller::session_key() the state was synced to
  uint64_t ctl_error_seen_ = 0;
  std::string notices_;
  std::string ini_path_;
  double fps_ = 0;
  int idle_frames_ = 0;
  bool open_load_popup_ = false;
  std::string load_path_;
  bool open_export_popup_ = false;
  bool open_session_popup_ = false;
  std::string session_path_ = "tokenscope-session.json";
  bool open_lesson_popup_ = false;
  std::unique_ptr<lesson::Lesson> first_lesson_;  // --lesson, until the panels exist
  std::string lesson_path_;
  std::string export_path_ = "tokenscope-session.json";
  std::string export_message_seen_;
  int save_panel_ = -1;  // File > Save panel as PNG: written after this frame renders
  // Frames to let pass first: the frame of the click still draws the open
  // menu over the panel, the next one does not.
  int save_panel_wait_ = 0;
  // File > Export for slides: the popup's choice (an ExportKind, or
  // kNumExportKinds + a panel for its 2x PNG), its path, a 2x PNG to write
  // after the frame.
  int slides_choice_ = -1;
  bool open_slides_popup_ = false;
  std::string slides_path_;
  int capture_panel_ = -1;
  std::string capture_path_;

  template <typename T>
  T& panel(PanelId id) {
    return static_cast<T&>(*panels_[static_cast<int>(id)]);
  }
  std::array<std::unique_ptr<Panel>, kNumWindowPanels> panels_ = make_panels();
  StatusBar status_;
};

// Ctrl-C / SIGTERM close the window normally (the layout is saved).
void install_signal_handlers();

// `tokenscope --screenshot FILE --steps N ...`: returns the exit code.
int run_screenshot(const AppOptions& options);
// `tokenscope --bench-frames N`: prints JSON, returns the exit code.
int run_frame_benchmark(const AppOptions& options);

// Where the shaders are: $TOKENSCOPE_SHADERS, the source tree's shaders/, or
// ../shaders beside the executable.
std::filesystem::path find_shader_dir();

}  // namespace ts::app
