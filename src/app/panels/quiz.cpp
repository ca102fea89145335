#include "app/panels/quiz.h"

#include <imgui_stdlib.h>

#include <algorithm>
#include <cstdio>
#include <utility>

#include "session/session_worker.h"
#include "util/error.h"

namespace ts::app {

const char* const QuizPanel::kHelp =
    "Guess the next token before the model shows it.\n\nAsk computes the model's next "
    "prediction without stepping, shows the text so far with a ? where the next token goes, "
    "and lists 8 tokens: its top 5 mixed with 3 distractors "
    "from ranks 6-50, shuffled. The Logits and Choosing panels are hidden until the reveal. "
    "Each click on a token, or each typed word, adds one guess, so a teacher can tally a "
    "class. A word typed after a word is scored with its leading space (\"cold\" as "
    "\" cold\", as GPT-2 writes it); a word of several tokens counts as its first.\n\nReveal "
    "runs the step and scores every guess under that step's logits: probability, rank and "
    "surprisal in bits, and whether it was the token chosen. The running score is the mean "
    "log-probability of all guesses and how many were the chosen token (with sampling, how "
    "many of those when the model's own top-1 was not chosen).";

namespace {

// The lines a class reads from the back of the room: one font size up, and
// in presentation mode (where every font is already the projector's and there
// is no larger one) 1.4x that.
void push_large(PanelContext& ctx) {
  if (ctx.heading_font)
    ImGui::PushFont(ctx.heading_font);
  else
    ImGui::SetWindowFontScale(1.4f);
}

void pop_large(PanelContext& ctx) {
  if (ctx.heading_font)
    ImGui::PopFont();
  else
    ImGui::SetWindowFontScale(1.0f);
}

std::string prob_text(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, p >= 0.01 ? "%.4f" : "%.2e", p);
  return buf;
}

}  // namespace

void QuizPanel::hide_panels(PanelContext& ctx, bool hide) {
  if (hide == hiding_) return;  // "Ask again" while asking keeps what was saved
  hiding_ = hide;
  bool& logits = ctx.state.settings.panel_open(PanelId::kLogits);
  bool& sampling = ctx.state.settings.panel_open(PanelId::kSampling);
  if (hide) {
    hid_logits_ = logits;
    hid_sampling_ = sampling;
    logits = sampling = false;
  } else {
    logits = logits || hid_logits_;
    sampling = sampling || hid_sampling_;
  }
}

