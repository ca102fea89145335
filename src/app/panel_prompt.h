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
  // Empty, or why the typed prompt does not fit the model's context and
  // where the context ends in it (tests).
  const std::string& over_context() const { return over_context_; }

 private:
  void draw_editor(PanelContext& ctx);
  void draw_strip(PanelContext& ctx);
  std::string preview_text_;  // the text preview_count_ was computed for
  int preview_count_ = -1;
  std::string preview_error_;
  std::string over_context_;
};

}  // namespace ts::app
