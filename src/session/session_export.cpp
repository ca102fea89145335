#include "session/session_export.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

#include "session/replay_codec.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace ts {
namespace fs = std::filesystem;

using nlohmann::json;

namespace {

// ---- replay data: what a reopened session's panels draw from ----

// JSON has no infinity: a non-finite number is written as a string.
json number(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

json beam_state_to_json(const BeamSearchState& s) {
  json beams = json::array();
  for (const Beam& b : s.beams) {
    json lp = json::array();
    for (float v : b.token_log_probs) lp.push_back(number(v));
    beams.push_back(
        {{"tokens", b.tokens}, {"token_log_probs", lp}, {"sum", number(b.sum_log_prob)}});
  }
  json finished = json::array();
  for (const BeamHypothesis& h : s.finished) {
    json lp = json::array();
    for (float v : h.token_log_probs) lp.push_back(number(v));
    finished.push_back({{"tokens", h.tokens},
                        {"token_log_probs", lp},
                        {"sum", number(h.sum_log_prob)},
                        {"score", number(h.score)},
                        {"eos", h.ended_by_eos},
                        {"len", h.generated_len}});
  }
  return {{"beams", beams},
          {"finished", finished},
          {"worst", number(s.worst_finished_score)},
          {"done", s.done},
          {"steps", s.steps}};
}

json beam_replay(const BeamStep& b) {
  json candidates = json::array();
  for (const BeamCandidate& c : b.candidates)
    candidates.push_back({{"parent", c.parent},
                          {"token", c.token},
                          {"log_prob", number(c.log_prob)},
                          {"sum", number(c.sum_log_prob)},
                          {"fate", static_cast<int>(c.fate)},
                          {"new_beam", c.new_beam}});
  BeamSearchState only_final;
  only_final.finished = b.final;
  return {{"candidates", candidates},
          {"before", b.before ? beam_state_to_json(*b.before) : json(nullptr)},
          {"after", b.after ? beam_state_to_json(*b.after) : json(nullptr)},
          {"final", beam_state_to_json(only_final)["finished"]}};
}

json contrastive_replay(const ContrastiveStep& c) {
  json candidates = json::array();
  for (const ContrastiveCandidate& k : c.candidates)
    candidates.push_back({{"token", k.token},
                          {"prob", number(k.prob)},
                          {"penalty", number(k.penalty)},
                          {"similar_pos", k.similar_pos},
                          {"score", number(k.score)}});
  return {{"k", c.k},
          {"alpha", c.alpha},
          {"chosen", c.chosen},
          {"positions", c.positions},
          {"candidates", candidates},
          {"similarity", replay::pack_f32(c.similarity)}};
}

json cost_json(const StepCost& c) {
  return {{"flops", c.flops},
          {"weight_bytes", c.weight_bytes},
          {"kv_read_bytes", c.kv_read_bytes},
          {"kv_write_bytes", c.kv_write_bytes}};
}

json packed_rows(const std::vector<std::vector<float>>& rows) {
  json out = json::array();
  for (const auto& row : rows) out.push_back(replay::pack_f32(row));
  return out;
}

// A speculative round whole: the drafts and their verdicts, both sides'
// rows (exact), the caches before and after, the cost of each side.
json spec_replay(const SpecRound& r) {
  json drafts = json::array();
  for (const SpecDraftToken& d : r.drafts)
    drafts.push_back({{"token", d.token},
                      {"q", number(d.q)},
                      {"p", number(d.p)},
                      {"ratio", number(d.ratio)},
                      {"uniform", number(d.uniform)},
                      {"target_choice", d.target_choice},
                      {"checked", d.checked},
                      {"accepted", d.accepted}});
  return {{"gamma_planned", r.gamma_planned},
          {"gamma", r.gamma},
          {"clamp_reason", r.clamp_reason},
          {"gamma_next", r.gamma_next},
          {"sampled", r.sampled},
          {"drafts", drafts},
          {"draft_logits", packed_rows(r.draft_logits)},
          {"target_logits", packed_rows(r.target_logits)},
          {"accepted", r.accepted},
          {"next_token", r.next_token},
          {"next", static_cast<int>(r.next)},
          {"next_uniform", number(r.next_uniform)},
          {"residual", replay::pack_f32(r.residual)},
          {"residual_fallback", r.residual_fallback},
          {"committed", r.committed},
          {"first_index", r.first_index},
          {"target_before", r.target_before},
          {"target_after", r.target_after},
          {"draft_before", r.draft_before},
          {"draft_after", r.draft_after},
          {"target_slots_released", r.target_slots_released},
          {"draft_slots_released", r.draft_slots_released},
          {"target_blocks_freed", r.target_blocks_freed},
          {"draft_blocks_freed", r.draft_blocks_freed},
          {"draft_passes", r.draft_passes},
          {"draft_tokens_fed", r.draft_tokens_fed},
          {"draft_seconds", number(r.draft_seconds)},
          {"draft_cost", cost_json(r.draft_cost)},
          {"verify_seconds", number(r.verify_seconds)},
          {"verify_cost", cost_json(r.verify_cost)}};
}

// A DoLa step whole: the candidate layers, the premature one, the kept
// tokens and the contrast the choice ran on (exact; -inf where filtered).
json dola_replay(const DolaStep& d) {
  json divergence = json::array();
  for (float v : d.divergence) divergence.push_back(number(v));
  json top = json::array();
  for (const DolaToken& t : d.top)
    top.push_back({{"token", t.token},
                   {"final_logp", number(t.final_logp)},
                   {"premature_logp", number(t.premature_logp)},
                   {"contrast", number(t.contrast)},
                   {"final_rank", t.final_rank}});
  return {{"candidate_layers", d.candidate_layers},
          {"divergence", divergence},
          {"premature_layer", d.premature_layer},
          {"kept", d.kept},
          {"top", top},
          {"contrast", replay::pack_f32(d.contrast)}};
}

// A 0/1 byte mask as a string of '0' and '1' (a pass's n x n attention mask
// is up to tens of thousands of entries: one character each).
std::string bits(const std::vector<uint8_t>& v) {
  std::string out(v.size(), '0');
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i]) out[i] = '1';
  return out;
}

