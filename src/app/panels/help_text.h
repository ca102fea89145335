#pragma once
// The topics of the Help window (each panel's own short text is its
// kHelp). Plain strings; no GL, no ImGui.

namespace ts::app {

struct HelpTopic {
  const char* title;
  const char* text;
};
inline constexpr int kNumHelpTopics = 13;
const HelpTopic& help_topic(int index);

}  // namespace ts::app
