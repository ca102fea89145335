#pragma once
// Prompt & tokens: the prompt editor and the token strip (BPE pieces with
// their ids; prompt, generated and pending tokens told apart; a click picks
// the attention query).
#include <string>
#include <vector>

#include "app/panel.h"

namespace ts::app {

class PromptPanel {
 public:
  void draw(PanelContext& ctx);

 private:
  void draw_editor(PanelContext& ctx);
  void draw_strip(PanelContext& ctx);
  std::string preview_text_;  // the text preview_count_ was computed for
  int preview_count_ = -1;
  std::string preview_error_;
};

}  // namespace ts::app