// A lookahead or prompt-lookup pass whole: what it fed (tokens, positions,
// mask, where the candidates and the window sit), the window before it and
// its Jacobi step, the pool's size, the verdict (for sampled verification
// the tokens tried and their uniforms), the committed tokens, each verified
// row's logits and distribution (exact), the slots written and the cost.
json lookahead_replay(const LookaheadPass& p) {
  const LookaheadPassLayout& l = p.layout;
  const LookaheadVerdict& v = p.verdict;
  return {{"prompt_lookup", p.prompt_lookup},
          {"start_pos", p.start_pos},
          {"first_index", p.first_index},
          {"layout",
           {{"tokens", l.tokens},
            {"positions", l.positions},
            {"mask", bits(l.mask)},
            {"candidates", l.candidates},
            {"candidate_row", l.candidate_row},
            {"window_row", l.window_row},
            {"window_rows", l.window_rows},
            {"window_cols", l.window_cols}}},
          {"verdict",
           {{"committed", v.committed},
            {"matched", v.matched},
            {"candidate", v.candidate},
            {"kept_rows", v.kept_rows},
            {"tried", v.tried},
            {"uniforms", v.uniforms}}},
          {"committed", p.committed},
          {"window",
           {{"rows", p.window.rows},
            {"cols", p.window.cols},
            {"tokens", p.window.tokens},
            {"changed", bits(p.window.changed)}}},
          {"window_outputs", p.window_outputs},
          {"pool_size", p.pool_size},
          {"new_ngrams", p.new_ngrams},
          {"slots", p.slots},
          {"logits", packed_rows(p.logits)},
          {"probs", packed_rows(p.probs)},
          {"seconds", number(p.seconds)},
          {"cost", cost_json(p.cost)}};
}

// The banned-words lists the records point at, each written once.
std::vector<const BannedTokens*> banned_lists(const Session& session) {
  std::vector<const BannedTokens*> lists;
  auto note = [&](const LaneStep* ls) {
    if (ls && ls->banned_words &&
        std::find(lists.begin(), lists.end(), ls->banned_words.get()) == lists.end())
      lists.push_back(ls->banned_words.get());
  };
  for (const StepTracePtr& s : session.history())
    for (const LaneStep& ls : s->lanes) note(&ls);
  for (const Lane& l : session.lanes()) note(l.branch_record.get());
  return lists;
}

