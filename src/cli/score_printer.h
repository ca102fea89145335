#pragma once
// --score: the per-token table of a scored continuation (token, probability,
// rank, surprisal, the model's top alternatives) and its totals; for two
// continuations, both tables and where they first differ.
#include <iosfwd>

#include "session/score.h"

namespace ts::cli {

void print_score(std::ostream& out, const ScoreResult& score, int label);
void print_score_difference(std::ostream& out, const ScoreResult& a, const ScoreResult& b);

}  // namespace ts::cli
