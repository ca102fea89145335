#include "app/layout.h"

namespace ts::app {

std::vector<std::string> layout_names() {
  std::vector<std::string> names = {"classroom", "lesson", "memory", "cost", "layers", "compare"};
  for (int i = 0; i < kNumWindowPanels; ++i) names.push_back(panel_key(static_cast<PanelId>(i)));
  return names;
}

bool is_layout_name(const std::string& name) {
  for (const std::string& n : layout_names())
    if (n == name) return true;
  return false;
}

LayoutPlan make_layout(const std::string& name, ImVec2 wp, ImVec2 ws, Settings* settings) {
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
  // Four panels each, for a projector in presentation mode: the tokens and
  // the step control on top, two panels side by side below, split at `split`.
  struct FourPanels {
    const char* name;
    PanelId left, right;
    float split;
  };
  static constexpr FourPanels kFour[] = {
      {"lesson", PanelId::kAttention, PanelId::kSampling, 0.42f},  // computes, then chooses
      {"memory", PanelId::kKvCache, PanelId::kTimeline, 0.5f},     // what a step stores, costs
      {"cost", PanelId::kCacheCompare, PanelId::kRoofline, 0.5f},  // why the cache; memory bound
      {"layers", PanelId::kAttention, PanelId::kLogitLens, 0.45f},
      {"compare", PanelId::kLanes, PanelId::kKvCache,
       0.66f}};  // strategies side by side  // inside the layers
  for (const FourPanels& f : kFour) {
    if (name != f.name) continue;
    // Presentation fonts are larger: the top row needs more of the height.
    const float top = settings && settings->presentation ? 0.3f : 0.25f;
    put(PanelId::kPrompt, 0, 0, 0.64f, top);
    put(PanelId::kTransport, 0.64f, 0, 1, top);
    put(f.left, 0, top, f.split, 1);
    put(f.right, f.split, top, 1, 1);
    show_only({PanelId::kPrompt, PanelId::kTransport, f.left, f.right});
    return plan;
  }
  PanelId single;
  if (name != "classroom" && parse_panel_key(name, single)) {
    put(single, 0, 0, 1, 1);
    if (settings)
      for (int i = 0; i < kNumWindowPanels; ++i) settings->open[i] = i == static_cast<int>(single);
    return plan;
  }
  // Classroom: what the class reads first (tokens, what happens next) on top;
  // attention as tall as possible on the left; logits and the choice in the
  // middle; the cache and the cost of each step below them.
  const float top = 0.22f, mid = 0.67f, left = 0.37f, split = 0.635f;
  put(PanelId::kPrompt, 0, 0, split, top);
  put(PanelId::kTransport, split, 0, 1, top);
  put(PanelId::kAttention, 0, top, left, 1);
  put(PanelId::kLogits, left, top, split, mid);
  put(PanelId::kSampling, split, top, 1, mid);
  put(PanelId::kKvCache, left, mid, split, 1);
  put(PanelId::kTimeline, split, mid, 1, 1);
  put(PanelId::kHelp, 0.25f, 0.1f, 0.75f, 0.9f);
  // The analysis panels float over the middle when opened from the View menu.
  put(PanelId::kRoofline, 0.2f, 0.15f, 0.8f, 0.85f);
  put(PanelId::kLogitLens, 0.3f, 0.2f, 0.8f, 0.8f);
  put(PanelId::kCacheCompare, 0.2f, 0.15f, 0.8f, 0.85f);
  put(PanelId::kLanes, 0.15f, 0.15f, 0.85f, 0.85f);
  if (settings)
    for (int i = 0; i < kNumWindowPanels; ++i) {
      const PanelId id = static_cast<PanelId>(i);
      settings->open[i] = id != PanelId::kHelp && id != PanelId::kRoofline &&
                          id != PanelId::kLogitLens && id != PanelId::kCacheCompare &&
                          id != PanelId::kLanes;
    }
  return plan;
}

}  // namespace ts::app
