#include "app/app.h"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#define GLFW_INCLUDE_NONE
#include <GLFW/glfw3.h>
#include <imgui.h>
#include <imgui_internal.h>  // MarkIniSettingsDirty
#include <stb_image_write.h>

#include "app/settings.h"
#include "lesson/lesson.h"
#include "util/error.h"
#include "util/paths.h"

namespace ts::app {

std::filesystem::path find_shader_dir() {
  if (const char* env = std::getenv("TOKENSCOPE_SHADERS"); env && *env) return env;
  // Beside the executable (an install's share/tokenscope, or the build tree).
  const std::filesystem::path frag = find_data("shaders/heatmap.frag");
  return frag.empty() ? std::filesystem::path("shaders") : frag.parent_path();
}

namespace {

std::atomic<bool> g_stop_requested{false};
void on_signal(int) { g_stop_requested = true; }

std::filesystem::path font_path() { return find_font(); }

// The session explains a refused step at length (every lane's stop reason,
// which the Step control already lists); the status bar gets one short line.
std::string short_error(const std::string& e) {
  if (e.rfind("cannot step: finished", 0) == 0)
    return "finished: no step left (Back steps back, Reset starts over)";
  return e;
}

}  // namespace

App::App(const AppOptions& options) : options_(options) {
  // A malformed --lesson file stops the launch with its one line (main prints
  // it), before any window opens.
  if (!options.lesson.empty())
    first_lesson_ =
        std::make_unique<lesson::Lesson>(lesson::load_lesson(options.lesson, lesson_vocabulary()));
  WindowOptions wo;
  wo.width = options.width;
  wo.height = options.height;
  wo.visible = !options.hidden;
  wo.vsync = options.bench_frames == 0 && !options.hidden;  // headless frames never wait
  wo.font_path = font_path();
  const bool use_ini =
      options.save_layout && options.screenshot.empty() && options.bench_frames == 0;
  if (use_ini) {
    std::filesystem::path dir =
        options.config_dir.empty() ? default_config_dir() : options.config_dir;
    std::error_code ec;
    if (!dir.empty() &&
        (std::filesystem::create_directories(dir, ec), std::filesystem::is_directory(dir, ec)))
      wo.ini_path = dir / "imgui.ini";
  }
  ini_path_ = wo.ini_path.string();
  window_ = std::make_unique<Window>(wo);
  if (!window_->font_notice().empty()) notices_ = window_->font_notice();
  try {
    renderer_ = std::make_unique<HeatmapRenderer>(find_shader_dir());
  } catch (const Error& e) {
    notices_ += (notices_.empty() ? "" : "; ") + std::string(e.what());
  }
  attention_panel().set_renderer(renderer_.get());

  register_settings_handler(state_.settings);
  std::error_code ec;
  const bool have_ini = !ini_path_.empty() && std::filesystem::exists(ini_path_, ec);
  if (have_ini) ImGui::LoadIniSettingsFromDisk(ini_path_.c_str());
  apply_options_to_state(options);
  // First run (or an explicit --layout): place every panel.
  if (!options.layout.empty() || !have_ini)
    state_.layout_request = options.layout.empty() ? "classroom" : options.layout;
  laid_out_presentation_ = state_.settings.presentation;
  saved_settings_ = state_.settings;

  ctl_.session_options.max_new_tokens = options.max_new_tokens;
  ctl_.session_options.kv_cache = options.kv_cache;
  ctl_.prompt_on_load = options.prompt;
  if (first_lesson_) {
    if (!first_lesson_->prompt.empty()) ctl_.prompt_on_load = first_lesson_->prompt;
    lesson_panel().start(std::move(*first_lesson_));
    first_lesson_.reset();
  }
  if (options.compare.empty()) {
    state_.lane_setup = {parse_strategy(options.strategy)};
  } else {
    state_.lane_setup.clear();
    for (const std::string& c : options.compare) state_.lane_setup.push_back(parse_strategy(c));
  }
  state_.lane = std::clamp(options.lane, 0, static_cast<int>(state_.lane_setup.size()) - 1);
  state_.strategy = state_.lane_setup[state_.lane];
  ctl_.strategies_on_load = state_.lane_setup;
  ctl_.ban_words = options.ban_words;
  ctl_.draft_model_on_load = options.draft_model;
  precision_panel().configure(options.setup, options.compare_precision, options.compare_model);
  roofline_panel().set_cpu_threads(options.setup.cpu_threads);
  // --compare-precision and --compare-model show their panel (unless --layout names another).
  const bool compares = options.compare_precision || !options.compare_model.empty();
  if (compares && options.layout.empty()) state_.layout_request = "formats";
  ctl_.presentation_on_load = state_.settings.presentation;
  options_.setup.cache_sequences =
      std::max(options_.setup.cache_sequences, cache_sequences_for(state_.lane_setup));
}

App::~App() {
  // Write the layout while the ImGui context still exists.
  if (!ini_path_.empty()) ImGui::SaveIniSettingsToDisk(ini_path_.c_str());
  panels_ = {};  // their GL textures go before the renderer and the context
  renderer_.reset();
}

void App::apply_options_to_state(const AppOptions& o) {
  Settings& s = state_.settings;
  if (o.presentation) s.presentation = true;
  if (o.light_theme) s.light_theme = true;
  if (!o.colormap.empty()) parse_colormap(o.colormap, s.colormap);
  if (o.log_scale) s.scale = HeatScale::kLog;
  if (o.layer >= 0) state_.attention.layer = o.layer;
  if (o.head >= 0) state_.attention.head = o.head;
  if (o.average_heads) state_.attention.average = true;
  if (o.query >= 0) state_.attention.query = o.query;
}

void App::load_model_blocking() { ctl_.load_blocking(options_.setup); }

void App::load_model_async() { ctl_.load_async(options_.setup); }

void App::open_session(const std::filesystem::path& file, int lane) {
  ctl_.open_session(file);
  state_.error_text.clear();
  state_.notice = "opened " + file.string() + ": " + std::to_string(ctl_.replay_steps()) +
                  " steps, without the model (Space / Left step through them)";
  state_.pending_lane = -1;
  if (lane <= 0) return;
  const int lanes = ctl_.replay_lanes();
  if (lane >= lanes)
    throw Error("--lane " + std::to_string(lane) + ": " + file.string() + " holds " +
                (lanes == 1 ? std::string("one lane (lane 0)")
                            : "lanes 0 to " + std::to_string(lanes - 1)));
  // Shown as soon as the replay reaches it (at once, unless it is a branch).
  state_.pending_lane = lane;
  const SnapshotPtr snap = ctl_.snapshot();
  state_.pending_error_serial = snap ? snap->error_serial : 0;
}

void App::sync_state() {
  if (ctl_.session_key() != synced_session_) {
    synced_session_ = ctl_.session_key();
    state_.prompt_edit_synced = false;
    state_.strategy_synced = false;
    state_.view_step = -1;
    state_.error_serial_seen = 0;
  }
  if (ctl_.error_serial() != ctl_error_seen_) {
    ctl_error_seen_ = ctl_.error_serial();
    state_.error_text = short_error(ctl_.error());
  }
  if (ctl_.analysis()) {
    const std::string exported = ctl_.analysis()->export_message();
    if (exported != export_message_seen_) {
      export_message_seen_ = exported;
      if (exported.rfind("export failed", 0) == 0)
        state_.error_text = exported;
      else
        state_.notice = exported;
    }
  }
  if (!snap_) return;
  const SessionSnapshot& s = *snap_;
  if (s.error_serial != state_.error_serial_seen) {
    state_.error_serial_seen = s.error_serial;
    if (!s.last_error.empty()) state_.error_text = short_error(s.last_error);
  }
  if (!state_.prompt_edit_synced) {
    // A prompt the model refused at load keeps its text in the editor, so
    // that it can be trimmed (the Prompt panel marks where the context ends).
    state_.prompt_edit = s.prompt_text.empty() ? ctl_.prompt_on_load : s.prompt_text;
    state_.prompt_edit_synced = true;
  }
  if (state_.pending_lane >= 0 && state_.pending_lane < static_cast<int>(s.lanes.size())) {
    state_.lane = state_.pending_lane;  // the branch exists now: show it
    state_.strategy_synced = false;
    state_.view_step = -1;
  }
  if (state_.pending_lane >= 0 &&
      (state_.lane == state_.pending_lane || s.error_serial != state_.pending_error_serial))
    state_.pending_lane = -1;  // shown, or refused (the error says why)
  if (!s.lanes.empty() && state_.lane >= static_cast<int>(s.lanes.size())) {
    // The viewed lane is gone (Back removed a branch): show the lane it came
    // from, and its strategy, not whichever lane the index now falls on.
    int lane = state_.lane;
    while (lane >= static_cast<int>(s.lanes.size()) &&
           lane < static_cast<int>(lane_parents_.size()))
      lane = lane_parents_[lane];
    state_.lane = std::clamp(lane, 0, static_cast<int>(s.lanes.size()) - 1);
    state_.strategy_synced = false;
    state_.view_step = -1;
  }
  if (!s.lanes.empty()) state_.lane = std::max(state_.lane, 0);
  lane_parents_.clear();
  for (const Lane& l : s.lanes) lane_parents_.push_back(l.parent);
  if (!state_.strategy_synced) {
    if (!s.lanes.empty()) state_.strategy = s.lanes[state_.lane].params;
    state_.strategy_synced = true;
  }
  if (state_.view_step >= static_cast<int>(s.history.size())) state_.view_step = -1;
}

void App::advance() {
  if (!snap_ || snap_->running) return;
  if (snap_->state != SessionState::kReady && snap_->state != SessionState::kPaused) return;
  state_.error_text.clear();
  state_.view_step = -1;
  ctl_.advance(state_.strategies());
}

void App::back() {
  if (!snap_ || snap_->running || snap_->history.empty()) return;
  state_.error_text.clear();
  state_.view_step = -1;
  ctl_.back();
}

void App::handle_keys() {
  // Every press since the last frame, from GLFW's key callback: a tap that
  // begins and ends within one frame still counts.
  const std::vector<Window::KeyPress> keys = window_->take_key_presses();
  if (ImGui::GetIO().WantTextInput) return;  // typing in a field
  // A dialog or menu is open (Load model, a combo's list, ...): the class
  // looks at it, so the keys do not move the model behind it.
  const bool popup_open =
      ImGui::IsPopupOpen("", ImGuiPopupFlags_AnyPopupId | ImGuiPopupFlags_AnyPopupLevel);
  for (const Window::KeyPress& k : keys) {
    if (popup_open && k.key != GLFW_KEY_F11) continue;
    const bool busy = snap_ && snap_->busy;
    switch (k.key) {
      case GLFW_KEY_SPACE:
        if (!k.repeat) advance();
        break;
      case GLFW_KEY_RIGHT:
      case GLFW_KEY_PAGE_DOWN:  // what presentation clickers send for "next"
        if (!k.repeat || !busy) advance();
        break;
      case GLFW_KEY_LEFT:
      case GLFW_KEY_PAGE_UP:
        if (!k.repeat || !busy) back();
        break;
      case GLFW_KEY_F11:
        if (!k.repeat) state_.settings.presentation = !state_.settings.presentation;
        break;
      default:
        break;
    }
  }
}

void App::frame() {
  const auto t0 = std::chrono::steady_clock::now();
  ctl_.poll();
  window_->set_presentation(state_.settings.presentation);
  window_->set_light_theme(state_.settings.light_theme);
  window_->begin_frame();
  // The menu bar is drawn before the panels: it reads what the previous frame drew.
  shown_ = record_;
  record_ = FrameRecord{};
  record_.frame = ++frames_;
  snap_ = ctl_.snapshot();
  sync_state();
  view_ = snap_ ? make_step_view(*snap_, state_.view_step, state_.lane) : StepView{};
  handle_keys();
  if (const int refused = window_->take_refused_characters(); refused > 0)
    state_.error_text =
        "emoji and other characters beyond U+FFFF cannot be typed here (this Dear ImGui keeps "
        "16-bit characters); give such a prompt with --prompt";
  draw_menu_bar();
  draw_load_model_popup();
  draw_export_popup();
  draw_open_session_popup();
  draw_open_lesson_popup();
  draw_slides_export_popup();

  const ImGuiViewport* vp = ImGui::GetMainViewport();
  const float menu_h = ImGui::GetFrameHeight();
  const float status_h = StatusBar::height();
  const ImVec2 work_pos(vp->Pos.x, vp->Pos.y + menu_h);
  ImVec2 work_size(vp->Size.x, vp->Size.y - menu_h - status_h);
  // A running lesson keeps a strip at the bottom for its bar; the panels
  // share the rest (they scale back when the lesson ends).
  const float lesson_h = lesson_panel().active() ? LessonPanel::bar_height(work_size.y) : 0;
  work_size.y -= lesson_h;
  LayoutPlan plan;
  // Presentation mode was switched: its large fonts need the layout's own
  // presentation arrangement. Switching it off gives back the arrangement
  // from before, panels moved by hand included (unless a layout was chosen
  // in presentation mode: then that layout's normal form).
  // Presentation mode switched on: the banned-words stage goes on with it
  // (unless --no-ban-words said otherwise); switching it off leaves the stage as it is.
  // A model loaded later starts with the stage on while presentation mode is on.
  ctl_.presentation_on_load = state_.settings.presentation;
  if (state_.settings.presentation && !laid_out_presentation_ &&
      ctl_.ban_words.mode == BanWordsFlags::Mode::kDefault && !ctl_.banned_words_on() &&
      ctl_.worker() && ctl_.banned_words_list())
    ctl_.set_banned_words(true);
  bool restored = false;
  if (state_.settings.presentation != laid_out_presentation_ && state_.layout_request.empty()) {
    if (state_.settings.presentation) {
      layout_.keep(state_.settings, last_layout_);
      state_.layout_request = last_layout_;
      toggled_layout_ = true;
    } else if (layout_.has_kept()) {
      last_layout_ = layout_.restore(plan, work_pos, work_size, state_.settings);
      laid_out_presentation_ = false;
      restored = true;
    } else {
      state_.layout_request = last_layout_;
      toggled_layout_ = true;
    }
  }
  if (restored) {
    // Placed from the kept shares above.
  } else if (!state_.layout_request.empty()) {
    if (!toggled_layout_) layout_.drop_kept();  // a layout chosen by hand replaces the kept one
    toggled_layout_ = false;
    plan = make_layout(state_.layout_request, work_pos, work_size, &state_.settings,
                       lesson_panel().layout_subject());
    last_layout_ = state_.layout_request;
    laid_out_presentation_ = state_.settings.presentation;
    plan.force = true;
    state_.layout_request.clear();
    layout_.laid_out(plan, work_pos, work_size);
    state_.settings.work_w = work_size.x;
    state_.settings.work_h = work_size.y;
  } else {
    plan = make_layout("classroom", work_pos, work_size, nullptr);
    switch (layout_.follow(plan, work_pos, work_size, state_.settings)) {
      case LayoutFollower::Follow::kWait:
        break;
      case LayoutFollower::Follow::kDone:
        state_.settings.work_w = work_size.x;
        state_.settings.work_h = work_size.y;
        break;
      case LayoutFollower::Follow::kLayOutAgain:  // next frame, as if chosen again
        state_.layout_request = last_layout_;
        toggled_layout_ = true;  // keeps what presentation mode keeps
        break;
    }
  }
  if (lesson_h > 0) {
    PanelRect& r = plan.rects[static_cast<int>(PanelId::kLesson)];
    r.set = true;
    r.force = true;
    r.pos = ImVec2(work_pos.x, work_pos.y + work_size.y);
    r.size = ImVec2(work_size.x, lesson_h);
  }
  ImFont* heading = nullptr;
  if (!window_->presentation() && ImGui::GetIO().Fonts->Fonts.Size > 1)
    heading = ImGui::GetIO().Fonts->Fonts[1];
  PanelContext ctx{state_,
                   ctl_,
                   snap_.get(),
                   view_,
                   record_,
                   plan,
                   palette(window_->light_theme()),
                   window_->ui_scale(),
                   heading};
  for (const std::unique_ptr<Panel>& panel : panels_) panel->draw(ctx);
  lesson_panel().draw_outline(ctx);
  StatusInfo info;
  info.renderer = window_->renderer();
  info.notices = notices_;
  info.fps = fps_;
  status_.draw(ctx, info);
  if (state_.show_demo) ImGui::ShowDemoWindow(&state_.show_demo);
  // An error replaces the last good news: dismissing it must not bring an
  // older "wrote ..." back.
  if (!state_.error_text.empty()) state_.notice.clear();

  if (!settings_equal(saved_settings_, state_.settings)) {
    saved_settings_ = state_.settings;
    if (!ini_path_.empty()) ImGui::MarkIniSettingsDirty();
  }
  const auto t_ui = std::chrono::steady_clock::now();
  window_->end_frame(true);
  save_requested_panel();
  record_.gl_errors = gl::check_errors("frame");
  record_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  record_.ui_seconds = std::chrono::duration<double>(t_ui - t0).count();
  record_.render_seconds = window_->last_render_seconds();
  record_.swap_seconds = window_->last_swap_seconds();
  const double dt = ImGui::GetIO().DeltaTime;
  if (dt > 0) fps_ = fps_ == 0 ? 1.0 / dt : fps_ * 0.9 + 0.1 / dt;
}

// The attention panel computes its matrix and thumbnails only while it is
// drawn: a hidden one (another layout, closed) has nothing left to show.
bool App::attention_settled() {
  return !record_.was_drawn(PanelId::kAttention) || attention_panel().settled();
}

void App::settle(int min_frames, int max_frames) {
  for (int i = 0; i < max_frames; ++i) {
    if (ctl_.worker()) ctl_.worker()->wait_idle();
    frame();
    if (i + 1 < min_frames) continue;
    const SnapshotPtr s = ctl_.snapshot();
    const bool worker_idle = !s || !s->busy;
    if (worker_idle && !ctl_.loading() && attention_settled()) {
      if (ctl_.worker()) ctl_.worker()->wait_idle();
      frame();  // one more with everything in place
      return;
    }
  }
}

void install_signal_handlers() {
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
}

int App::run() {
  while (!window_->should_close() && !g_stop_requested) {
    // Sleep between frames while nothing moves, so an idle window costs little.
    const ImGuiIO& io = ImGui::GetIO();
    const bool input = io.MouseDelta.x != 0 || io.MouseDelta.y != 0 || io.MouseDown[0] ||
                       io.WantTextInput || io.InputQueueCharacters.Size > 0;
    const bool active =
        ctl_.loading() || (snap_ && (snap_->busy || snap_->running)) || !attention_settled();
    idle_frames_ = input || active ? 0 : idle_frames_ + 1;
    if (idle_frames_ > 30) glfwWaitEventsTimeout(0.1);
    frame();
    run_pending_capture();
  }
  return 0;
}

void App::write_screenshot(const std::string& path) {
  int w = 0, h = 0;
  const std::vector<uint8_t> pixels = window_->capture(w, h);
  if (w <= 0 || h <= 0) throw Error("screenshot: the window has no pixels");
  if (!stbi_write_png(path.c_str(), w, h, 4, pixels.data(), w * 4))
    throw Error(path + ": cannot write PNG");
}

void App::write_panel_screenshot(PanelId id, const std::string& path) {
  const int index = static_cast<int>(id);
  if (!record_.drawn[index])
    throw Error(std::string("screenshot: the ") + panel_title(id) + " panel is not on screen");
  int w = 0, h = 0;
  const std::vector<uint8_t> pixels = window_->capture(w, h);
  // Window coordinates to framebuffer pixels (they differ on high-DPI screens).
  const ImVec2 scale = ImGui::GetIO().DisplayFramebufferScale;
  const PanelBox& b = record_.boxes[index];
  const int x0 = std::clamp(static_cast<int>(b.x * scale.x), 0, w);
  const int y0 = std::clamp(static_cast<int>(b.y * scale.y), 0, h);
  const int x1 = std::clamp(static_cast<int>((b.x + b.w) * scale.x), x0, w);
  const int y1 = std::clamp(static_cast<int>((b.y + b.h) * scale.y), y0, h);
  if (x1 <= x0 || y1 <= y0) throw Error("screenshot: the panel has no pixels");
  std::vector<uint8_t> crop;
  crop.reserve(static_cast<size_t>(x1 - x0) * (y1 - y0) * 4);
  for (int y = y0; y < y1; ++y) {
    const auto row = pixels.begin() + (static_cast<long>(y) * w + x0) * 4;
    crop.insert(crop.end(), row, row + static_cast<long>(x1 - x0) * 4);
  }
  if (!stbi_write_png(path.c_str(), x1 - x0, y1 - y0, 4, crop.data(), (x1 - x0) * 4))
    throw Error(path + ": cannot write PNG");
}

int run_screenshot(const AppOptions& options) {
  AppOptions o = options;
  o.hidden = true;
  o.save_layout = false;
  if (o.layout.empty())
    o.layout = o.compare_precision || !o.compare_model.empty() ? "formats" : "classroom";
  App app(o);
  try {
    if (!o.open.empty())
      app.open_session(o.open, o.lane);
    else
      app.load_model_blocking();
  } catch (const Error& e) {
    std::fprintf(stderr, "tokenscope: %s\n", e.what());
    return 2;
  }
  app.frame();
  // A prompt the model refused: the picture would show nothing; say why.
  if (const SnapshotPtr s = app.controller().snapshot(); s && s->prompt_tokens.empty()) {
    const std::string why = app.controller().error();
    std::fprintf(stderr, "tokenscope: %s\n",
                 why.empty() ? "no prompt to show (give one with --prompt)" : why.c_str());
    return 2;
  }
  if (!o.open.empty()) {
    // The file opens at its prefill: --steps more of its steps (-1: before prefill).
    if (o.steps < 0) app.controller().back();
    for (int i = 0; i < o.steps; ++i) app.controller().advance(app.state().strategies());
  } else if (o.steps >= 0) {
    app.controller().advance(app.state().strategies());  // prefill
    for (int i = 0; i < o.steps; ++i) app.controller().advance(app.state().strategies());
  }
  if (!o.rechoose.empty()) {
    app.settle(2, 200);
    const SamplingParams p = parse_strategy(o.rechoose);
    app.state().strategy = p;
    app.controller().choose_with(app.state().lane, p);
  }
  SessionWorker* worker = app.controller().worker();
  AnalysisStore* analysis = app.controller().analysis();
  if (o.cache_compare > 0 && worker && analysis) {
    app.settle(2, 200);
    analysis->compare_cache(*worker, o.cache_compare, app.state().strategy);
  }
  app.settle(4, 200);
  if (o.cache_compare > 0 && analysis)
    if (const auto cmp = analysis->cache_comparison(); cmp && cmp->steps() < o.cache_compare)
      std::fprintf(stderr, "tokenscope: note: --cache-compare %d: the context leaves room for %d\n",
                   o.cache_compare, cmp->steps());
  if (!app.state().error_text.empty())
    std::fprintf(stderr, "tokenscope: note: %s\n", app.state().error_text.c_str());
  try {
    PanelId panel;
    if (!o.panel.empty() && parse_panel_key(o.panel, panel))
      app.write_panel_screenshot(panel, o.screenshot);
    else
      app.write_screenshot(o.screenshot);
    if (!o.json.empty() && worker && analysis) {
      analysis->export_json(*worker, o.json);
      worker->wait_idle();
      std::fprintf(stderr, "%s\n", analysis->export_message().c_str());
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "tokenscope: %s\n", e.what());
    return 2;
  }
  const FrameRecord& r = app.last_frame();
  int drawn = 0;
  for (bool d : r.drawn) drawn += d ? 1 : 0;
  std::fprintf(stderr, "wrote %s (%d x %d, %d panels drawn, %d GL errors)\n", o.screenshot.c_str(),
               o.width, o.height, drawn, static_cast<int>(gl::error_count()));
  return 0;
}

}  // namespace ts::app
