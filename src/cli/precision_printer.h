#pragma once
// --compare-precision and --compare-model: one table row per step of a
// PrecisionCompare (the KL, whether top-1 agrees, the top-10 tokens that
// changed places, bytes and time per side, each side named by its label),
// then a summary (with each side's weight bytes and KV bytes per token) and
// the two continuations.
#include <iosfwd>

#include "session/precision_compare.h"

namespace ts::cli {

// The header: the two formats, the device and how the rows are computed.
void print_precision_header(std::ostream& out, const PrecisionCompare& cmp);
// The row of `step` (the newest of cmp's steps, or any earlier one).
void print_precision_row(std::ostream& out, const PrecisionCompare& cmp, const PrecisionStep& step);
// Mean KL, top-1 agreement, first divergence, bytes and median step time per
// format, then the reference's and the compared format's own continuation.
void print_precision_summary(std::ostream& out, const PrecisionCompare& cmp);

}  // namespace ts::cli
