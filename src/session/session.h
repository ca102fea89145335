#pragma once
// The step machine both front ends drive:
//   set_prompt -> prefill (pause) -> step (one token per lane, pause) -> ...
// with step back, run to the end and reset. Lanes (one sequence each, own
// strategy and seed) share the prompt's KV blocks through a forked cache.
// Every step publishes an immutable StepTrace. Any refused command (bad
// prompt, invalid parameter, full context or cache) throws ts::Error and
// leaves the session exactly as it was.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "model/tokenizer.h"
#include "sampling/sampling_params.h"
#include "trace/step_trace.h"

namespace ts {

struct SessionOptions {
  int max_new_tokens = 64;  // per lane
  bool record_attention = true;
  int64_t trace_budget_bytes = 256ll << 20;  // beyond it, attention is recomputed on demand
  bool kv_cache = true;                      // false: every decode step recomputes everything
  bool record_residuals = true;              // for the logit lens
};

enum class SessionState {
  kNoPrompt,  // nothing to run
  kReady,     // prompt tokenized, waiting for prefill
  kPaused,    // after prefill or a decode step; step() continues
  kFinished,  // every lane stopped (end of text, token limit, context end)
};
const char* state_name(SessionState state);

struct Lane {
  int id = 0;
  SamplingParams params;
  SeqId seq = -1;              // its KV cache sequence (-1 before prefill / cache off)
  std::vector<int> generated;  // chosen tokens; the last one is not cached yet
  std::string stop_reason;     // empty while the lane runs
  bool running() const { return stop_reason.empty(); }
};

inline constexpr int kMaxLanes = 8;

class Session {
 public:
  Session(std::shared_ptr<const Tokenizer> tokenizer, std::shared_ptr<Engine> engine,
          SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Tokenizes and validates the prompt; drops any previous generation.
  void set_prompt(std::string_view text);
  // One strategy per lane (1..8). Before prefill only.
  void set_strategies(const std::vector<SamplingParams>& strategies);
  void set_max_new_tokens(int n);
  void set_kv_cache(bool enabled);  // before prefill only

  const StepTrace& prefill();
  const StepTrace& step();
  void back();   // undo the last step (after prefill: back to kReady)
  void reset();  // back to kReady, prompt kept
  // Steps until every lane stopped, max_steps were taken, or should_stop()
  // returns true. Returns the number of steps taken.
  int run(int max_steps, const std::function<bool()>& should_stop = {});

  // Re-chooses the last step's token of one lane with new parameters: the
  // logits do not change, only the choice (the pending token) does.
  void rechoose(int lane, const SamplingParams& params);

  // Attention of one layer for (step, lane): [head][rows][context]. Taken from
  // the trace, or recomputed when the budget left it out.
  std::vector<float> attention(int step, int lane, int layer);

  SessionState state() const;
  bool can_step() const;
  std::string next_action() const;  // what prefill()/step() would compute now
  const std::string& prompt_text() const { return prompt_text_; }
  const std::vector<TokenSpan>& prompt_tokens() const { return prompt_tokens_; }
  std::vector<int> prompt_ids() const;
  const std::vector<Lane>& lanes() const { return lanes_; }
  std::vector<int> lane_tokens(int lane) const;  // prompt + generated
  const std::vector<StepTracePtr>& history() const { return history_; }
  const SessionOptions& options() const { return options_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  std::shared_ptr<const Tokenizer> shared_tokenizer() const { return tokenizer_; }
  Engine& engine() { return *engine_; }
  const Engine& engine() const { return *engine_; }
  int64_t trace_bytes() const { return trace_bytes_; }

 private:
  void release_lanes();
  void choose(LaneStep& step, const Lane& lane) const;
  void finish_lane_if_done(Lane& lane, const LaneStep& step) const;
  void apply_budget(StepTrace& trace);
  void publish(std::shared_ptr<StepTrace> trace);
  StepTrace make_trace(Phase phase, const ForwardResult& result) const;

  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<Engine> engine_;
  SessionOptions options_;
  std::string prompt_text_;
  std::vector<TokenSpan> prompt_tokens_;
  std::vector<SamplingParams> strategies_{SamplingParams{}};
  std::vector<Lane> lanes_;
  std::vector<StepTracePtr> history_;
  int64_t trace_bytes_ = 0;
};

}  // namespace ts
