#pragma once
// The Help window (prefill, decode, KV cache, each strategy, keys) and the
// status bar (backend, device, model, errors).
#include <string>

#include "app/panels/panel.h"

namespace ts::app {

class HelpPanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text
};

struct StatusInfo {
  std::string renderer;  // GL renderer
  std::string notices;   // font or shader problems
  double fps = 0;
};

class StatusBar {
 public:
  void draw(PanelContext& ctx, const StatusInfo& info);
  static float height();
};

}  // namespace ts::app
