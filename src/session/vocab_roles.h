#pragma once
#include <string>

namespace ts {

// Who is checked against whom in the vocabulary refusals of
// session/speculative_lane.h (spec_vocab_mismatch) and load_draft_model: a draft
// model against its target (speculative decoding), or a compared model
// against the reference (session/precision_compare.h).
struct VocabRoles {
  std::string model = "draft model";                        // the line's start: "draft model: ..."
  std::string other = "target";                             // whose vocabulary it must share
  std::string need = "speculative decoding needs a draft";  // the line's end
};

}  // namespace ts
