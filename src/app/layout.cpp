#include "app/layout.h"

#include <algorithm>
#include <cmath>

#include <imgui_internal.h>

#include "app/render/window.h"

namespace ts::app {

std::vector<std::string> layout_names() {
  std::vector<std::string> names = {"classroom", "lesson",  "memory",      "cost",
                                    "layers",    "compare", "speculative", "formats"};
  for (int i = 0; i < kNumWindowPanels; ++i) names.push_back(panel_key(static_cast<PanelId>(i)));
  return names;
}

bool is_layout_name(const std::string& name) {
  for (const std::string& n : layout_names())
    if (n == name) return true;
  return false;
}

const char* classroom_layout_label(bool presentation) {
  // The projector's classroom is the "classroom" row of make_layout's table:
  // its large fonts leave room for four panels, the rest stay in the View menu.
  return presentation ? "Classroom (prompt, step control, attention, logits)"
                      : "Classroom (every panel)";
}

LayoutPlan make_layout(const std::string& name, ImVec2 wp, ImVec2 ws, Settings* settings,
                       PanelId lesson_subject) {
  LayoutPlan plan;
  auto put = [&](PanelId id, float x0, float y0, float x1, float y1) {
    PanelRect& r = plan.rects[static_cast<int>(id)];
    r.set = true;
    r.pos = ImVec2(wp.x + ws.x * x0, wp.y + ws.y * y0);
    r.size = ImVec2(ws.x * (x1 - x0), ws.y * (y1 - y0));
  };
  auto show_only = [&](std::initializer_list<PanelId> ids) {
    if (!settings) return;
    for (int i = 0; i < kNumWindowPanels; ++i) settings->open[i] = false;
    for (PanelId id : ids) settings->panel_open(id) = true;
  };
  // Four panels each: the tokens and the step control on top, two panels
  // side by side below, split at `split`.
  struct FourPanels {
    const char* name;
    PanelId left, right;
    float split;
  };
  static constexpr FourPanels kFour[] = {
      {"lesson", PanelId::kAttention, PanelId::kSampling, 0.42f},   // computes, then chooses
      {"memory", PanelId::kKvCache, PanelId::kTimeline, 0.5f},      // what a step stores, costs
      {"cost", PanelId::kCacheCompare, PanelId::kRoofline, 0.5f},   // why the cache; memory bound
      {"layers", PanelId::kAttention, PanelId::kLogitLens, 0.45f},  // inside the layers
      {"compare", PanelId::kLanes, PanelId::kKvCache, 0.66f},       // strategies side by side
      {"speculative", PanelId::kSpeculative, PanelId::kTimeline, 0.62f},  // draft, verify, cost
      {"formats", PanelId::kPrecision, PanelId::kLogits,
       0.66f},  // two weight formats or two models compared
      // Presentation mode only: the classroom's seven panels do not fit a
      // projector's large fonts, so it shows the three a teacher projects
      // first (the rest stay in the View menu).
      {"classroom", PanelId::kAttention, PanelId::kLogits, 0.6f}};
  const bool presentation = settings && settings->presentation;
  // The font's size in pixels: the projector font for this window's height
  // (smaller in a short window; without an ImGui context, the full projector
  // size), or the normal one.
  const float line = !presentation
                         ? Window::kBaseFontSize
                         : Window::kBaseFontSize *
                               (ImGui::GetCurrentContext()
                                    ? Window::presentation_scale_for(ImGui::GetIO().DisplaySize.y)
                                    : Window::kPresentationScale);
  // The right column is at least 25 lines wide (the step control's buttons
  // on one row), at most half the window.
  const float col = 1 - std::clamp(25.0f * line / ws.x, 0.4f, 0.5f);
  // A lesson step's own panel (not the prompt or the step control, which
  // every lesson layout shows): it is shown whatever the layout.
  const bool subject_panel =
      lesson_subject != PanelId::kStatusBar && lesson_subject != PanelId::kPrompt &&
      lesson_subject != PanelId::kTransport && lesson_subject != PanelId::kLesson;
  for (const FourPanels& f : kFour) {
    if (name != f.name) continue;
    if (name == "classroom" && !presentation) break;
    // A lesson step about a panel the layout does not show: it takes the
    // right panel's place (the left one is the lesson's main panel).
    const PanelId right = subject_panel && lesson_subject != f.left ? lesson_subject : f.right;
    // With a lesson bar in a short window: the panel the lesson step is
    // about fills the left half (the lesson's text tells the class where
    // to look, so it gets the room); the step control keeps its rows, down
    // to "Max new tokens", at the top of the right column and the prompt
    // takes the rest of it. The other panels stay in the View menu.
    if (lesson_subject != PanelId::kStatusBar && ws.y < kLessonShortLines * line) {
      PanelId subject = lesson_subject;
      if (subject == PanelId::kPrompt || subject == PanelId::kTransport ||
          subject == PanelId::kLesson)
        subject = f.left;
      // Half the width each: the prompt's tokens need the right column's
      // width. At 30 lines wide the step control's rows wrap less ("Next:"
      // on one line, Run beside the buttons); several lanes take a line more.
      const float step_lines =
          (ws.x * 0.5f >= 30 * line ? 10.5f : 12.5f) + (f.left == PanelId::kLanes ? 1.0f : 0.0f);
      const float step_h = std::min(0.6f, step_lines * line / ws.y);
      put(subject, 0, 0, 0.5f, 1);
      put(PanelId::kTransport, 0.5f, 0, 1, step_h);
      put(PanelId::kPrompt, 0.5f, step_h, 1, 1);
      show_only({PanelId::kPrompt, PanelId::kTransport, subject});
      return plan;
    }
    if (presentation) {
      // Large fonts on a projector: two columns, each with its own top. The
      // prompt (left) needs a few lines; the step control (right) needs all
      // of its rows, down to "Max new tokens", so its column's top is
      // taller. Heights are in lines of the large font, at most a share of
      // the work area, so the panels below keep room to read.
      const float prompt_h = std::min(0.4f, 10.0f * line / ws.y);
      // With several lanes (compare) "Next:" takes a third line.
      const float step_lines = f.left == PanelId::kLanes ? 13.5f : 12.5f;
      const float step_h = std::min(0.55f, step_lines * line / ws.y);
      put(PanelId::kPrompt, 0, 0, col, prompt_h);
      put(f.left, 0, prompt_h, col, 1);
      put(PanelId::kTransport, col, 0, 1, step_h);
      put(right, col, step_h, 1, 1);
    } else {
      put(PanelId::kPrompt, 0, 0, 0.64f, 0.25f);
      put(PanelId::kTransport, 0.64f, 0, 1, 0.25f);
      put(f.left, 0, 0.25f, f.split, 1);
      put(right, f.split, 0.25f, 1, 1);
    }
    show_only({PanelId::kPrompt, PanelId::kTransport, f.left, right});
    return plan;
  }
  PanelId single;
  if (name != "classroom" && parse_panel_key(name, single)) {
    put(single, 0, 0, 1, 1);
    if (settings) {
      for (int i = 0; i < kNumWindowPanels; ++i) settings->open[i] = i == static_cast<int>(single);
      if (subject_panel) settings->panel_open(lesson_subject) = true;
    }
    return plan;
  }
  // Classroom: every panel where its row in panel_list.h puts it (what the
  // class reads first on top, attention tall on the left, logits and the
  // choice in the middle, the cache and the cost below; the analysis panels
  // float over the middle when opened from the View menu).
  // In a narrow window (a 1024 x 768 projector) the step control's buttons
  // and "Next:" wrap onto more lines: the top row grows to keep every row of
  // it in view (down to "Max new tokens"), and the rows below share the rest.
  const float top = panel_classroom_rect(PanelId::kTransport).y1;
  const float step_w = ws.x * (1 - panel_classroom_rect(PanelId::kTransport).x0);
  const float row = ImGui::GetCurrentContext() ? ImGui::GetTextLineHeightWithSpacing() : 22.0f;
  const float new_top = step_w < 26 * row ? std::clamp(10.5f * row / ws.y, top, 0.38f) : top;
  auto y_of = [&](float y) {
    return y <= top ? y * new_top / top : new_top + (y - top) * (1 - new_top) / (1 - top);
  };
  for (int i = 0; i < kNumWindowPanels; ++i) {
    const PanelId id = static_cast<PanelId>(i);
    const Classroom r = panel_classroom_rect(id);
    put(id, r.x0, y_of(r.y0), r.x1, y_of(r.y1));
  }
  if (settings) {
    settings->open = Settings::classroom_open();
    if (subject_panel) settings->panel_open(lesson_subject) = true;
  }
  return plan;
}

namespace {

// A panel's rectangle in pixels from its share of the work area, inside the
// work area whatever the rounding; a panel not drawn this frame (closed) is
// moved itself, so it is in place when it opens again.
PanelRect place_share(const PanelRect& share, ImVec2 work_pos, ImVec2 work_size, PanelId id,
                      bool drawn) {
  PanelRect r;
  r.set = true;
  r.force = true;
  r.size = ImVec2(std::min(share.size.x * work_size.x, work_size.x),
                  std::min(share.size.y * work_size.y, work_size.y));
  r.pos = ImVec2(work_pos.x + share.pos.x * work_size.x, work_pos.y + share.pos.y * work_size.y);
  r.pos.x = std::clamp(r.pos.x, work_pos.x, work_pos.x + work_size.x - r.size.x);
  r.pos.y = std::clamp(r.pos.y, work_pos.y, work_pos.y + work_size.y - r.size.y);
  if (!drawn) {
    const char* title = panel_title(id);
    ImGui::SetWindowPos(title, r.pos);
    ImGui::SetWindowSize(title, r.size);
  }
  return r;
}

// A box's share of a work area of `size` whose corner is `corner`.
PanelRect share_of(ImVec2 pos, ImVec2 box, ImVec2 corner, ImVec2 size) {
  PanelRect r;
  r.set = true;
  r.pos = ImVec2((pos.x - corner.x) / size.x, (pos.y - corner.y) / size.y);
  r.size = ImVec2(box.x / size.x, box.y / size.y);
  return r;
}

PanelRect share_of(const ImGuiWindow& w, ImVec2 corner, ImVec2 size) {
  return share_of(w.Pos, w.SizeFull, corner, size);
}

}  // namespace

void LayoutFollower::laid_out(const LayoutPlan& plan, ImVec2 work_pos, ImVec2 work_size,
                              bool sized_for_area) {
  arranged_pos_ = work_pos;
  arranged_ = true;
  shares_ = {};
  settling_ = {};
  // Applied with no room at all (a minimised window): applied again at the
  // next real size.
  layout_squeezed_ = work_size.x <= 0 || work_size.y <= 0;
  layout_settling_ = sized_for_area && !layout_squeezed_;
  if (layout_squeezed_) return;
  for (int i = 0; i < kNumWindowPanels; ++i) {
    const PanelRect& r = plan.rects[i];
    if (!r.set || !(plan.force || r.force)) continue;  // a first-use-only rect may not apply
    shares_[i] = share_of(r.pos, r.size, work_pos, work_size);
    placed_[i] = r;
    settling_[i] = true;
  }
}

LayoutFollower::Follow LayoutFollower::follow(LayoutPlan& plan, ImVec2 work_pos, ImVec2 work_size,
                                              const Settings& settings) {
  if (!arranged_) {  // saved positions: taken with the same menu bar
    arranged_pos_ = work_pos;
    arranged_ = true;
  }
  // A window squeezed until no work area is left (the menu and status bars
  // fill it, or it is minimised): nothing to place panels in, and no size to
  // scale from later, so the last real one is kept.
  if (work_size.x <= 0 || work_size.y <= 0) return Follow::kWait;
  const ImVec2 old_size(settings.work_w, settings.work_h);
  const bool same = old_size.x == work_size.x && old_size.y == work_size.y &&
                    arranged_pos_.x == work_pos.x && arranged_pos_.y == work_pos.y;
  if (!same && layout_squeezed_) return Follow::kLayOutAgain;
  if (old_size.x <= 0 || old_size.y <= 0) {
    arranged_pos_ = work_pos;
    return Follow::kDone;  // nothing known to scale from (a first launch places every panel)
  }
  std::array<ImGuiWindow*, kNumWindowPanels> windows{};
  for (int i = 0; i < kNumWindowPanels; ++i)
    windows[i] = ImGui::FindWindowByName(panel_title(static_cast<PanelId>(i)));
  auto near = [](ImVec2 a, ImVec2 b) {
    return std::abs(a.x - b.x) <= 1.5f && std::abs(a.y - b.y) <= 1.5f;
  };
  if (same) {
    // A panel the user moved or resized since it was last placed takes its
    // share of the work area from where it is now. The first frame after a
    // placement only notes where ImGui put the panel: in a work area smaller
    // than a panel's title bar and borders ImGui makes it larger than asked,
    // and that is not the user's doing (taking the squeezed box as the share
    // would keep the panels tiny when the window grows again). A layout's
    // panel that settled elsewhere did not fit: the layout is applied again
    // when the work area next changes size.
    for (int i = 0; i < kNumWindowPanels; ++i) {
      if (!windows[i] || !shares_[i].set) continue;
      const bool moved =
          !(near(windows[i]->Pos, placed_[i].pos) && near(windows[i]->SizeFull, placed_[i].size));
      if (settling_[i]) {
        // A layout's panel that fits takes its share from ImGui's box (whole
        // pixels, as a panel the user placed would).
        if (layout_settling_ && !moved) shares_[i] = share_of(*windows[i], work_pos, work_size);
        if (moved && layout_settling_ && settings.open[i]) layout_squeezed_ = true;
        placed_[i].pos = windows[i]->Pos;
        placed_[i].size = windows[i]->SizeFull;
        settling_[i] = false;
      } else if (moved) {
        shares_[i].set = false;
        layout_squeezed_ = false;  // the user's own arrangement now
      }
    }
    layout_settling_ = false;
    return Follow::kDone;
  }
  // The window (or the menu bar, in presentation mode) changed size: every
  // panel keeps its share of the work area, so none is left outside the
  // window or on top of another, and shrinking then growing gives back the
  // same arrangement (the shares are kept, not re-read from rounded pixels).
  // Panels ImGui has not created yet (the first frame after launch) are
  // scaled one frame later; closed ones that were shown before move too.
  for (int i = 0; i < kNumWindowPanels; ++i)
    if (!windows[i] && settings.open[i]) return Follow::kWait;
  for (int i = 0; i < kNumWindowPanels; ++i) {
    if (!windows[i]) continue;
    if (!shares_[i].set) shares_[i] = share_of(*windows[i], arranged_pos_, old_size);
    plan.rects[i] =
        place_share(shares_[i], work_pos, work_size, static_cast<PanelId>(i), settings.open[i]);
    placed_[i] = plan.rects[i];
    settling_[i] = true;
  }
  layout_settling_ = false;
  arranged_pos_ = work_pos;
  return Follow::kDone;
}

void LayoutFollower::keep(const Settings& settings, const std::string& layout) {
  kept_ = Kept{};
  const ImVec2 size(settings.work_w, settings.work_h);
  if (size.x <= 0 || size.y <= 0) return;
  // A panel that follows the window keeps its share (its box may be one
  // ImGui enlarged in a squeezed window); one the user placed, where it is.
  for (int i = 0; i < kNumWindowPanels; ++i)
    if (shares_[i].set)
      kept_.shares[i] = shares_[i];
    else if (const ImGuiWindow* win = ImGui::FindWindowByName(panel_title(static_cast<PanelId>(i))))
      kept_.shares[i] = share_of(*win, arranged_pos_, size);
  kept_.open = settings.open;
  kept_.layout = layout;
  kept_.valid = true;
}

std::string LayoutFollower::restore(LayoutPlan& plan, ImVec2 work_pos, ImVec2 work_size,
                                    Settings& settings) {
  plan = make_layout("classroom", work_pos, work_size, nullptr);
  for (int i = 0; i < kNumWindowPanels; ++i)
    if (kept_.shares[i].set)
      plan.rects[i] =
          place_share(kept_.shares[i], work_pos, work_size, static_cast<PanelId>(i), kept_.open[i]);
  settings.open = kept_.open;
  kept_.valid = false;
  laid_out(plan, work_pos, work_size, false);  // the kept shares fit any size
  settings.work_w = work_size.x;
  settings.work_h = work_size.y;
  return kept_.layout;
}

}  // namespace ts::app
