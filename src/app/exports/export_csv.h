#pragma once
// The numbers behind two panels as CSV (RFC 4180: comma-separated, fields
// with a comma, quote or line break quoted, quotes doubled; UTF-8, lines
// end in \r\n), for a spreadsheet or a plot on a slide. Taken from the data
// the panels draw, at full float precision (%.9g reads back to the same float).
#include <string>
#include <string_view>

#include "app/attention_data.h"
#include "app/exports/export_svg.h"

namespace ts::app {

// One CSV field, quoted when it must be.
std::string csv_field(std::string_view text);

// The viewed attention matrix as a grid: the first row names the keys
// ("position:token"), then one row per query, its name first, then the
// weight of each key; a masked cell (a key after the query) is empty.
std::string attention_csv(const AttentionMatrix& m, const std::vector<std::string>& labels);

// Every lane's logits at one step, every token of the vocabulary, most
// likely first: step, lane, token, id, logit, probability (softmax of the
// lane's logits), rank (1 = most likely).
std::string logits_csv(const StepTrace& trace, int step, const TokenPieceFn& piece);

}  // namespace ts::app
