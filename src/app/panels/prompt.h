#pragma once
// Prompt & tokens: the prompt editor and the token strip (BPE pieces with
// their ids; prompt, generated and pending tokens told apart; a click picks
// the attention query).
#include <string>
#include <vector>

#include "app/panels/panel.h"

namespace ts::app {

class PromptPanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text
  // Empty, or why the typed prompt does not fit the model's context and
  // where the context ends in it (tests).
  const std::string& over_context() const { return over_context_; }
  // The token count shown beside the field (-1: none shown).
  int token_count() const { return preview_count_; }
  // The prompt field is read-only while its text has characters beyond
  // U+FFFF (editing would replace them); these say how many, and which
  // characters the font cannot draw (tests).
  int beyond_bmp() const { return beyond_bmp_; }
  const std::string& no_glyph() const { return no_glyph_; }

 private:
  void draw_editor(PanelContext& ctx);
  void draw_strip(PanelContext& ctx);
  std::string preview_text_;                           // the text preview_count_ was computed for
  const SessionSnapshot* preview_snapshot_ = nullptr;  // ... in this snapshot
  int preview_count_ = -1;
  std::string preview_error_;
  std::string over_context_;
  std::string scanned_text_;  // the text beyond_bmp_ and no_glyph_ describe
  int beyond_bmp_ = 0;
  std::string no_glyph_;  // code points, e.g. U+1F600 U+65E5
};

}  // namespace ts::app
