#pragma once
// Score a text: the model's probability of each token of a given
// continuation (or two, side by side), computed on the session's worker by
// session/score (one prefill over prompt + continuation, every position's
// logits kept). Each token is a cell coloured by its probability through the
// colour map; hovering shows its rank, surprisal and the model's top 5 there.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "app/panels/panel.h"
#include "app/render/colormap.h"
#include "session/score.h"

namespace ts::app {

class ScorePanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text

  // Probabilities are coloured on a log scale from this floor (and below) to 1.
  static HeatRange color_range() { return {HeatScale::kLog, 1.0f, 1e-6f}; }

  // Sets the fields and queues the scoring on the worker (the Score button;
  // tests). An empty `b` scores `a` alone.
  void score(SessionWorker& worker, const std::string& prompt, const std::string& a,
             const std::string& b);

  // A token cell as the last frame drew it (tests).
  struct Cell {
    int column = 0;  // 0: the first continuation, 1: the second
    int index = 0;   // index into that ScoreResult's scored tokens
    int token = -1;
    double probability = 0;
    Rgb8 colour;           // its fill
    float x0, y0, x1, y1;  // its rectangle in window pixels
  };
  const std::vector<Cell>& cells() const { return cells_; }
  // The results shown (null until scored) and the last error, if any.
  std::shared_ptr<const ScoreResult> result(int column) const;
  std::string error() const;
  bool busy() const;

 private:
  struct Shared {
    mutable std::mutex mutex;
    std::shared_ptr<const ScoreResult> results[2];
    bool busy = false;
    std::string error;
  };
  void draw_column(PanelContext& ctx, int column, const ScoreResult& s, int highlight);

  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  const SessionWorker* worker_ = nullptr;  // the worker the results came from
  bool initialised_ = false;               // fields set from the session's prompt
  std::string prompt_, text_a_, text_b_;
  std::vector<Cell> cells_;
};

}  // namespace ts::app
