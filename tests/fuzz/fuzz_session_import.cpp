// Session files (File > Open session, tokenscope --open): the whole JSON text.
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "session/session_import.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ts;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ImportedSession s;
  try {
    s = import_session_text(text, "fuzz.json");
  } catch (const Error&) {
    return 0;
  }
  // What the window's panels index without checking again: every record's
  // sizes match the model's shape, every id is in the vocabulary, every
  // index points inside what it indexes.
  const SessionSnapshot& snap = s.full;
  const ModelConfig& c = snap.config;
  FUZZ_CHECK(snap.tokenizer && snap.tokenizer->vocab_size() == c.vocab_size);
  FUZZ_CHECK(c.n_layer >= 1 && c.n_layer <= kMaxReplayLayers);
  FUZZ_CHECK(c.n_head >= 1 && c.n_head <= kMaxReplayHeads);
  for (const TokenSpan& t : snap.prompt_tokens) {
    FUZZ_CHECK(t.id >= 0 && t.id < c.vocab_size);
    FUZZ_CHECK(t.byte_begin <= t.byte_end && t.byte_end <= snap.prompt_text.size());
  }
  auto check_record = [&](const LaneStep& r) {
    FUZZ_CHECK(r.lane >= 0 && r.lane < static_cast<int>(snap.lanes.size()));
    FUZZ_CHECK(static_cast<int>(r.logits.size()) == c.vocab_size);
    FUZZ_CHECK(!r.input_tokens.empty());
    FUZZ_CHECK(static_cast<int>(r.context_ids.size()) == r.context());
    FUZZ_CHECK(r.context() <= kMaxReplayContext);
    for (int id : r.context_ids) FUZZ_CHECK(id >= 0 && id < c.vocab_size);
    FUZZ_CHECK(r.chosen_token >= -1 && r.chosen_token < c.vocab_size);
    FUZZ_CHECK(r.attention.empty() || static_cast<int>(r.attention.size()) == c.n_layer);
    for (const auto& layer : r.attention)
      FUZZ_CHECK(!layer || layer->size() == static_cast<size_t>(c.n_head) * r.rows() *
                                                static_cast<size_t>(r.context()));
    if (r.beam) {
      for (const BeamCandidate& cand : r.beam->candidates) {
        FUZZ_CHECK(cand.parent >= 0 &&
                   cand.parent < static_cast<int>(r.beam->before->beams.size()));
        FUZZ_CHECK(cand.new_beam < static_cast<int>(r.beam->after->beams.size()));
      }
    }
    if (r.contrastive) {
      const ContrastiveStep& k = *r.contrastive;
      FUZZ_CHECK(k.chosen >= 0 && k.chosen < static_cast<int>(k.candidates.size()));
      FUZZ_CHECK(k.similarity.size() == k.candidates.size() * static_cast<size_t>(k.positions));
    }
    if (r.banned_words)
      for (const auto& seq : r.banned_words->sequences)
        for (int id : seq) FUZZ_CHECK(id >= 0 && id < c.vocab_size);
  };
  for (size_t i = 0; i < snap.lanes.size(); ++i) {
    const Lane& l = snap.lanes[i];
    FUZZ_CHECK(l.parent < static_cast<int>(i));
    if (l.branch_record) check_record(*l.branch_record);
  }
  for (size_t i = 0; i < snap.history.size(); ++i) {
    const StepTrace& t = *snap.history[i];
    FUZZ_CHECK(t.index == static_cast<int>(i));
    FUZZ_CHECK(static_cast<int>(t.kv_after.ref_counts.size()) == t.kv_after.blocks_total);
    for (const SequenceOccupancy& seq : t.kv_after.sequences)
      for (int b : seq.block_table) FUZZ_CHECK(b >= 0 && b < t.kv_after.blocks_total);
    for (const LaneStep& r : t.lanes) check_record(r);
  }
  return 0;
}