// Everything of a record that the step JSON does not already hold exactly:
// the context, every logit (float32, exact), the attention (half floats),
// the step index, the banned-words list, the whole beam or contrastive step.
json lane_replay(const LaneStep& ls, const std::vector<const BannedTokens*>& lists,
                 bool attention) {
  json layers = json::array();
  if (attention)
    for (const auto& layer : ls.attention)
      layers.push_back(layer ? json(replay::pack_f16(*layer)) : json(nullptr));
  int banned = -1;
  for (size_t i = 0; i < lists.size(); ++i)
    if (lists[i] == ls.banned_words.get()) banned = static_cast<int>(i);
  json j = {{"lane", ls.lane},
            {"input_tokens", ls.input_tokens},
            {"start_pos", ls.start_pos},
            {"slots_written", ls.slots_written},
            {"blocks_copied", ls.blocks_copied},
            {"context_ids", ls.context_ids},
            {"strategy", format_strategy(ls.params)},
            {"step_index", ls.step_index},
            {"chosen_token", ls.chosen_token},
            {"chosen_prob", number(ls.chosen_prob)},
            {"uniform", ls.uniform},
            {"kept_tokens", ls.kept_tokens},
            {"entropy", number(ls.entropy)},
            {"banned_words", banned},
            {"logits", replay::pack_f32(ls.logits)},
            {"attention", layers}};
  if (ls.beam) j["beam"] = beam_replay(*ls.beam);
  if (ls.contrastive) j["contrastive"] = contrastive_replay(*ls.contrastive);
  if (ls.spec) j["spec"] = spec_replay(*ls.spec);
  if (ls.dola) j["dola"] = dola_replay(*ls.dola);
  if (ls.lookahead) j["lookahead"] = lookahead_replay(*ls.lookahead);
  return j;
}

json step_replay(const StepTrace& step, const std::vector<const BannedTokens*>& lists,
                 bool attention) {
  json lanes = json::array();
  for (const LaneStep& ls : step.lanes) lanes.push_back(lane_replay(ls, lists, attention));
  json owners = json::array();
  for (const KvSequenceOwner& o : step.kv_owners)
    owners.push_back({{"seq", o.seq}, {"lane", o.lane}, {"beam", o.beam}});
  return {{"lanes", lanes}, {"kv_ref_counts", step.kv_after.ref_counts}, {"kv_owners", owners}};
}

// The step as `--json` has always written it, with its replay data, and the
// attention only in the replay's packed form (the float arrays were 4-5 times larger).
json step_document(const StepTrace& step, const std::vector<const BannedTokens*>& lists,
                   const JsonExportOptions& options) {
  JsonExportOptions plain = options;
  plain.attention = false;
  json j = step_to_json(step, plain);
  j["replay"] = step_replay(step, lists, options.attention);
  return j;
}

json replay_head(const Session& session, const std::vector<const BannedTokens*>& lists,
                 bool attention) {
  const Tokenizer& tok = session.tokenizer();
  json vocabulary = json::array();
  for (int id = 0; id < tok.token_count(); ++id)
    vocabulary.push_back(bytes_to_gpt2_unicode(tok.token_bytes(id)));
  // How the tokenizer splits and starts prompts (a reopened session's
  // tokenizer is rebuilt from the vocabulary and this); padding: model ids
  // past the vocabulary that no token maps to.
  const json tokenizer = {{"split_patterns", tok.split_patterns()},
                          {"added_tokens", tok.added_token_ids()},
                          {"bos_id", tok.bos_id()},
                          {"add_bos", tok.adds_bos()},
                          {"nfc_normalizer", tok.nfc_normalizer()},
                          {"padding", tok.vocab_size() - tok.token_count()}};
  json banned = json::array();
  for (const BannedTokens* b : lists)
    banned.push_back({{"source", b->source}, {"entries", b->entries}, {"sequences", b->sequences}});
  json branch_records = json::array();
  for (const Lane& l : session.lanes())
    branch_records.push_back(l.branch_record ? lane_replay(*l.branch_record, lists, attention)
                                             : json(nullptr));
  return {{"logits", "float32 little-endian, base64: exact"},
          {"attention",
           "IEEE half float little-endian, base64, [head][row][context] per layer: relative "
           "error at most 2^-11, absolute at most 2^-25"},
          {"max_new_tokens", session.options().max_new_tokens},
          {"vocabulary", vocabulary},
          {"tokenizer", tokenizer},
          {"banned_words", banned},
          {"branch_records", branch_records}};
}

