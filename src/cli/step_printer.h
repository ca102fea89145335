#pragma once
// Human-readable lines for one step of a session.
#include <iosfwd>

#include "session/session.h"

namespace ts::cli {

void print_step(std::ostream& out, const Session& session, const StepTrace& step, int top);
void print_logit_lens(std::ostream& out, const Session& session, const StepTrace& step);
void print_lanes_text(std::ostream& out, const Session& session);

}  // namespace ts::cli
