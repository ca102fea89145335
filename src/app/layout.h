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

// The View menu's name for the classroom layout: every panel, or in
// presentation mode the four panels its projector arrangement shows.
const char* classroom_layout_label(bool presentation);

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

// Keeps the arrangement when the work area changes size (a resized window,
// a projector, another launch): each panel keeps its share of the work area
// (fractions, not rounded pixels), so shrinking then growing gives back the
// same arrangement. Also keeps the arrangement from before presentation mode
// was switched on, to give back when it is switched off.
class LayoutFollower {
 public:
  // A layout was just applied as `plan` to the work area at `work_pos` of
  // `work_size`: each placed panel's share is its fraction of that area.
  // `sized_for_area`: the plan was computed for this size (make_layout's
  // line-based fractions), so if it does not fit, it is computed again at
  // the next size rather than scaled.
  void laid_out(const LayoutPlan& plan, ImVec2 work_pos, ImVec2 work_size,
                bool sized_for_area = true);
  enum class Follow {
    kWait,         // panels not created yet: try again next frame
    kDone,         // the panels are where they belong (rescaled into the plan if needed)
    kLayOutAgain,  // the last layout did not fit its work area: apply it again at this size
  };
  // Rescales the open panels into `plan` when the work area changed size
  // since their positions were taken (settings.work_w, work_h).
  Follow follow(LayoutPlan& plan, ImVec2 work_pos, ImVec2 work_size, const Settings& settings);
  // Keeps each panel's share, which panels are open and `layout`.
  void keep(const Settings& settings, const std::string& layout);
  bool has_kept() const { return kept_.valid; }
  void drop_kept() { kept_.valid = false; }
  // Gives the kept arrangement back (into `plan` and settings' open panels
  // and work area) and drops it; returns the layout it was kept with.
  std::string restore(LayoutPlan& plan, ImVec2 work_pos, ImVec2 work_size, Settings& settings);

 private:
  ImVec2 arranged_pos_{0, 0};  // the work area's corner the panels' positions belong to
  bool arranged_ = false;
  // Each panel's share of the work area (fractions; set: known) and where it
  // was last placed from it, in pixels.
  std::array<PanelRect, kNumWindowPanels> shares_{}, placed_{};
  // Placed last frame: ImGui's box for it is taken as the placement.
  std::array<bool, kNumWindowPanels> settling_{};
  // Whether the placements settling come from a layout, and whether one of
  // them did not fit (ImGui made the panel larger than a small work area).
  bool layout_settling_ = false;
  bool layout_squeezed_ = false;
  struct Kept {
    bool valid = false;
    std::array<PanelRect, kNumWindowPanels> shares{};
    std::array<bool, kNumWindowPanels> open{};
    std::string layout;
  };
  Kept kept_;
};

}  // namespace ts::app
