#pragma once
// Where the panels sit. Layouts are fractions of the work area (the window
// minus the menu bar and the status bar). "classroom" shows every panel;
// a panel's key ("attention", "kv", ...) shows that panel alone, filling the
// window. The user's own arrangement is saved in imgui.ini.
#include <array>
#include <string>
#include <vector>

#include <imgui.h>

#include "app/app_state.h"

namespace ts::app {

struct PanelRect {
  bool set = false;
  bool force = false;  // apply now even when the plan as a whole is not forced
  ImVec2 pos, size;
};

struct LayoutPlan {
  std::array<PanelRect, kNumPanels> rects{};
  bool force = false;  // true: apply now (ImGuiCond_Always); false: first use only
};

// Layout names --layout accepts.
std::vector<std::string> layout_names();
bool is_layout_name(const std::string& name);

// Computes the rectangles of `name` for a work area; opens the panels the
// layout shows and (for single-panel layouts) closes the others.
// `lesson_subject`: while a guided lesson runs, the panel its step is about
// (kStatusBar: no lesson; the prompt or the step control: the layout's own
// left panel). In a work area too short for four panels and the lesson bar
// (under kLessonShortLines lines of the font), a four-panel layout then shows
// three: the subject filling the left half, the step control and the
// prompt in the right one; the layout's other panels give it their room.
inline constexpr float kLessonShortLines = 32.0f;
LayoutPlan make_layout(const std::string& name, ImVec2 work_pos, ImVec2 work_size,
                       Settings* settings_to_update, PanelId lesson_subject = PanelId::kStatusBar);

}  // namespace ts::app