void QuizPanel::ask(PanelContext& ctx) {
  SessionWorker* worker = ctx.ctl.worker();
  if (!worker || !ctx.snap) return;
  if (!ctx.snap->lanes.empty() && ctx.snap->lanes.size() > 1) {
    error_ = "the quiz follows one lane: start a generation with one strategy";
    return;
  }
  if (ctx.snap->state == SessionState::kFinished || ctx.snap->state == SessionState::kNoPrompt) {
    error_ = "no next step to guess: " + ctx.snap->next_action;
    return;
  }
  error_.clear();
  votes_.clear();
  results_.clear();
  shortlist_.clear();
  context_.clear();
  chosen_ = -1;
  pending_ = std::make_shared<Pending>();
  phase_ = Phase::kComputing;
  hide_panels(ctx, true);
  // The next step's prediction: the logits after lane 0's tokens (the prompt
  // before prefill; prompt + generated, the pending token included, after).
  worker->post([pending = pending_](Session& s) {
    std::vector<float> logits;
    std::string context, error;
    try {
      const std::vector<int> tokens = s.lanes().empty() ? s.prompt_ids() : s.lane_tokens(0);
      if (tokens.empty()) throw Error("enter a prompt first");
      ForwardResult r = s.engine().forward_scratch(tokens, ForwardOptions{});
      logits = std::move(r.outputs.at(0).logits);
      context = s.tokenizer().decode(tokens);
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::lock_guard<std::mutex> lock(pending->mutex);
    pending->logits = std::move(logits);
    pending->context = std::move(context);
    pending->error = error;
    pending->done = true;
  });
}

void QuizPanel::vote_token(const SessionSnapshot& snap, int token) {
  if (phase_ != Phase::kAsking) return;
  if (token < 0 || token >= snap.config.vocab_size) return;
  for (Vote& v : votes_)
    if (v.token == token && v.typed.empty()) {
      ++v.votes;
      return;
    }
  votes_.push_back({token, "", 1});
}

void QuizPanel::vote_word(const SessionSnapshot& snap, const std::string& word) {
  if (phase_ != Phase::kAsking || !snap.tokenizer) return;
  if (word.empty()) {
    error_ = "type a word first";
    return;
  }
  // As the reveal will score it: "cold" after "a very" is " cold".
  const std::vector<int> ids = snap.tokenizer->encode_ids(quiz_word_as_scored(word, context_));
  if (ids.empty()) return;
  error_.clear();
  for (Vote& v : votes_)
    if (v.typed == word) {
      ++v.votes;
      return;
    }
  votes_.push_back({ids[0], word, 1});
}

void QuizPanel::reveal(PanelContext& ctx) {
  if (phase_ != Phase::kAsking || !ctx.snap) return;
  steps_before_ = ctx.snap->history.size();
  phase_ = Phase::kRevealing;
  ctx.ctl.advance(ctx.state.strategies());
}

void QuizPanel::poll(PanelContext& ctx) {
  if (phase_ == Phase::kComputing && pending_) {
    std::lock_guard<std::mutex> lock(pending_->mutex);
    if (!pending_->done) return;
    if (!pending_->error.empty()) {
      error_ = pending_->error;
      phase_ = Phase::kIdle;
      hide_panels(ctx, false);
      return;
    }
    try {
      // The step about to run is history index size(), as in the CLI's --quiz.
      shortlist_ =
          quiz_shortlist_for_step(pending_->logits, *ctx.snap->tokenizer, ctx.snap->history.size());
      context_ = pending_->context;
      phase_ = Phase::kAsking;
    } catch (const Error& e) {
      error_ = e.what();
      phase_ = Phase::kIdle;
      hide_panels(ctx, false);
    }
    return;
  }
  if (phase_ != Phase::kRevealing || !ctx.snap || ctx.snap->busy) return;
  if (ctx.snap->history.size() <= steps_before_) {
    // The step was refused (the error shows in the status bar): nothing to reveal.
    if (!ctx.snap->last_error.empty()) {
      error_ = "the step did not run: " + ctx.snap->last_error;
      phase_ = Phase::kAsking;
    }
    return;
  }
  const StepTrace& step = *ctx.snap->history.back();
  const LaneStep* lane = nullptr;
  for (const LaneStep& l : step.lanes)
    if (l.lane == 0) lane = &l;
  if (!lane) {
    error_ = "lane 0 took no part in the step";
    phase_ = Phase::kIdle;
    hide_panels(ctx, false);
    return;
  }
  chosen_ = lane->chosen_token;
  results_.clear();
  for (const Vote& v : votes_) {
    QuizGuess g =
        v.typed.empty()
            ? score_guess(lane->logits, *ctx.snap->tokenizer, v.token, chosen_)
            : score_typed_guess(lane->logits, *ctx.snap->tokenizer, v.typed, chosen_, context_);
    for (int i = 0; i < v.votes; ++i) tally_.add(g);
    results_.push_back({g, v.votes});
  }
  phase_ = Phase::kRevealed;
  hide_panels(ctx, false);
  focus_frames_ = 3;
}

// The text so far, word-wrapped in the current (large) font, and after it a
// "?" pill where the next token goes (after the reveal: the token chosen),
// what a class reads off the projector with only this panel showing. A long text keeps its last
// kMaxChars bytes.
void QuizPanel::draw_context(PanelContext& ctx, const std::string& mark_text) {
  constexpr size_t kMaxChars = 360;
  std::string text = context_;
  if (text.size() > kMaxChars) {
    size_t from = text.size() - kMaxChars;
    while (from < text.size() && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) ++from;
    text = "\u2026 " + text.substr(from);
  }
  shown_context_ = text;
  const float avail = ImGui::GetContentRegionAvail().x;
  float x = 0;
  bool line_empty = true;
  // Pieces: a run of spaces and the word after it, or one line break.
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '\n') {
      if (line_empty) ImGui::NewLine();
      line_empty = true;
      x = 0;
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && text[j] == ' ') ++j;
    while (j < text.size() && text[j] != ' ' && text[j] != '\n') ++j;
    std::string piece = text.substr(i, j - i);
    i = j;
    float w = ImGui::CalcTextSize(piece.c_str()).x;
    if (!line_empty && x + w > avail) {
      piece.erase(0, piece.find_first_not_of(' '));
      w = ImGui::CalcTextSize(piece.c_str()).x;
      x = 0;
    } else if (!line_empty) {
      ImGui::SameLine(0, 0);
    }
    ImGui::TextUnformatted(piece.c_str());
    x += w;
    line_empty = false;
  }
  const std::string padded = " " + mark_text + " ";
  const char* mark = padded.c_str();
  const ImGuiStyle& st = ImGui::GetStyle();
  const float mark_w = ImGui::CalcTextSize(mark).x + st.FramePadding.x * 2;
  if (!line_empty && x + st.ItemSpacing.x + mark_w <= avail) ImGui::SameLine();
  badge(mark, ctx.pal.accent, IM_COL32(0, 0, 0, 255));  // black on orange reads best
  const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
  if (ImGui::IsItemVisible()) marker_ = {a.x, a.y, b.x - a.x, b.y - a.y};
}

