#pragma once
// KV cache on vs off: runs the prompt N steps both ways on the worker (real
// runs, see session/cache_comparison.h) and shows per-step and cumulative
// wall time, FLOPs and bytes side by side, with the proof that the chosen
// tokens and logits are the same.
#include "app/panels/panel.h"

namespace ts::app {

class CacheComparePanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text
  // The count in the "Generate N tokens" field (tests).
  int new_tokens() const { return new_tokens_; }
  // The step whose wall time turned the totals round, as last drawn; -1: none.
  int busy_step() const { return busy_step_; }

 private:
  int new_tokens_ = 64;
  const void* shown_ = nullptr;  // the comparison the field was last set from
  bool cumulative_ = true;       // cumulative totals instead of per-step values
  int busy_step_ = -1;
};

}  // namespace ts::app
