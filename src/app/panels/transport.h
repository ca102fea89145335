#pragma once
// Step control: where the model is paused and what the next action computes,
// Prefill / Step / Back / Run-Pause (with speed) / Reset, the step being
// viewed, and the session options.
#include <string>

#include "app/panels/panel.h"

namespace ts::app {

class TransportPanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text
  // "Paused after decode step 3", "Ready: the prompt waits for prefill", ...
  static std::string where_text(const SessionSnapshot& snap);
  // The "Next:" line: the session's next action, and for running lookahead
  // or prompt-lookup lanes that their step is one pass that may commit
  // several tokens.
  static std::string next_text(const SessionSnapshot& snap);
};

}  // namespace ts::app
