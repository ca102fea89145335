#pragma once
// Human-readable lines for one step of a session.
#include <iosfwd>
#include <string>
#include <string_view>

#include "session/session.h"

namespace ts::cli {

// Text safe for a terminal: control bytes (ESC, CR, BEL, ... but not newline
// or tab) become visible escapes such as \x1b, so a prompt cannot move the
// cursor or recolour the screen.
std::string printable(std::string_view text);

// A value echoed in a message, at most max_bytes of it (cut at a UTF-8
// character boundary) followed by "... (N bytes)" when longer: a 10 MB line
// typed or read is not printed whole.
std::string clipped(std::string_view text, size_t max_bytes = 80);

// The step's header, KV occupancy and per lane the chosen token with the
// model's probability of it and, when sampling, its probability after the
// filters (what the JSON calls chosen_prob), plus the top alternatives.
void print_step(std::ostream& out, const Session& session, const StepTrace& step, int top);
void print_logit_lens(std::ostream& out, const Session& session, const StepTrace& step);
// Per lane: prompt + generated text (valid UTF-8 with U+FFFD for a cut
// character, as --json writes them, then printable()) and the stop reason.
void print_lanes_text(std::ostream& out, const Session& session);

}  // namespace ts::cli
