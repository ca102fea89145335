#pragma once
// The comparison of two engines that share a vocabulary, on the same prompt,
// greedily, a step at a time. Either one checkpoint loaded twice, its matmul
// weights in two formats (--compare-precision REF,FMT; model/weight_format.h),
// or two models whose tokenizers give every id the same token
// (--compare-model PATH: e.g. the bundled GPT-2 and a Llama-shaped twin).
// The two sides are named by labels: the format names or the model names.
//
// Teacher-forced: the compared engine is fed the reference's tokens, so every
// step's two distributions are over the same context, and its KL and top-k
// changes measure the format alone, not a drift of the text. Beside it a
// second sequence of the compared engine runs free (greedy on its own
// output): its text is the compared format's own continuation, and the first
// step where its token differs from the reference's is the first divergence.
// Before that step the two contexts are the same, so it is also the first
// step whose top-1 disagrees.
//
// Row 0 is the prefill (the prediction of the first new token), rows 1.. the
// decode steps. A plain class with no thread of its own: tokenscope-cli runs
// it in a loop, the window on a background thread of the Compare panel.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "model/tokenizer.h"
#include "model/weight_format.h"
#include "session/model_setup.h"

namespace ts {

inline constexpr int kPrecisionTopK = 10;  // the top-k whose changed places are listed

struct PrecisionPair {
  WeightFormat reference = WeightFormat::kF32;
  WeightFormat compared = WeightFormat::kF32;
};

// "REF,FMT", each one of f32, bf16, f16, q8, q4, two different formats.
// Refused in one line starting with `flag` ("--compare-precision: ..."): one
// format, an unknown name, the same format twice, and device "cuda" with a
// q8 or q4 (the block formats run on the CPU only).
PrecisionPair parse_precision_pair(const std::string& flag, const std::string& text,
                                   const std::string& device);
// "f32,q8".
std::string precision_pair_name(const PrecisionPair& pair);

// A token of either top-k whose rank is not the same under both formats.
// Ranks are 1-based over the whole vocabulary (ties: the lower id first).
struct RankChange {
  int token = -1;
  int reference_rank = 0;
  int compared_rank = 0;
};

struct PrecisionStep {
  int index = 0;  // 0: the prefill, then the decode steps
  // KL(p_reference || p_compared) in nats, both at temperature 1 over the
  // full vocabulary, in double, on the reference's context.
  double kl = 0;
  int reference_token = -1;  // the reference's greedy token (its text takes it)
  int compared_token = -1;   // the compared format's argmax on the reference's context
  bool top1_agrees() const { return reference_token == compared_token; }
  std::vector<RankChange> changed;  // sorted by reference rank
  // The free-running compared continuation's token at this step (on its own
  // context, which differs from the reference's after the first divergence).
  int free_token = -1;
  // Bytes the step moves (weights in each format, KV cache read and written:
  // engine/cost_model.h) and the forward's measured wall time, per side.
  // Compared: the teacher-forced pass.
  double reference_bytes = 0, compared_bytes = 0;
  double reference_seconds = 0, compared_seconds = 0;
  // Of those bytes: the weights read, and the KV cache written per token fed
  // (each new token's keys and values over every layer, in the KV format).
  double reference_weight_bytes = 0, compared_weight_bytes = 0;
  double reference_kv_token_bytes = 0, compared_kv_token_bytes = 0;
};

struct PrecisionSummary {
  int steps = 0;
  double mean_kl = 0;
  double max_kl = 0;
  double top1_agreement = 0;  // fraction of steps, 0..1
  int first_divergence = -1;  // row index, -1 while the continuations agree
  // Over the decode steps (row 0, the prefill, is larger and left out; with
  // no decode step yet, the prefill's).
  double reference_bytes = 0, compared_bytes = 0;  // mean per step
  double reference_median_seconds = 0, compared_median_seconds = 0;
  // Weight bytes per step and KV bytes per token of each side (the same on
  // every step).
  double reference_weight_bytes = 0, compared_weight_bytes = 0;
  double reference_kv_token_bytes = 0, compared_kv_token_bytes = 0;
};

// What the two sides are called in tables and titles.
struct CompareLabels {
  std::string reference, compared;
};

// KL(p || q) in nats of the softmax distributions of two logit rows of the
// same length, computed in double. 0 when the rows are equal.
double kl_divergence(const float* p_logits, const float* q_logits, size_t n);
// The index of the largest logit (the lowest index among equals).
int argmax_token(const float* logits, size_t n);
// The k largest logits' indices, largest first (ties: the lower index first).
std::vector<int> top_k_tokens(const float* logits, size_t n, int k);
// 1-based rank of `token` among all n logits (ties: the lower index first).
int token_rank(const float* logits, size_t n, int token);
// The first index where the two sequences differ, over their common length;
// -1 when they agree there.
int first_difference(const std::vector<int>& a, const std::vector<int>& b);

class PrecisionCompare {
 public:
  // Two engines of any models with the same vocabulary size (throws
  // ts::Error otherwise; that their tokenizers agree id by id is the
  // caller's check, as load_models does it): KV room for one sequence in the
  // reference, two in the compared. `tokenizer` reads both.
  PrecisionCompare(std::shared_ptr<const Tokenizer> tokenizer, std::shared_ptr<Engine> reference,
                   std::shared_ptr<Engine> compared, CompareLabels labels);
  // Two engines of the same checkpoint in the pair's formats (same config;
  // throws ts::Error otherwise), labelled with the format names.
  PrecisionCompare(std::shared_ptr<const Tokenizer> tokenizer, std::shared_ptr<Engine> reference,
                   std::shared_ptr<Engine> compared, PrecisionPair pair);
  ~PrecisionCompare();
  PrecisionCompare(const PrecisionCompare&) = delete;
  PrecisionCompare& operator=(const PrecisionCompare&) = delete;

