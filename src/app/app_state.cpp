#include "app/app_state.h"

namespace ts::app {

namespace {

struct Row {
  const char* key;
  const char* title;
  Classroom classroom;
  bool open;
};
constexpr Row kRows[] = {
#define TS_PANEL_ROW(id, key, title, cls, classroom, open) {key, title, classroom, open},
    TS_PANEL_LIST(TS_PANEL_ROW)
#undef TS_PANEL_ROW
};
static_assert(sizeof(kRows) / sizeof(kRows[0]) == kNumWindowPanels);

}  // namespace

const char* panel_title(PanelId id) {
  const int i = static_cast<int>(id);
  if (i >= 0 && i < kNumWindowPanels) return kRows[i].title;
  return id == PanelId::kStatusBar ? "##status" : "?";
}

const char* panel_key(PanelId id) {
  const int i = static_cast<int>(id);
  if (i >= 0 && i < kNumWindowPanels) return kRows[i].key;
  return id == PanelId::kStatusBar ? "status" : "?";
}

Classroom panel_classroom_rect(PanelId id) {
  const int i = static_cast<int>(id);
  return i >= 0 && i < kNumWindowPanels ? kRows[i].classroom : Classroom(0, 0, 1, 1);
}

bool panel_open_in_classroom(PanelId id) {
  const int i = static_cast<int>(id);
  return i >= 0 && i < kNumWindowPanels && kRows[i].open;
}

std::array<bool, kNumWindowPanels> Settings::classroom_open() {
  std::array<bool, kNumWindowPanels> open{};
  for (int i = 0; i < kNumWindowPanels; ++i) open[i] = kRows[i].open;
  return open;
}

bool parse_panel_key(const std::string& key, PanelId& out) {
  for (int i = 0; i < kNumPanels; ++i)
    if (key == panel_key(static_cast<PanelId>(i))) {
      out = static_cast<PanelId>(i);
      return true;
    }
  return false;
}

}  // namespace ts::app
