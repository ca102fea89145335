#pragma once
// Guess the next token, for a class or one student. "Ask" computes the next
// step's logits on the worker (a scratch prefill of lane 0's tokens; the
// session does not move) and shows the shortlist (session/quiz) while the
// Logits and Choosing panels are hidden; guesses are tallied (a click on an
// option or a typed word adds one vote); "Reveal" runs the step and scores
// every guess under that step's own logits against the token it chose.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "app/panels/panel.h"
#include "session/quiz.h"

namespace ts::app {

class QuizPanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text

  // The buttons, for tests too: Ask and Reveal act at the next frame.
  void request_ask() { ask_requested_ = true; }
  void request_reveal() { reveal_requested_ = true; }
  void vote_token(const SessionSnapshot& snap, int token);  // one vote for a token
  void vote_word(const SessionSnapshot& snap, const std::string& word);

  const std::vector<QuizOption>& shortlist() const { return shortlist_; }
  struct Result {
    QuizGuess guess;
    int votes = 0;
  };
  const std::vector<Result>& results() const { return results_; }  // after a reveal
  int chosen_token() const { return chosen_; }                     // after a reveal
  const QuizTally& tally() const { return tally_; }
  // The text the class is guessing the continuation of (the prompt, or the
  // prompt and what lane 0 generated), as decoded when the question was asked.
  const std::string& context() const { return context_; }
  // What the last frame drew of it in the panel (empty when it drew none;
  // starts with "\u2026 " when only its end fits) and where the "?" that
  // marks the guess position was drawn (after the reveal: the pill with the
  // chosen token), in screen pixels (w = 0: not drawn).
  const std::string& shown_context() const { return shown_context_; }
  PanelBox guess_marker() const { return marker_; }
  bool asking() const { return phase_ == Phase::kAsking; }
  bool revealed() const { return phase_ == Phase::kRevealed; }
  std::string error() const { return error_; }

 private:
  enum class Phase { kIdle, kComputing, kAsking, kRevealing, kRevealed };
  struct Pending {  // filled on the worker
    std::mutex mutex;
    bool done = false;
    std::vector<float> logits;
    std::string context;  // the tokens decoded
    std::string error;
  };
  struct Vote {
    int token;
    std::string typed;  // empty for a pick from the shortlist
    int votes;
  };
  void ask(PanelContext& ctx);
  void reveal(PanelContext& ctx);
  void poll(PanelContext& ctx);
  void hide_panels(PanelContext& ctx, bool hide);
  void draw_context(PanelContext& ctx, const std::string& mark_text);

  Phase phase_ = Phase::kIdle;
  std::shared_ptr<Pending> pending_;
  std::vector<QuizOption> shortlist_;
  std::vector<Vote> votes_;
  std::vector<Result> results_;
  int chosen_ = -1;
  size_t steps_before_ = 0;  // history size when the reveal was asked for
  QuizTally tally_;
  std::string word_, error_;
  std::string context_, shown_context_;
  PanelBox marker_;
  bool ask_requested_ = false, reveal_requested_ = false;
  int focus_frames_ = 0;  // after a reveal: stay above the panels that come back
  bool hiding_ = false;   // the Logits and Choosing panels are hidden by the quiz
  bool hid_logits_ = false, hid_sampling_ = false;  // what hide_panels closed
};

}  // namespace ts::app