// Everything but the steps (the key that sorts last: "steps").
json session_head_to_json(const Session& session) {
  const Tokenizer& tok = session.tokenizer();
  const ModelConfig& cfg = session.engine().config();
  json prompt_tokens = json::array();
  for (const TokenSpan& t : session.prompt_tokens())
    prompt_tokens.push_back({{"id", t.id},
                             {"text", tok.token_bytes(t.id)},
                             {"byte_begin", t.byte_begin},
                             {"byte_end", t.byte_end}});
  json lanes = json::array();
  for (const Lane& lane : session.lanes())
    lanes.push_back({{"id", lane.id},
                     {"strategy", format_strategy(lane.params)},
                     {"generated", lane.generated},
                     {"text", tok.decode(lane.generated)},
                     {"stop_reason", lane.stop_reason},
                     {"parent", lane.parent},
                     {"branch_step", lane.branch_step},
                     {"first_step", lane.first_step},
                     {"closed", lane.closed}});
  return {{"format", kSessionFormat},
          {"model",
           {{"vocab_size", cfg.vocab_size},
            {"n_ctx", cfg.n_ctx},
            {"n_embd", cfg.n_embd},
            {"n_head", cfg.n_head},
            {"n_layer", cfg.n_layer},
            {"family", family_name(cfg.family)},
            {"n_kv_head", cfg.kv_heads()},
            {"head_dim", cfg.head_dim()},
            {"n_inner", cfg.mlp_dim()},
            {"tied_embeddings", cfg.tied_embeddings},
            {"rope_theta", cfg.rope_theta},
            {"norm_epsilon", cfg.layer_norm_epsilon},
            {"parameters", cfg.parameter_count()},
            {"source", session.engine().weights().source}}},
          {"backend", session.engine().backend().name()},
          {"device", session.engine().backend().device_name()},
          {"kv_cache", session.options().kv_cache},
          {"prompt", session.prompt_text()},
          {"prompt_tokens", prompt_tokens},
          {"lanes", lanes},
          {"state", state_name(session.state())}};
}

std::string dump(const json& j) {
  // Token pieces can be partial UTF-8: replace rather than throw while dumping.
  return j.dump(1, ' ', false, json::error_handler_t::replace);
}

std::string reason() { return std::strerror(errno); }

}  // namespace

json session_to_json(const Session& session, const JsonExportOptions& options) {
  const auto lists = banned_lists(session);
  json doc = session_head_to_json(session);
  doc["replay"] = replay_head(session, lists, options.attention);
  json steps = json::array();
  for (const StepTracePtr& s : session.history())
    steps.push_back(step_document(*s, lists, options));
  doc["steps"] = std::move(steps);
  return doc;
}

void write_session_json(const Session& session, const fs::path& file,
                        const JsonExportOptions& options, const SessionFileOptions& file_options) {
  std::error_code ec;
  // A regular (or new) file, links followed, goes through a temporary file
  // beside it and a rename; a device, a FIFO or an open file such as
  // /dev/stdout cannot be replaced, so it is appended to where it stands.
  const WriteTarget where = check_write_target(file);
  const bool atomic = where.replace;
  const fs::path target =
      atomic ? fs::path(where.path.string() + ".tmp-" + std::to_string(::getpid())) : where.path;
  std::ofstream out(target, atomic ? std::ios::binary : std::ios::binary | std::ios::app);
  if (!out) throw Error(file.string() + ": cannot open for writing (" + reason() + ")");
  auto abandon = [&] {
    out.close();
    if (atomic) fs::remove(target, ec);
  };
  try {
    const auto lists = banned_lists(session);
    json head = session_head_to_json(session);
    head["interrupted"] = file_options.interrupted;
    head["replay"] = replay_head(session, lists, options.attention);
    std::string text = dump(head);
    text.pop_back();  // the closing brace: the steps follow
    out << text << ",\n \"steps\": [";
    bool first = true;
    for (const StepTracePtr& s : session.history()) {
      if (file_options.cancel && file_options.cancel()) throw ExportCancelled();
      out << (first ? "\n" : ",\n") << dump(step_document(*s, lists, options));
      first = false;
      if (!out) break;
    }
    out << "\n ]\n}\n";
    out.flush();
  } catch (...) {
    abandon();
    throw;
  }
  if (!out) {
    const std::string why = reason();
    abandon();
    throw Error(file.string() + ": write failed (" + why + ")");
  }
  out.close();
  if (!atomic) return;
  if (file_options.cancel && file_options.cancel()) {
    fs::remove(target, ec);
    throw ExportCancelled();
  }
  fs::rename(target, where.path, ec);
  if (ec) {
    fs::remove(target, ec);
    throw Error(file.string() + ": cannot write (" + ec.message() + ")");
  }
}

}  // namespace ts