void QuizPanel::draw(PanelContext& ctx) {
  if (ctx.snap) {
    if (std::exchange(ask_requested_, false) && phase_ != Phase::kComputing &&
        phase_ != Phase::kRevealing && !ctx.snap->busy)
      ask(ctx);
    if (std::exchange(reveal_requested_, false)) reveal(ctx);
    poll(ctx);
  }
  // Closing the panel while a question is open withdraws the question: the
  // hidden Logits and Choosing panels must not stay hidden with no Reveal
  // button left to bring them back.
  if (!ctx.state.settings.panel_open(PanelId::kQuiz) && phase_ == Phase::kAsking) {
    phase_ = Phase::kIdle;
    votes_.clear();
    hide_panels(ctx, false);
  }
  shown_context_.clear();
  marker_ = {};
  if (!begin_panel(ctx, PanelId::kQuiz)) return;
  if (!ctx.snap || !ctx.ctl.worker() || !ctx.snap->tokenizer) {
    empty_hint(ctx, ctx.ctl.needs_model_line().c_str());
    panel_help_button(PanelId::kQuiz);
    end_panel();
    return;
  }
  if (focus_frames_ > 0) {
    --focus_frames_;
    ImGui::SetWindowFocus();
  }
  const SessionSnapshot& snap = *ctx.snap;
  const bool can_ask = phase_ != Phase::kComputing && phase_ != Phase::kRevealing && !snap.busy;
  ImGui::BeginDisabled(!can_ask);
  if (ImGui::Button(phase_ == Phase::kAsking ? "Ask again" : "Ask: what comes next?")) ask(ctx);
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::BeginDisabled(phase_ != Phase::kAsking);
  if (ImGui::Button("Reveal")) reveal(ctx);
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::TextDisabled("score: %d guesses, mean log p %.3f, %d right (%d beat the top-1)",
                      tally_.guesses, tally_.mean_log_prob(), tally_.correct, tally_.beat_top1);
  panel_help_button(PanelId::kQuiz);
  if (!error_.empty())
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.error), "%s", error_.c_str());
  if (phase_ == Phase::kComputing) ImGui::TextDisabled("computing the next prediction...");

  if (phase_ == Phase::kAsking || phase_ == Phase::kRevealing) {
    push_large(ctx);
    draw_context(ctx, "?");
    ImGui::Spacing();
    ImGui::TextUnformatted("Which token comes next? Click to add a guess:");
    for (size_t i = 0; i < shortlist_.size(); ++i) {
      const QuizOption& o = shortlist_[i];
      int votes = 0;
      for (const Vote& v : votes_)
        if (v.token == o.token && v.typed.empty()) votes = v.votes;
      char label[96];
      std::snprintf(label, sizeof label, "\"%s\"%s###opt%zu", o.text.c_str(),
                    votes ? (" x" + std::to_string(votes)).c_str() : "", i);
      if (i % 4) ImGui::SameLine();
      if (ImGui::Button(label)) vote_token(snap, o.token);
    }
    pop_large(ctx);
    ImGui::SetNextItemWidth(ImGui::GetFontSize() * 12);
    const bool enter = ImGui::InputText("##word", &word_, ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::SameLine();
    if (ImGui::Button("Add word") || enter) {
      vote_word(snap, word_);
      word_.clear();
    }
    for (const Vote& v : votes_)
      if (!v.typed.empty()) {
        const std::string as = quiz_word_as_scored(v.typed, context_);
        if (as == v.typed)
          ImGui::TextDisabled("typed \"%s\" x%d", v.typed.c_str(), v.votes);
        else
          ImGui::TextDisabled("typed \"%s\" x%d (scored as \"%s\", with its leading space)",
                              v.typed.c_str(), v.votes, as.c_str());
      }
  }
  if (phase_ == Phase::kRevealed) {
    const QuizGuess model =
        score_guess(snap.history.back()->lanes.front().logits, *snap.tokenizer, chosen_, chosen_);
    push_large(ctx);
    draw_context(ctx, model.text);
    ImGui::Spacing();
    ImGui::Text("The model chose \"%s\" (p %s, rank %d)", model.text.c_str(),
                prob_text(model.probability).c_str(), model.rank);
    pop_large(ctx);
    if (ImGui::BeginTable("guesses", 6,
                          ImGuiTableFlags_BordersInnerH | ImGuiTableFlags_SizingStretchProp)) {
      for (const char* h : {"guess", "votes", "probability", "rank", "surprisal", ""})
        ImGui::TableSetupColumn(h);
      ImGui::TableHeadersRow();
      for (const Result& r : results_) {
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        if (r.guess.typed.empty())
          ImGui::Text("\"%s\"", r.guess.text.c_str());
        else
          ImGui::Text("\"%s\" (typed \"%s\")", r.guess.text.c_str(), r.guess.typed.c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%d", r.votes);
        ImGui::TableNextColumn();
        ImGui::TextUnformatted(prob_text(r.guess.probability).c_str());
        ImGui::TableNextColumn();
        ImGui::Text("%d", r.guess.rank);
        ImGui::TableNextColumn();
        ImGui::Text("%.2f bits", r.guess.surprisal_bits);
        ImGui::TableNextColumn();
        if (r.guess.correct)
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.ok), "right");
        else if (r.guess.word_tokens > 1)
          ImGui::TextDisabled("only the first of its %d tokens is scored", r.guess.word_tokens);
        else if (!r.guess.typed.empty() && r.guess.scored_as != r.guess.typed)
          ImGui::TextDisabled("scored with its leading space");
      }
      ImGui::EndTable();
    }
  }
  if (phase_ == Phase::kIdle)
    empty_hint(ctx, "Press Ask before stepping: the class guesses, then Reveal runs the step.");
  end_panel();
}

}  // namespace ts::app
