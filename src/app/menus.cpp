#include "app/menus.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <utility>

#include <imgui.h>
#include <imgui_stdlib.h>

#include "app/app.h"
#include "lesson/lesson.h"
#include "util/error.h"
#include "util/paths.h"

namespace ts::app {

namespace {

// The models shipped in assets/models/, with the family the Load popup names.
constexpr std::pair<const char*, const char*> kBundledModels[] = {
    {"tokenscope-tiny", "GPT-2"},
    {"tokenscope-tiny-llama", "Llama"},
    {"tokenscope-tiny-draft", "GPT-2 draft"},
};

}  // namespace

bool path_popup(const char* title, bool& open_request, std::string& path, const char* action,
                const std::function<void()>& explain, bool action_enabled) {
  if (open_request) {
    ImGui::OpenPopup(title);
    open_request = false;
  }
  ImGui::SetNextWindowSize(ImVec2(ImGui::GetFontSize() * 34, 0), ImGuiCond_Appearing);
  if (!ImGui::BeginPopupModal(title, nullptr)) return false;
  explain();
  ImGui::SetNextItemWidth(-FLT_MIN);
  ImGui::InputText("##path", &path);
  bool acted = false;
  if (ImGui::Button(action) && action_enabled) {
    acted = true;
    ImGui::CloseCurrentPopup();
  }
  ImGui::SameLine();
  if (ImGui::Button("Cancel")) ImGui::CloseCurrentPopup();
  ImGui::EndPopup();
  return acted;
}

bool App::request_panel_save(PanelId id) {
  if (!saveable_[static_cast<int>(id)]) return false;
  save_panel_ = static_cast<int>(id);
  return true;
}

void App::draw_menu_bar() {
  // The panels are drawn after the menu bar: offer those the previous frame drew.
  for (int i = 0; i < kNumWindowPanels; ++i) saveable_[i] = shown_.drawn[i];
  if (!ImGui::BeginMainMenuBar()) return;
  if (ImGui::BeginMenu("File")) {
    if (ImGui::MenuItem("Load model...", nullptr, false, !ctl_.loading())) open_load_popup_ = true;
    if (ImGui::MenuItem("Open session...")) open_session_popup_ = true;
    if (ImGui::MenuItem("Export session as JSON...", nullptr, false, ctl_.analysis() != nullptr))
      open_export_popup_ = true;
    if (ImGui::BeginMenu("Save panel as PNG")) {
      for (int i = 0; i < kNumWindowPanels; ++i)
        if (ImGui::MenuItem(panel_title(static_cast<PanelId>(i)), nullptr, false, saveable_[i]) &&
            request_panel_save(static_cast<PanelId>(i)))
          save_panel_wait_ = 1;  // this frame still draws the menu over the panel
      ImGui::EndMenu();
    }
    if (ImGui::BeginMenu("Export for slides")) {
      for (int k = 0; k < kNumExportKinds; ++k)
        if (ImGui::MenuItem((std::string(export_label(static_cast<ExportKind>(k))) + "...").c_str(),
                            nullptr, false, view_.step >= 0)) {
          slides_choice_ = k;
          open_slides_popup_ = true;
        }
      if (ImGui::BeginMenu("Panel as PNG at 2x")) {
        for (int i = 0; i < kNumWindowPanels; ++i)
          if (ImGui::MenuItem(panel_title(static_cast<PanelId>(i)), nullptr, false, saveable_[i])) {
            slides_choice_ = kNumExportKinds + i;
            open_slides_popup_ = true;
          }
        ImGui::EndMenu();
      }
      ImGui::EndMenu();
    }
    ImGui::Separator();
    if (ImGui::MenuItem("Quit")) window_->request_close();
    ImGui::EndMenu();
  }
  if (ImGui::BeginMenu("View")) {
    for (int i = 0; i < kNumWindowPanels; ++i)
      ImGui::MenuItem(panel_title(static_cast<PanelId>(i)), nullptr, &state_.settings.open[i]);
    ImGui::Separator();
    ImGui::MenuItem("Presentation mode", "F11", &state_.settings.presentation);
    ImGui::MenuItem("Light theme", nullptr, &state_.settings.light_theme);
    if (ImGui::BeginMenu("Layout")) {
      if (ImGui::MenuItem(classroom_layout_label(state_.settings.presentation)))
        state_.layout_request = "classroom";
      if (ImGui::MenuItem("Lesson: attention and the choice")) state_.layout_request = "lesson";
      if (ImGui::MenuItem("Memory: KV cache and cost")) state_.layout_request = "memory";
      if (ImGui::MenuItem("Why the KV cache: on vs off and the roofline"))
        state_.layout_request = "cost";
      if (ImGui::MenuItem("Inside the layers: attention and the logit lens"))
        state_.layout_request = "layers";
      if (ImGui::MenuItem("Compare strategies: lanes and the KV cache"))
        state_.layout_request = "compare";
      ImGui::Separator();
      for (int i = 0; i < kNumWindowPanels; ++i) {
        const PanelId id = static_cast<PanelId>(i);
        const std::string label = std::string(panel_title(id)) + " alone";
        if (ImGui::MenuItem(label.c_str())) state_.layout_request = panel_key(id);
      }
      ImGui::EndMenu();
    }
    ImGui::EndMenu();
  }
  draw_lessons_menu();
  if (ImGui::BeginMenu("Help")) {
    if (ImGui::MenuItem("Guide", nullptr, &state_.settings.panel_open(PanelId::kHelp))) {
    }
    ImGui::MenuItem("Dear ImGui demo (developers)", nullptr, &state_.show_demo);
    ImGui::EndMenu();
  }
  // Where the model is, always visible.
  if (snap_) {
    const std::string where = TransportPanel::where_text(*snap_);
    const float w = ImGui::CalcTextSize(where.c_str()).x;
    ImGui::SameLine(std::max(ImGui::GetCursorPosX() + 20, ImGui::GetWindowWidth() - w - 20));
    ImGui::TextDisabled("%s", where.c_str());
  }
  ImGui::EndMainMenuBar();
}

bool App::start_lesson(const std::filesystem::path& path) {
  try {
    lesson_panel().start(lesson::load_lesson(path, lesson_vocabulary()));
    state_.settings.panel_open(PanelId::kLesson) = true;
    return true;
  } catch (const Error& e) {
    state_.error_text = e.what();  // FILE:LINE: what is wrong; the running lesson stays
    return false;
  }
}

void App::draw_lessons_menu() {
  if (!ImGui::BeginMenu("Lessons")) return;
  // Read when the menu opens: a lesson file added or edited since shows at once.
  const std::filesystem::path dir = find_data("lessons");
  const auto files = lesson::list_lessons(dir);
  if (files.empty())
    ImGui::TextDisabled("no .lesson files in %s", dir.empty() ? "lessons/" : dir.string().c_str());
  for (const auto& f : files) {
    std::string label = f.stem().string();
    std::string problem;
    try {
      label = lesson::load_lesson(f, lesson_vocabulary()).title;
    } catch (const Error& e) {
      problem = e.what();
    }
    if (ImGui::MenuItem(label.c_str())) start_lesson(f);
    if (!problem.empty() && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", problem.c_str());
  }
  ImGui::Separator();
  if (ImGui::MenuItem("Open lesson file...")) open_lesson_popup_ = true;
  if (ImGui::MenuItem("Leave lesson", nullptr, false, lesson_panel().active()))
    lesson_panel().leave();
  ImGui::EndMenu();
}

void App::draw_open_lesson_popup() {
  if (path_popup("Open lesson", open_lesson_popup_, lesson_path_, "Open", [] {
        ImGui::TextWrapped("A lesson file (docs/lessons.md describes the format).");
      }))
    start_lesson(lesson_path_);
}

void App::draw_load_model_popup() {
  if (open_load_popup_ && load_path_.empty())
    load_path_ = options_.setup.model.empty() ? default_model_path().string()
                                              : options_.setup.model.string();
  if (path_popup("Load model", open_load_popup_, load_path_, "Load", [this] {
        ImGui::TextWrapped(
            "A Hugging Face model directory (GPT-2, Llama or Qwen2: config.json, "
            "model.safetensors, and tokenizer.json or vocab.json + merges.txt) or an llm.c "
            "gpt2_*.bin file. The current model stays until the new one has loaded.");
        // The bundled models, one click each: the GPT-2 model, its Llama-shaped
        // twin (same vocabulary and context) and the speculative draft.
        bool first = true;
        for (const auto& [name, family] : kBundledModels) {
          const std::filesystem::path dir = find_data(std::filesystem::path("models") / name);
          if (dir.empty()) continue;
          const std::string label = std::string(name) + " (" + family + ")";
          // Side by side while they fit the popup's width, else on the next line.
          const float width = ImGui::CalcTextSize(label.c_str()).x +
                              2 * ImGui::GetStyle().FramePadding.x +
                              ImGui::GetStyle().ItemSpacing.x;
          if (!first && ImGui::GetItemRectMax().x + width <=
                            ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x)
            ImGui::SameLine();
          first = false;
          if (ImGui::SmallButton(label.c_str())) load_path_ = dir.string();
        }
      }))
    load_model(load_path_);
}

void App::load_model(const std::filesystem::path& model) {
  ModelSetupOptions o = options_.setup;
  o.model = model;
  if (snap_) ctl_.prompt_on_load = snap_->prompt_text;
  ctl_.strategies_on_load = state_.strategies();
  precision_panel().set_model(o);
  ctl_.load_async(o);
}

void App::draw_export_popup() {
  const bool can_export = ctl_.worker() && ctl_.analysis();
  if (path_popup(
          "Export session", open_export_popup_, export_path_, "Export",
          [] {
            ImGui::TextWrapped(
                "One JSON file with every step (tokens, logits, attention, sampling, KV cache, "
                "cost) and what the analysis panels show (roofs, roofline, cache on vs off, logit "
                "lens).");
          },
          can_export))
    ctl_.analysis()->export_json(*ctl_.worker(), export_path_);
}

void App::draw_open_session_popup() {
  if (path_popup("Open session", open_session_popup_, session_path_, "Open", [] {
        ImGui::TextWrapped(
            "A session exported by File > Export session or tokenscope-cli --json. It is stepped "
            "through without the model; panels that recompute with the model say so. The "
            "current session stays if the file cannot be read.");
      })) {
    try {
      open_session(session_path_);
    } catch (const Error& e) {
      state_.error_text = e.what();  // FILE: reason; nothing changed
    }
  }
}

void App::save_requested_panel() {
  if (save_panel_ < 0) return;
  if (save_panel_wait_ > 0) {
    --save_panel_wait_;
    return;
  }
  const PanelId id = static_cast<PanelId>(save_panel_);
  save_panel_ = -1;
  const std::string path = std::string("tokenscope-") + panel_key(id) + "-step" +
                           std::to_string(std::max(0, view_.step)) + ".png";
  try {
    write_panel_screenshot(id, path);
    state_.notice = "wrote " + path;
  } catch (const Error& e) {
    state_.error_text = e.what();
  }
}

}  // namespace ts::app
