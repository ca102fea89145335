#pragma once
// Contrastive search (Su et al., 2022) with Hugging Face transformers'
// ranking: the candidates are the k most probable next tokens; each is run
// through the model, and its degeneration penalty is the largest cosine
// similarity between its last-layer hidden state (after ln_f) and the same
// layer's state at every earlier position. The winner maximises
//   score = (1 - alpha) * p - alpha * penalty,
// ties going to the more probable candidate. alpha = 0 is greedy.
// Pure functions: the session runs the forwards, these do the arithmetic.
#include <vector>

namespace ts {

inline constexpr int kMinContrastiveK = 2;
inline constexpr int kMaxContrastiveK = 16;

struct ContrastiveCandidate {
  int token = -1;
  float prob = 0;       // processed next-token probability
  float penalty = 0;    // max cosine similarity with an earlier position
  int similar_pos = 0;  // the earlier position that similarity belongs to
  float score = 0;      // (1 - alpha) * prob - alpha * penalty
};

struct ContrastiveStep {
  int k = 0;
  float alpha = 0;
  std::vector<ContrastiveCandidate> candidates;  // most probable first
  int chosen = 0;                                // index into candidates
  // Cosine similarity of each candidate's state with every earlier
  // position's: [k][positions] (the similarity strip over the context).
  int positions = 0;
  std::vector<float> similarity;
};

// The k most probable tokens, most probable first, ties by the lower id.
std::vector<int> contrastive_candidates(const std::vector<float>& probs, int k);

// Ranks the candidates. probs: the full next-token distribution; history:
// [positions][c] states of every earlier position; candidate_states[i]: c
// floats, the state of candidates[i] at its own position. Arithmetic in
// double. Throws ts::Error on mismatched sizes or an empty history.
ContrastiveStep contrastive_rank(const std::vector<float>& probs,
                                 const std::vector<int>& candidates,
                                 const std::vector<float>& history,
                                 const std::vector<const float*>& candidate_states, int c,
                                 float alpha);

// The winner for another alpha, from recorded probabilities and penalties
// (no recomputation): the index into candidates; scores (optional) receives
// each candidate's score under that alpha.
int contrastive_choice(const std::vector<ContrastiveCandidate>& candidates, float alpha,
                       std::vector<float>* scores = nullptr);

}  // namespace ts