  // Loads the checkpoint of `setup` twice, in the pair's two formats (its
  // `weights` is ignored). With device "auto" and any format other than f32
  // both run on the CPU, so that their times compare like with like.
  static std::unique_ptr<PrecisionCompare> load(const ModelSetupOptions& setup, PrecisionPair pair);
  // The model of `setup` (the reference) against the one at `compared`,
  // loaded as a draft model is (load_draft_model: same device, weight and KV
  // formats, its tokenizer checked id by id against the reference's). Throws
  // ts::Error in one line starting "compared model: " for a path that does
  // not load or a vocabulary that differs (naming the first id that does).
  static std::unique_ptr<PrecisionCompare> load_models(const ModelSetupOptions& setup,
                                                       const std::filesystem::path& compared);

  // Starts over with this prompt (nothing runs until step()). Throws
  // ts::Error for an empty prompt or one longer than the context.
  void set_prompt(const std::string& text);
  // The context both models hold (the smaller of the two).
  int context() const;
  // Whether another row fits the context.
  bool can_step() const;
  // Runs the next row on all three sequences and returns it. Throws
  // ts::Error when no prompt is set or the context is full.
  const PrecisionStep& step();

  const std::vector<PrecisionStep>& steps() const { return steps_; }
  PrecisionSummary summary() const;
  const std::vector<int>& prompt_tokens() const { return prompt_; }
  // The two continuations: the reference's greedy tokens and the compared
  // format's own (free-running) greedy tokens.
  const std::vector<int>& reference_tokens() const { return ref_tokens_; }
  const std::vector<int>& free_tokens() const { return free_tokens_; }

  const CompareLabels& labels() const { return labels_; }
  // The formats compared, when both sides are one checkpoint; none for two models.
  std::optional<PrecisionPair> pair() const { return pair_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const Engine& reference_engine() const { return *reference_; }
  const Engine& compared_engine() const { return *compared_; }

 private:
  void release_sequences();

  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<Engine> reference_, compared_;
  CompareLabels labels_;
  std::optional<PrecisionPair> pair_;
  std::vector<int> prompt_;
  std::vector<int> ref_tokens_, free_tokens_;
  std::vector<PrecisionStep> steps_;
  SeqId ref_seq_ = -1, forced_seq_ = -1, free_seq_ = -1;
};

}  // namespace ts
