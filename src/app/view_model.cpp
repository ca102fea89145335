#include "app/view_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/token_display.h"
#include "sampling/banned_words.h"

namespace ts::app {

const LaneStep* find_lane_step(const StepTrace& trace, int lane) {
  for (const LaneStep& ls : trace.lanes)
    if (ls.lane == lane) return &ls;
  return nullptr;
}

const LaneStep* lane_record(const SessionSnapshot& snap, int step, int lane) {
  // Before prefill the snapshot has no lanes; lane 0 may still be asked for.
  if (snap.lanes.empty())
    return step >= 0 && step < static_cast<int>(snap.history.size())
               ? find_lane_step(*snap.history[step], lane)
               : nullptr;
  return ts::lane_record(snap.history, snap.lanes, step, lane);
}

bool is_branch_record(const SessionSnapshot& snap, const LaneStep* record) {
  if (!record || record->lane < 0 || record->lane >= static_cast<int>(snap.lanes.size()))
    return false;
  return snap.lanes[record->lane].branch_record.get() == record;
}

StepView make_step_view(const SessionSnapshot& snap, int wanted_step, int lane) {
  StepView v;
  v.lane = lane;
  for (const TokenSpan& t : snap.prompt_tokens) v.tokens.push_back(t.id);
  v.prompt_len = static_cast<int>(v.tokens.size());
  v.cached = 0;
  const int n = static_cast<int>(snap.history.size());
  if (n == 0) return v;
  int step = wanted_step < 0 || wanted_step >= n ? n - 1 : wanted_step;
  // A lane that stopped does not appear in later steps: show its last one.
  while (step > 0 && !lane_record(snap, step, lane)) --step;
  v.step = step;
  v.latest = step == n - 1;
  v.trace = snap.history[step].get();
  v.record = lane_record(snap, step, lane);
  if (!v.record) return v;
  v.branched = is_branch_record(snap, v.record);
  if (const SpecRound* sr = v.record->spec.get()) {
    // A speculative round: the verify pass fed the drafts too, but the lane
    // kept only the committed ones (rejected drafts never enter its text);
    // the target's cache holds all but the last committed token.
    const auto prefix =
        std::min(v.record->context_ids.size(), static_cast<size_t>(v.record->start_pos) + 1);
    v.tokens.assign(v.record->context_ids.begin(), v.record->context_ids.begin() + prefix);
    v.tokens.insert(v.tokens.end(), sr->committed.begin(), sr->committed.end());
    v.cached = std::min(sr->target_after, static_cast<int>(v.tokens.size()));
    return v;
  }
  v.cached = v.record->context();
  v.tokens = v.record->context_ids;
  if (v.record->chosen_token >= 0) v.tokens.push_back(v.record->chosen_token);
  return v;
}

std::string token_piece(const SessionSnapshot& snap, int id) {
  if (!snap.tokenizer || id < 0 || id >= snap.tokenizer->vocab_size()) return "?";
  if (snap.banned_words &&
      std::binary_search(snap.banned_words->singles.begin(), snap.banned_words->singles.end(), id))
    return display_piece(mask_banned_piece(snap.tokenizer->token_bytes(id)));
  return display_piece(snap.tokenizer->token_bytes(id));
}

std::string context_piece(const SessionSnapshot& snap, int id) {
  if (!snap.tokenizer || id < 0 || id >= snap.tokenizer->vocab_size()) return "?";
  return display_piece(snap.tokenizer->token_bytes(id));
}

std::string visible_edges(std::string_view text) {
  auto blank = [](char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; };
  size_t begin = 0, end = text.size();
  while (begin < end && blank(text[begin])) ++begin;
  while (end > begin && blank(text[end - 1])) --end;
  return display_piece(text.substr(0, begin)) + std::string(text.substr(begin, end - begin)) +
         display_piece(text.substr(end));
}

namespace {
std::string scaled(double v, const char* unit, double base, const char* const* prefixes, int n) {
  int i = 0;
  double a = std::fabs(v);
  while (i + 1 < n && a >= base) {
    a /= base;
    v /= base;
    ++i;
  }
  char buf[64];
  const int digits = a >= 100 ? 0 : a >= 10 ? 1 : 2;
  std::snprintf(buf, sizeof(buf), "%.*f %s%s",
                i == 0 && digits > 0 && v == std::floor(v) ? 0 : digits, v, prefixes[i], unit);
  return buf;
}
const char* const kDecimal[] = {"", "k", "M", "G", "T", "P"};
}  // namespace

std::string format_bytes(double bytes) {
  // Binary units with the CLI's digits (its KV cache line, its memory
  // report): the same quantity reads the same in the window and the terminal.
  const double a = std::fabs(bytes);
  char buf[48];
  if (a < 1024.0)
    std::snprintf(buf, sizeof(buf), "%.0f B", bytes);
  else if (a < 1024.0 * 1024)
    std::snprintf(buf, sizeof(buf), "%.1f KiB", bytes / 1024);
  else if (a < 1024.0 * 1024 * 1024)
    std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / (1024.0 * 1024));
  else
    std::snprintf(buf, sizeof(buf), "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  return buf;
}
std::string format_bytes_moved(double bytes) { return scaled(bytes, "B", 1000.0, kDecimal, 6); }
std::string format_flops(double flops) { return scaled(flops, "FLOP", 1000.0, kDecimal, 6); }
std::string format_rate(double per_second, const char* unit) {
  return scaled(per_second, (std::string(unit) + "/s").c_str(), 1000.0, kDecimal, 6);
}

std::string format_seconds(double s) {
  char buf[64];
  if (s >= 1.0)
    std::snprintf(buf, sizeof(buf), "%.2f s", s);
  else if (s >= 1e-3)
    std::snprintf(buf, sizeof(buf), "%.*f ms", s >= 0.1 ? 0 : 1, s * 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.0f µs", s * 1e6);
  return buf;
}

std::string format_percent(double p) {
  const double v = p * 100.0;
  char buf[32];
  if (v >= 9.995)
    std::snprintf(buf, sizeof(buf), "%.1f%%", v);
  else if (v >= 0.0995)
    std::snprintf(buf, sizeof(buf), "%.2f%%", v);
  else if (v >= 0.001)
    std::snprintf(buf, sizeof(buf), "%.3f%%", v);
  else if (v > 0)
    std::snprintf(buf, sizeof(buf), "<0.001%%");
  else
    std::snprintf(buf, sizeof(buf), "0%%");
  return buf;
}

std::string format_count(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string kv_sequence_owner(const SessionSnapshot& snap, const StepTrace* trace, SeqId id,
                              bool draft) {
  if (!draft && trace && !trace->kv_owners.empty()) {
    for (const KvSequenceOwner& o : trace->kv_owners)
      if (o.seq == id)
        return "lane " + std::to_string(o.lane) +
               (o.beam >= 0 ? " beam " + std::to_string(o.beam) : "");
    return {};
  }
  for (const Lane& lane : snap.lanes) {
    if (lane.closed) continue;
    if (draft) {
      if (lane.draft_seq == id) return "lane " + std::to_string(lane.id) + " (draft model)";
      continue;
    }
    for (size_t b = 0; b < lane.beam_seqs.size(); ++b)
      if (lane.beam_seqs[b] == id)
        return "lane " + std::to_string(lane.id) + " beam " + std::to_string(b);
    if (lane.seq == id) return "lane " + std::to_string(lane.id);
  }
  return {};
}

KvBlockRows kv_block_rows(const KvOccupancy& kv) {
  KvBlockRows out;
  for (const SequenceOccupancy& sq : kv.sequences)
    if (!sq.block_table.empty()) out.seqs.push_back(&sq);
  const auto& seqs = out.seqs;
  if (seqs.size() > 1) {
    out.shared = seqs[0]->block_table.size();
    for (const SequenceOccupancy* sq : seqs) {
      size_t i = 0;
      while (i < out.shared && i < sq->block_table.size() &&
             sq->block_table[i] == seqs[0]->block_table[i])
        ++i;
      out.shared = i;
    }
  }
  out.most_blocks = out.shared;
  for (const SequenceOccupancy* sq : seqs)
    out.most_blocks = std::max(out.most_blocks, sq->block_table.size() - out.shared);
  return out;
}

std::set<int> written_slots(const StepView& view) {
  std::set<int> out;
  if (!view.trace) return out;
  for (const LaneStep& ls : view.trace->lanes)
    out.insert(ls.slots_written.begin(), ls.slots_written.end());
  return out;
}

std::vector<LegendTick> legend_ticks(const HeatRange& range) {
  const std::vector<std::pair<float, const char*>> ticks =
      range.scale == HeatScale::kLog
          ? std::vector<std::pair<float, const char*>>{{1e-4f, "\u22640.0001"},
                                                       {1e-3f, "0.001"},
                                                       {1e-2f, "0.01"},
                                                       {0.1f, "0.1"},
                                                       {1.0f, "1"}}
          : std::vector<std::pair<float, const char*>>{
                {0.0f, "0"}, {0.25f, "0.25"}, {0.5f, "0.5"}, {0.75f, "0.75"}, {1.0f, "1"}};
  std::vector<LegendTick> out;
  for (const auto& [v, label] : ticks) out.push_back({v, label, heat_position(v, range)});
  return out;
}

int timing_outlier_reversing(const std::vector<double>& on, const std::vector<double>& off) {
  if (on.empty() || on.size() != off.size()) return -1;
  auto median_decode = [](const std::vector<double>& t) {
    std::vector<double> d(t.begin() + 1, t.end());
    if (d.empty()) return 0.0;
    std::nth_element(d.begin(), d.begin() + d.size() / 2, d.end());
    return d[d.size() / 2];
  };
  const double cap_on = kOutlierFactor * median_decode(on);
  const double cap_off = kOutlierFactor * median_decode(off);
  const double prefill = std::min(on[0], off[0]);
  double total_on = 0, total_off = 0, held_on = prefill, held_off = prefill;
  int worst = -1;
  double worst_excess = 0;
  for (size_t s = 0; s < on.size(); ++s) {
    total_on += on[s];
    total_off += off[s];
    if (s == 0) {
      const double excess = std::abs(on[0] - off[0]);
      if (excess > worst_excess) worst_excess = excess, worst = 0;
      continue;
    }
    held_on += std::min(on[s], cap_on);
    held_off += std::min(off[s], cap_off);
    const double excess = std::max(on[s] - cap_on, off[s] - cap_off);
    if (excess > worst_excess) worst_excess = excess, worst = static_cast<int>(s);
  }
  const bool faster_off = total_off < total_on;
  const bool held_faster_off = held_off < held_on;
  return faster_off != held_faster_off ? worst : -1;
}

}  // namespace ts::app
