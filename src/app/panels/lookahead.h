#pragma once
// Lookahead decoding and prompt lookup decoding: the viewed step's pass of
// such a lane, as the session recorded it (LookaheadPass). For lookahead the
// 2D Jacobi window as a grid (cells the last pass changed highlighted) with
// the next row the model guessed, the n-gram pool before the pass and the
// n-grams it added; for both kinds the candidates verified, their accepted
// prefix marked, the model's own token after it, the tokens committed, the
// rows fed in the one pass and its time, a stepper through the fed rows
// (each row's token, position, branch and mask row), and the lane's tokens
// per pass.
#include <string>
#include <vector>

#include "app/panels/panel.h"

namespace ts::app {

// The lane's passes up to and including a history step.
struct LookaheadTotals {
  int passes = 0;     // forward passes (one per step)
  int committed = 0;  // tokens they added to the lane
  int fed = 0;        // rows they fed
  double tokens_per_pass() const {
    return passes > 0 ? static_cast<double>(committed) / passes : 0;
  }
};
LookaheadTotals lookahead_totals(const SessionSnapshot& snap, int lane, int up_to_step);

// Which part of the pass a fed row belongs to (sampling/lookahead.h's layout).
struct LookaheadRowBranch {
  enum Kind { kInput, kCandidate, kWindow } kind = kInput;
  int candidate = -1, index = -1;  // candidate g's i-th token
  int row = -1, col = -1;          // window cell (r, c)
  std::string text() const;        // "input x", "candidate 2 token 1", "window row 1 col 3"
};
LookaheadRowBranch lookahead_row_branch(const LookaheadPassLayout& layout, int row);
// The fed rows row `row` may attend to (its mask row), in order.
std::vector<int> lookahead_row_sees(const LookaheadPassLayout& layout, int row);

// What the panel shows, built from the record each frame (tests read it).
struct LookaheadPanelView {
  bool has_pass = false;
  std::string message;  // the one line shown instead when there is no pass
  bool prompt_lookup = false;
  // Lookahead: the window before the pass, row-major, and its next row.
  int window_rows = 0, window_cols = 0;
  std::vector<std::string> window_cells;
  std::vector<uint8_t> window_changed;
  std::vector<std::string> window_next;  // the model's guess after each last-row cell
  int pool_size = 0, new_ngrams = 0;
  struct Candidate {
    std::vector<int> tokens;
    std::vector<std::string> pieces;
    int agree = 0;          // leading tokens equal to the committed ones
    bool accepted = false;  // the verdict's candidate
  };
  std::vector<Candidate> candidates;
  int accepted_candidate = -1;  // verdict.candidate
  int matched = 0;              // candidate tokens accepted
  int model_token = -1;         // the model's own token after them (the last committed)
  std::string model_piece;
  std::vector<std::string> committed;  // pieces of the tokens the pass committed
  bool sampled = false;
  int fed = 0;
  double seconds = 0;
  LookaheadTotals totals;
  int clipped_cells = 0;  // table cells whose text ran past their column last frame
  // The row stepper: one fed row of the pass, clamped to the rows it has.
  int row = 0;
  int row_token = -1;
  std::string row_piece;
  int row_position = 0;  // its position (the wpe row it adds)
  LookaheadRowBranch row_branch;
  std::vector<int> row_sees;  // the fed rows its mask row lets it attend to
};

class LookaheadPanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text
  const LookaheadPanelView& view() const { return view_; }
  // The row stepper's row (clamped to the viewed pass's rows when drawn).
  void select_row(int row) { row_ = row; }

 private:
  void build_view(const PanelContext& ctx);
  void draw_pass(PanelContext& ctx);

  void draw_row_stepper(PanelContext& ctx);

  LookaheadPanelView view_;
  int row_ = 0;
};

}  // namespace ts::app
