#include "trace/json_export.h"

#include <algorithm>
#include <cmath>

#include "sampling/distribution.h"
#include "sampling/sampling_pipeline.h"

namespace ts {

using nlohmann::json;

json kv_occupancy_to_json(const KvOccupancy& kv) {
  json seqs = json::array();
  for (const SequenceOccupancy& s : kv.sequences)
    seqs.push_back({{"id", s.id},
                    {"tokens", s.tokens},
                    {"block_table", s.block_table},
                    {"wasted_slots", s.wasted_slots}});
  return {{"blocks_total", kv.blocks_total},
          {"blocks_used", kv.blocks_used},
          {"blocks_shared", kv.blocks_shared},
          {"blocks_free", kv.blocks_free},
          {"block_size", kv.block_size},
          {"bytes_per_layer_used", kv.bytes_per_layer_used},
          {"bytes_per_layer_capacity", kv.bytes_per_layer_capacity},
          {"wasted_slots", kv.wasted_slots},
          {"sequences", seqs}};
}

namespace {

json params_to_json(const SamplingParams& p) {
  return {{"strategy", format_strategy(p)},
          {"do_sample", p.do_sample},
          {"temperature", p.temperature},
          {"top_k", p.top_k},
          {"top_p", p.top_p},
          {"min_p", p.min_p},
          {"repetition_penalty", p.repetition_penalty},
          {"seed", p.seed},
          {"num_beams", p.num_beams},
          {"length_penalty", p.length_penalty},
          {"early_stopping", early_stopping_name(p.early_stopping)},
          {"contrastive_k", p.contrastive_k},
          {"penalty_alpha", p.penalty_alpha},
          {"spec_gamma", p.spec_gamma == kSpecGammaAuto ? json("auto") : json(p.spec_gamma)},
          {"dola_layers",
           p.dola() ? json(dola_layers_text(p.dola_mode, p.dola_layers)) : json(nullptr)},
          {"lookahead", p.lookahead_on ? json({{"window", p.lookahead.window},
                                               {"ngram", p.lookahead.ngram},
                                               {"verify", p.lookahead.verify}})
                                       : json(nullptr)},
          {"prompt_lookup", p.prompt_lookup_on ? json({{"tokens", p.prompt_lookup.tokens},
                                                       {"max_ngram", p.prompt_lookup.max_ngram}})
                                               : json(nullptr)}};
}

// A lookahead or prompt-lookup pass: what was fed (x, the candidates, the
// window, with positions), the candidates and which one was accepted how
// far, the window's Jacobi step and the pool, the tokens committed.
json lookahead_pass_to_json(const LookaheadPass& p) {
  json j = {{"kind", p.prompt_lookup ? "prompt_lookup" : "lookahead"},
            {"start_pos", p.start_pos},
            {"first_index", p.first_index},
            {"fed_tokens", p.layout.tokens},
            {"fed_positions", p.layout.positions},
            {"candidates", p.layout.candidates},
            {"candidate_rows", p.layout.candidate_row},
            {"accepted_candidate", p.verdict.candidate},
            {"matched", p.verdict.matched},
            {"kept_rows", p.verdict.kept_rows},
            {"committed", p.committed},
            {"seconds", p.seconds}};
  if (!p.verdict.tried.empty()) {
    j["tried"] = p.verdict.tried;
    j["uniforms"] = p.verdict.uniforms;
  }
  if (!p.prompt_lookup) {
    j["window_row"] = p.layout.window_row;
    j["window"] = {{"rows", p.window.rows}, {"cols", p.window.cols}, {"tokens", p.window.tokens}};
    j["window_outputs"] = p.window_outputs;
    j["pool_size"] = p.pool_size;
    j["new_ngrams"] = p.new_ngrams;
  }
  return j;
}

// A DoLa step: the candidate layers with their divergences (HF's, summed
// over the vocabulary), the premature layer, and the tokens the relative-top
// filter kept (at most kDolaTopTokens, highest contrast first).
json dola_step_to_json(const DolaStep& d, int chosen_token) {
  json layers = json::array();
  for (size_t i = 0; i < d.candidate_layers.size(); ++i)
    layers.push_back({{"layer", d.candidate_layers[i]},
                      {"divergence", d.divergence[i]},
                      {"premature", d.candidate_layers[i] == d.premature_layer}});
  json tokens = json::array();
  for (const DolaToken& t : d.top)
    tokens.push_back({{"token", t.token},
                      {"final_log_prob", t.final_logp},
                      {"premature_log_prob", t.premature_logp},
                      {"contrast", t.contrast},
                      {"final_rank", t.final_rank},
                      {"chosen", t.token == chosen_token}});
  return {{"premature_layer", d.premature_layer},
          {"candidate_layers", layers},
          {"kept", d.kept},
          {"top_tokens", tokens}};
}

// A contrastive step: every candidate with its probability, degeneration
// penalty (and the earlier position and token it is most similar to) and
// score; `chosen` indexes candidates.
json contrastive_step_to_json(const ContrastiveStep& c, const std::vector<int>& context) {
  json candidates = json::array();
  for (size_t i = 0; i < c.candidates.size(); ++i) {
    const ContrastiveCandidate& cand = c.candidates[i];
    candidates.push_back({{"token", cand.token},
                          {"prob", cand.prob},
                          {"penalty", cand.penalty},
                          {"similar_pos", cand.similar_pos},
                          {"similar_token", cand.similar_pos < static_cast<int>(context.size())
                                                ? json(context[cand.similar_pos])
                                                : json(nullptr)},
                          {"score", cand.score},
                          {"chosen", static_cast<int>(i) == c.chosen}});
  }
  return {{"k", c.k}, {"alpha", c.alpha}, {"chosen", c.chosen}, {"candidates", candidates}};
}

json cost_to_json(double seconds, const StepCost& c) {
  return {{"seconds", seconds},
          {"flops", c.flops},
          {"bytes", c.bytes()},
          {"weight_bytes", c.weight_bytes},
          {"kv_read_bytes", c.kv_read_bytes},
          {"kv_write_bytes", c.kv_write_bytes}};
}

// A speculative round: each draft token with q, p, p/q, u and its verdict,
// the target's next token (correction or bonus), the residual's top entries
// at a rejection, the tokens committed, the KV work and each side's cost.
json spec_round_to_json(const SpecRound& r) {
  json drafts = json::array();
  for (const SpecDraftToken& d : r.drafts) {
    json j = {{"token", d.token},
              {"q", d.q},
              {"p", d.p},
              {"target_choice", d.target_choice},
              {"checked", d.checked},
              {"accepted", d.accepted}};
    if (r.sampled && d.checked) {
      j["ratio"] = d.ratio;
      j["uniform"] = d.uniform;
    }
    drafts.push_back(std::move(j));
  }
  json residual = nullptr;
  if (!r.residual.empty()) {
    residual = json::array();
    for (int id : top_n(r.residual, 10))
      if (r.residual[id] > 0) residual.push_back({{"id", id}, {"prob", r.residual[id]}});
  }
  return {{"gamma_planned", r.gamma_planned},
          {"gamma", r.gamma},
          {"clamp_reason", r.clamp_reason},
          {"gamma_next", r.gamma_next},
          {"sampled", r.sampled},
          {"drafts", drafts},
          {"verify_rows", r.target_logits.size()},
          {"accepted", r.accepted},
          {"next_token", r.next_token},
          {"next", spec_next_name(r.next)},
          {"next_uniform", r.next_uniform},
          {"residual_top", residual},
          {"residual_fallback", r.residual_fallback},
          {"committed", r.committed},
          {"first_index", r.first_index},
          {"target_kv",
           {{"before", r.target_before},
            {"after", r.target_after},
            {"slots_released", r.target_slots_released},
            {"blocks_freed", r.target_blocks_freed}}},
          {"draft_kv",
           {{"before", r.draft_before},
            {"after", r.draft_after},
            {"slots_released", r.draft_slots_released},
            {"blocks_freed", r.draft_blocks_freed}}},
          {"draft_cost", cost_to_json(r.draft_seconds, r.draft_cost)},
          {"draft_passes", r.draft_passes},
          {"verify_cost", cost_to_json(r.verify_seconds, r.verify_cost)}};
}

json hypothesis_to_json(const BeamHypothesis& h) {
  return {{"tokens", h.tokens},
          {"sum_log_prob", h.sum_log_prob},
          {"score", h.score},
          {"ended_by_eos", h.ended_by_eos},
          {"generated_len", h.generated_len}};
}

json beam_step_to_json(const BeamStep& b) {
  json candidates = json::array();
  for (const BeamCandidate& c : b.candidates)
    candidates.push_back({{"parent", c.parent},
                          {"token", c.token},
                          {"log_prob", c.log_prob},
                          {"sum_log_prob", c.sum_log_prob},
                          {"fate", candidate_fate_name(c.fate)},
                          {"new_beam", c.new_beam}});
  json beams = json::array();
  for (const Beam& beam : b.after->beams)
    beams.push_back({{"tokens", beam.tokens}, {"sum_log_prob", beam.sum_log_prob}});
  json finished = json::array();
  for (const BeamHypothesis& h : b.after->finished) finished.push_back(hypothesis_to_json(h));
  json final = json::array();
  for (const BeamHypothesis& h : b.final) final.push_back(hypothesis_to_json(h));
  return {{"candidates", candidates},
          {"beams", beams},
          {"finished", finished},
          {"done", b.after->done},
          {"final", final}};
}

// JSON has no infinity: removed tokens are written as null.
json finite_or_null(float v) { return std::isfinite(v) ? json(v) : json(nullptr); }

json lane_to_json(const LaneStep& ls, const JsonExportOptions& options) {
  const std::vector<float> probs = softmax(ls.logits);
  json top = json::array();
  for (int id : top_n(ls.logits, options.top_n))
    top.push_back({{"id", id}, {"logit", ls.logits[id]}, {"prob", probs[id]}});
  // The stages are recomputed from the stored logits (a DoLa lane's: its
  // contrast scores): sample_next is pure.
  const SamplingRecord rec = sample_next(choice_logits(ls), choice_context(ls), ls.params,
                                         ls.step_index, ls.banned_words.get());
  json stages = json::array();
  for (const StageRecord& s : rec.stages) {
    json stage = {
        {"name", s.name}, {"active", s.active}, {"kept", s.kept}, {"removed_here", s.removed_here}};
    // Which tokens the list removed (the filters' removals can be thousands).
    if (s.name == "banned_words") stage["removed_ids"] = s.removed_ids_here;
    stages.push_back(std::move(stage));
  }
  json banned = nullptr;
  if (ls.banned_words)
    banned = {{"source", ls.banned_words->source},
              {"entries", ls.banned_words->entries},
              {"sequences", ls.banned_words->sequences.size()}};
  json draw = {{"greedy", rec.draw.greedy},
               {"uniform", rec.draw.uniform},
               {"chosen_token", rec.draw.chosen_token},
               {"chosen_prob", rec.draw.chosen_prob}};
  // A contrastive lane chooses by score among its candidates, not by the
  // pipeline's argmax: the draw is that choice ("contrastive" has the rest).
  // A speculative lane chose its token by verifying a round ("speculative"
  // has the rest), a lookahead or prompt-lookup lane by verifying a pass
  // ("lookahead").
  if (ls.spec || ls.lookahead)
    draw = {{"greedy", !ls.params.do_sample},
            {ls.spec ? "by_speculative_round" : "by_lookahead_pass", true},
            {"uniform", ls.uniform},
            {"chosen_token", ls.chosen_token},
            {"chosen_prob", ls.chosen_prob}};
  if (ls.contrastive)
    draw = {{"greedy", false},
            {"by_contrastive_score", true},
            {"uniform", 0.0},
            {"chosen_token", ls.chosen_token},
            {"chosen_prob", ls.chosen_prob}};
  json j = {{"lane", ls.lane},
            {"input_tokens", ls.input_tokens},
            {"start_pos", ls.start_pos},
            {"slots_written", ls.slots_written},
            {"blocks_copied", ls.blocks_copied},
            {"chosen_token", ls.chosen_token},
            {"chosen_prob", ls.chosen_prob},
            {"entropy_nats", ls.entropy},
            {"kept_tokens", ls.kept_tokens},
            {"params", params_to_json(ls.params)},
            {"banned_words", banned},
            {"top_logits", top},
            {"sampling_stages", stages},
            {"draw", draw}};
  if (ls.beam) j["beam"] = beam_step_to_json(*ls.beam);
  if (ls.contrastive) j["contrastive"] = contrastive_step_to_json(*ls.contrastive, ls.context_ids);
  if (ls.spec) j["speculative"] = spec_round_to_json(*ls.spec);
  if (ls.lookahead) j["lookahead"] = lookahead_pass_to_json(*ls.lookahead);
  if (ls.dola) j["dola"] = dola_step_to_json(*ls.dola, ls.chosen_token);
  if (options.full_logits) {
    json all = json::array();
    for (float v : ls.logits) all.push_back(finite_or_null(v));
    j["logits"] = all;
  }
  if (options.attention) {
    json layers = json::array();
    for (const auto& layer : ls.attention) {
      if (!layer) {
        layers.push_back(nullptr);  // over budget: recomputed on demand, not exported
        continue;
      }
      layers.push_back(*layer);
    }
    j["attention"] = layers;
    j["attention_layout"] = "[layer][head][row][context], flattened per layer";
  }
  return j;
}

}  // namespace

json step_to_json(const StepTrace& step, const JsonExportOptions& options) {
  json lanes = json::array();
  for (const LaneStep& ls : step.lanes) lanes.push_back(lane_to_json(ls, options));
  return {{"index", step.index},
          {"phase", phase_name(step.phase)},
          {"backend", step.backend},
          {"kv_cache", step.kv_cache},
          {"recomputed_tokens", step.recomputed_tokens},
          {"seconds", step.seconds},
          {"flops", step.cost.flops},
          {"bytes", step.cost.bytes()},
          {"weight_bytes", step.cost.weight_bytes},
          {"kv_read_bytes", step.cost.kv_read_bytes},
          {"kv_write_bytes", step.cost.kv_write_bytes},
          {"flops_per_byte", step.cost.intensity()},
          {"kv", kv_occupancy_to_json(step.kv_after)},
          {"lanes", lanes}};
}

}  // namespace ts
