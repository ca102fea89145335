#pragma once
// --compare: the lanes side by side, one column each, one row per step, and
// a summary table once generation ends.
#include <iosfwd>

#include "session/session.h"

namespace ts::cli {

class ComparePrinter {
 public:
  explicit ComparePrinter(const Session& session) : session_(session) {}

  // One row: per lane the token its step chose and the model's probability
  // of it; the first step where the lanes choose differently is marked.
  void print_row(std::ostream& out, const StepTrace& step);
  // Log-probability, perplexity, distinct n-grams, speed and stop reason per lane.
  void print_summary(std::ostream& out) const;

 private:
  void print_header(std::ostream& out) const;

  const Session& session_;
  bool header_shown_ = false;
  bool diverged_ = false;
  bool legend_shown_ = false;
  bool contrastive_legend_shown_ = false;
  bool dola_legend_shown_ = false;
};

}  // namespace ts::cli
