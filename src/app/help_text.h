#pragma once
// The built-in help: a short text per panel (its "?" button) and the topics
// of the Help window. Plain strings; no GL, no ImGui.
#include "app/app_state.h"

namespace ts::app {

const char* panel_help(PanelId id);

struct HelpTopic {
  const char* title;
  const char* text;
};
inline constexpr int kNumHelpTopics = 12;
const HelpTopic& help_topic(int index);

}  // namespace ts::app
