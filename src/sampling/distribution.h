#pragma once
// Numerics on one logits / probability vector that the pipeline, the GUI and
// the CLI share: softmax (max-subtracted, accumulated in double), its log,
// the top-n ranking and the entropy.
#include <vector>

namespace ts {

// Probabilities from logits. -inf logits get probability 0. All -inf (or
// empty) gives all zeros. +inf logits share the whole mass equally (the limit
// of the softmax). Throws ts::Error("logits contain NaN") on NaN.
std::vector<float> softmax(const std::vector<float>& logits);

// log(softmax(logits)) computed without taking the log of a rounded
// probability: -inf where the probability is 0. Same special cases as softmax.
std::vector<float> log_softmax(const std::vector<float>& logits);

// Indices of the n largest values, largest first, ties by lower index; NaN
// ranks below everything. n <= 0 gives none, n >= size gives a full ranking.
std::vector<int> top_n(const std::vector<float>& values, int n);

// Shannon entropy -sum p ln p in nats over the entries with p > 0.
double entropy_nats(const std::vector<float>& probs);

}  // namespace ts
