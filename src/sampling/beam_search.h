#pragma once
// Beam search as HF transformers' BeamSearchScorer does it, as a pure state
// machine over log-softmax rows, so that the session, the tests and the GUI
// share one definition:
//
//  * each step looks at the 2 * num_beams best (beam, token) candidates by
//    cumulative log-probability over every open beam's next-token row;
//  * walking them best first, an end-of-text candidate ranked within the first
//    num_beams becomes a finished hypothesis (its tokens without the end of
//    text, score = sum_logprobs / generated_len ** length_penalty, where
//    generated_len counts the end of text); any other end-of-text candidate
//    is dropped; other candidates become the next beams until num_beams are
//    kept; the rest are pruned;
//  * the search is done once num_beams hypotheses are finished and
//    early_stopping says no open beam can beat the worst of them:
//    true = at once, false = best cumulative log-prob / current length ** lp
//    cannot beat it, never = the same bound taken at the maximum length
//    when lp > 0;
//  * finalize adds the open beams as hypotheses (unless done) and returns the
//    best score first.
//
// Two deliberate differences, neither of which changes a result: the first
// step starts from one beam (HF starts num_beams copies of the prompt scored
// -1e9 but beam 0, which gives the same beams whenever the vocabulary holds at
// least 2 * num_beams tokens), and ties between equal cumulative
// log-probabilities go to the lower (beam, token) pair (torch.topk leaves
// them unspecified). With fewer than num_beams candidates (a tiny vocabulary)
// fewer beams are kept instead of padding. A -inf log-probability (a token a
// logits processor removed, e.g. a banned word) is never a candidate, where
// HF's top-k could still pick one when too few finite scores are left.
#include <string>
#include <vector>

namespace ts {

enum class EarlyStopping { kFalse, kTrue, kNever };
const char* early_stopping_name(EarlyStopping e);  // "false", "true", "never"

struct BeamSearchConfig {
  int num_beams = 2;            // 2..8 in strategies; any >= 1 here
  float length_penalty = 1.0f;  // exponent of the length in a hypothesis' score
  EarlyStopping early_stopping = EarlyStopping::kFalse;
  int max_new_tokens = 64;  // the length "never" assumes for open beams
  int eos_id = -1;          // -1: no end of text
};

struct Beam {
  std::vector<int> tokens;             // generated tokens (no prompt)
  std::vector<float> token_log_probs;  // log-probability of each token given its prefix
  double sum_log_prob = 0;             // cumulative: the beam's score
};

struct BeamHypothesis {
  std::vector<int> tokens;             // without the end of text (HF's convention)
  std::vector<float> token_log_probs;  // includes the end of text's when ended_by_eos
  double sum_log_prob = 0;
  double score = 0;  // sum_log_prob / generated_len ** length_penalty
  bool ended_by_eos = false;
  int generated_len = 0;  // tokens generated, the end of text included
};

enum class CandidateFate {
  kKept,      // became an open beam of the next step
  kFinished,  // end of text within the top num_beams: a finished hypothesis
  kPruned,    // not needed (beams full) or an end of text ranked too low
};
const char* candidate_fate_name(CandidateFate f);

// One of the 2 * num_beams candidates a step considered, best first.
struct BeamCandidate {
  int parent = 0;  // index of the open beam it extends
  int token = -1;
  float log_prob = 0;       // of token given the parent's sequence
  double sum_log_prob = 0;  // parent's sum + log_prob
  CandidateFate fate = CandidateFate::kPruned;
  int new_beam = -1;  // index among the next open beams when kept
};

struct BeamSearchState {
  std::vector<Beam> beams;               // open beams, best first
  std::vector<BeamHypothesis> finished;  // at most num_beams, in insertion order
  double worst_finished_score = 1e9;     // HF's worst_score (1e9 while empty)
  bool done = false;
  int steps = 0;  // tokens every open beam holds
};

// The state before the first token: one empty beam.
BeamSearchState beam_search_start();

// Advances the search by one token. log_probs[i] is the next-token
// log-softmax row of state.beams[i] (same size for all). Returns the
// candidates considered. Throws ts::Error when the rows do not match the
// beams, the config is invalid, or the search is already done.
std::vector<BeamCandidate> beam_search_step(BeamSearchState& state,
                                            const std::vector<std::vector<float>>& log_probs,
                                            const BeamSearchConfig& config);

// The hypotheses ranked best first: the finished ones, plus the open beams
// when the search is not done (generation stopped at a length limit).
std::vector<BeamHypothesis> beam_search_finalize(const BeamSearchState& state,
                                                 const BeamSearchConfig& config);

// Throws ts::Error naming the field when the config is invalid.
void validate(const BeamSearchConfig& config);

}  // namespace ts
