#pragma once
// The stages of the sampling pipeline, each a pure transformation of a logits
// vector in place, with HF transformers' semantics. A removed token's logit
// becomes -inf; the stages never remove the last finite token. Logits must be
// NaN-free (the pipeline checks). Scaled values that would overflow are
// clamped to +-FLT_MAX so that a finite logit stays finite.
#include <vector>

namespace ts {

// Every distinct token id in context_ids (prompt included) once: a logit > 0
// is divided by penalty, a logit < 0 multiplied by it. penalty == 1 is a
// no-op. Throws ts::Error for a context id outside [0, logits.size()) or a
// penalty that is not finite and > 0.
void apply_repetition_penalty(std::vector<float>& logits, const std::vector<int>& context_ids,
                              float penalty);

// logits / temperature. Throws ts::Error unless temperature is finite and > 0.
void apply_temperature(std::vector<float>& logits, float temperature);

// Keeps every token whose logit is >= the k-th largest logit (ties at the
// boundary are all kept). k == 0 (off) and k >= size are no-ops. Throws
// ts::Error for k < 0.
void apply_top_k(std::vector<float>& logits, int k);

// Nucleus: ranks tokens by probability (descending, ties by lower id) and keeps
// the shortest prefix whose cumulative probability reaches top_p, including
// the token that crosses it; i.e. a token is removed when the tokens ranked
// above it already sum to >= top_p. The top token is always kept. top_p == 1
// is a no-op. Throws ts::Error unless top_p is in (0, 1].
void apply_top_p(std::vector<float>& logits, float top_p);

// Keeps tokens whose probability is >= min_p * (the largest probability), on
// the distribution these logits define. min_p == 0 is a no-op. Throws
// ts::Error unless min_p is in [0, 1].
void apply_min_p(std::vector<float>& logits, float min_p);

}  // namespace ts
