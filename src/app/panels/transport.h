#pragma once
// Step control: where the model is paused and what the next action computes,
// Prefill / Step / Back / Run-Pause (with speed) / Reset, the step being
// viewed, and the session options.
#include "app/panels/panel.h"

namespace ts::app {

class TransportPanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text
  // "Paused after decode step 3", "Ready: the prompt waits for prefill", ...
  static std::string where_text(const SessionSnapshot& snap);
};

}  // namespace ts::app
