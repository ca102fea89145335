#include "session/speculative_lane.h"

#include <algorithm>

#include "model/token_display.h"
#include "sampling/distribution.h"
#include "sampling/sampling_pipeline.h"
#include "sampling/speculative.h"
#include "util/error.h"

namespace ts {
namespace {

// The lane's warped distribution for one row: the sampling pipeline on the
// row's logits with the row's own context (the repetition penalty and the
// banned words look at it). Greedy lanes also get the pipeline's argmax.
struct Warped {
  std::vector<float> probs;
  int argmax = -1;
};

Warped warp(const std::vector<float>& logits, const std::vector<int>& context,
            const SamplingParams& params, int step_index, const BannedTokens* banned) {
  SamplingRecord rec = sample_next(logits, context, params, step_index, banned);
  Warped w;
  w.probs = std::move(rec.final_probs);
  if (!params.do_sample) w.argmax = rec.draw.chosen_token;
  return w;
}

std::vector<float> row(const std::vector<float>& logits, int r, int vocab) {
  return std::vector<float>(logits.begin() + static_cast<long>(r) * vocab,
                            logits.begin() + static_cast<long>(r + 1) * vocab);
}

}  // namespace

int initial_spec_gamma(const SamplingParams& params) {
  if (!params.speculative()) return 0;
  return params.spec_gamma == kSpecGammaAuto ? kSpecAutoStartGamma : params.spec_gamma;
}

std::string spec_vocab_mismatch(const ModelConfig& target, const ModelConfig& draft,
                                const VocabRoles& roles) {
  if (target.vocab_size == draft.vocab_size) return {};
  return roles.model + ": its vocabulary has " + std::to_string(draft.vocab_size) +
         " tokens but the " + roles.other + "'s has " + std::to_string(target.vocab_size) + "; " +
         roles.need + " that shares the " + roles.other + "'s vocabulary";
}

std::string spec_vocab_mismatch(const Tokenizer& target, const Tokenizer& draft,
                                const VocabRoles& roles) {
  ModelConfig t, d;
  t.vocab_size = target.vocab_size();
  d.vocab_size = draft.vocab_size();
  if (std::string sizes = spec_vocab_mismatch(t, d, roles); !sizes.empty()) return sizes;
  for (int id = 0; id < target.vocab_size(); ++id) {
    const std::string want = target.token_bytes(id), got = draft.token_bytes(id);
    if (want != got)
      return roles.model + ": its token " + std::to_string(id) + " is \"" + display_piece(got) +
             "\" but the " + roles.other + "'s is \"" + display_piece(want) +
             "\" (the first id that differs); " + roles.need +
             " whose tokenizer gives every id the " + roles.other + "'s token";
  }
  return {};
}

LaneStep run_spec_round(const SpecRoundContext& ctx, const Lane& lane,
                        const std::vector<int>& tokens) {
  const SamplingParams& params = lane.params;
  if (!lane.speculative()) throw Error("speculative round: lane is not speculative");
  KvCacheManager& tcache = ctx.target.cache();
  KvCacheManager& dcache = ctx.draft.cache();
  const int vocab = ctx.target.config().vocab_size;
  const int big_l = static_cast<int>(tokens.size()) - 1;  // cached by the target
  if (lane.seq < 0 || tcache.length(lane.seq) != big_l)
    throw Error("speculative round: lane " + std::to_string(lane.id) +
                " has no KV sequence caching its tokens");
  const int generated = static_cast<int>(lane.generated.size());
  const int n_ctx = ctx.target.config().n_ctx;
  const int draft_ctx = ctx.draft.config().n_ctx;

  auto round = std::make_shared<SpecRound>();
  SpecRound& r = *round;
  r.sampled = params.do_sample;
  r.first_index = generated;
  r.gamma_planned = lane.spec_gamma;
  r.gamma = lane.spec_gamma;
  // Clamp γ: the round commits at most γ + 1 tokens, the verify pass puts
  // γ + 1 tokens into the target's context, and the draft's last input
  // (the (γ-1)-th draft) sits at position L + γ - 1 of its own context.
  const int left = ctx.max_new_tokens - generated;
  if (r.gamma > left - 1) {
    r.gamma = left - 1;
    r.clamp_reason = "token limit: " + std::to_string(left) + " tokens left to generate";
  }
  if (r.gamma > n_ctx - big_l - 1) {
    r.gamma = n_ctx - big_l - 1;
    r.clamp_reason = "context end: " + std::to_string(n_ctx - big_l) +
                     " positions left in the target's context of " + std::to_string(n_ctx);
  }
  const int draft_room = lane.draft_seq >= 0 ? draft_ctx - big_l : 0;
  if (r.gamma > draft_room) {
    r.gamma = draft_room;
    r.clamp_reason =
        "the draft's context of " + std::to_string(draft_ctx) + " tokens is full: no more drafting";
  }
  r.gamma = std::max(0, r.gamma);
  const int gamma = r.gamma;

  // ---- draft: γ proposals, one forward each on the draft's own cache ----
  r.draft_before = lane.draft_seq >= 0 ? dcache.length(lane.draft_seq) : 0;
  std::vector<int> draft;
  std::vector<std::vector<float>> q;
  std::vector<std::pair<int, int>> draft_slots;  // (position, slot) written this round
  std::vector<int> context = tokens;
  try {
    if (gamma > 0) {
      std::vector<int> feed(tokens.begin() + r.draft_before, tokens.end());
      for (int i = 0; i < gamma; ++i) {
        const int start = dcache.length(lane.draft_seq);
        ForwardResult res = ctx.draft.forward({ForwardRequest{lane.draft_seq, feed}}, {});
        r.draft_seconds += res.seconds;
        r.draft_cost += res.cost;
        ++r.draft_passes;
        r.draft_tokens_fed += static_cast<int>(feed.size());
        for (size_t k = 0; k < res.plans[0].slots.size(); ++k)
          draft_slots.emplace_back(start + static_cast<int>(k), res.plans[0].slots[k]);
        std::vector<float> logits = std::move(res.outputs[0].logits);
        Warped w = warp(logits, context, params, generated + i, ctx.banned.get());
        const int token =
            params.do_sample
                ? draw_from_probs(w.probs, spec_uniform(params.seed, generated, kSpecDraftSlot + i))
                : w.argmax;
        SpecDraftToken d;
        d.token = token;
        d.q = w.probs[token];
        r.drafts.push_back(d);
        r.draft_logits.push_back(std::move(logits));
        q.push_back(std::move(w.probs));
        draft.push_back(token);
        context.push_back(token);
        feed = {token};
      }
    }
  } catch (...) {
    if (lane.draft_seq >= 0 && dcache.length(lane.draft_seq) > r.draft_before)
      dcache.truncate(lane.draft_seq, r.draft_before);
    throw;
  }

  // ---- verify: one target forward over the pending token and the drafts ----
  std::vector<int> inputs = {tokens.back()};
  inputs.insert(inputs.end(), draft.begin(), draft.end());
  ForwardOptions vopts;
  vopts.all_logits = true;
  vopts.record_attention = ctx.record_attention;
  vopts.record_residuals = true;
  LaneStep ls;
  try {
    ForwardResult res = ctx.target.forward({ForwardRequest{lane.seq, inputs}}, vopts);
    r.verify_seconds = res.seconds;
    r.verify_cost = res.cost;
    EntryOutput& out = res.outputs[0];
    std::vector<std::vector<float>> p;
    std::vector<int> choice;
    for (int i = 0; i <= gamma; ++i) {
      std::vector<float> logits = row(out.logits, i, vocab);
      const std::vector<int> row_context(context.begin(), context.begin() + big_l + 1 + i);
      Warped w = warp(logits, row_context, params, generated + i, ctx.banned.get());
      choice.push_back(w.argmax);
      p.push_back(std::move(w.probs));
      r.target_logits.push_back(std::move(logits));
    }
    // The verdict.
    SpecVerdict v;
    if (params.do_sample) {
      std::vector<double> accept_u;
      for (int i = 0; i < gamma; ++i)
        accept_u.push_back(spec_uniform(params.seed, generated, kSpecAcceptSlot + i));
      r.next_uniform = spec_uniform(params.seed, generated, kSpecFinalSlot);
      v = verify_sampled(p, q, draft, accept_u, r.next_uniform);
    } else {
      v = verify_greedy(draft, choice);
    }
    r.accepted = v.accepted;
    r.next_token = v.next_token;
    r.next = v.next;
    r.residual = std::move(v.residual);
    r.residual_fallback = v.residual_fallback;
    for (int i = 0; i < gamma; ++i) {
      SpecDraftToken& d = r.drafts[i];
      d.p = p[i][d.token];
      d.target_choice = choice[i];
      d.checked = params.do_sample ? i < static_cast<int>(v.ratios.size()) : i <= v.accepted;
      d.accepted = i < v.accepted;
      if (params.do_sample && d.checked) {
        d.ratio = v.ratios[i];
        d.uniform = v.uniforms[i];
      }
    }
    // Committed: the accepted drafts and the target's token, cut after an
    // end of text (generation stops there, as it would token by token).
    r.committed.assign(draft.begin(), draft.begin() + v.accepted);
    r.committed.push_back(v.next_token);
    if (ctx.eot_id >= 0) {
      auto eot = std::find(r.committed.begin(), r.committed.end(), ctx.eot_id);
      if (eot != r.committed.end()) r.committed.erase(eot + 1, r.committed.end());
    }
    const int m = static_cast<int>(r.committed.size());
    if (r.gamma_planned > 0 && params.spec_gamma == kSpecGammaAuto)
      r.gamma_next = next_auto_gamma(r.gamma_planned, v.accepted);
    else
      r.gamma_next = lane.spec_gamma;

    // The record: the verify pass's inputs and attention, the row of the
    // round's last committed token.
    const int last_row = m - 1;
    ls.lane = lane.id;
    ls.input_tokens = inputs;
    ls.start_pos = big_l;
    ls.slots_written = res.plans[0].slots;
    ls.blocks_copied = static_cast<int>(res.plans[0].copies.size());
    ls.context_ids = context;
    ls.logits = r.target_logits[last_row];
    ls.entropy = entropy_nats(softmax(ls.logits));
    if (last_row == gamma) ls.residuals = std::move(out.residuals);  // recorded for the last row
    ls.attention.resize(out.attention.size());
    for (size_t l = 0; l < out.attention.size(); ++l)
      if (!out.attention[l].empty())
        ls.attention[l] = std::make_shared<const std::vector<float>>(std::move(out.attention[l]));
    ls.params = params;
    ls.step_index = generated + last_row;
    ls.chosen_token = r.committed.back();
    ls.chosen_prob = p[last_row][ls.chosen_token];
    ls.uniform = !params.do_sample       ? 0.0
                 : last_row < v.accepted ? r.drafts[last_row].uniform
                                         : r.next_uniform;
    ls.kept_tokens = static_cast<int>(
        std::count_if(p[last_row].begin(), p[last_row].end(), [](float x) { return x > 0.0f; }));
    ls.banned_words = ctx.banned;

    // Truncate both caches to the accepted length: the target keeps its
    // cached prefix, the pending token and the accepted drafts but the last
    // committed token (which the next round feeds); the draft keeps at most
    // as much.
    const int keep = big_l + m;
    r.target_before = big_l;
    for (int k = m; k <= gamma; ++k) r.target_slots_released.push_back(res.plans[0].slots[k]);
    const int tfree = tcache.free_blocks();
    tcache.truncate(lane.seq, keep);
    r.target_blocks_freed = tcache.free_blocks() - tfree;
    r.target_after = keep;
    if (lane.draft_seq >= 0) {
      const int dlen = dcache.length(lane.draft_seq);
      const int dkeep = std::min(dlen, keep);
      for (const auto& [pos, slot] : draft_slots)
        if (pos >= dkeep) r.draft_slots_released.push_back(slot);
      const int dfree = dcache.free_blocks();
      dcache.truncate(lane.draft_seq, dkeep);
      r.draft_blocks_freed = dcache.free_blocks() - dfree;
      r.draft_after = dkeep;
    }
  } catch (...) {
    if (tcache.length(lane.seq) > big_l) tcache.truncate(lane.seq, big_l);
    if (lane.draft_seq >= 0 && dcache.length(lane.draft_seq) > r.draft_before)
      dcache.truncate(lane.draft_seq, r.draft_before);
    throw;
  }
  ls.spec = std::move(round);
  return ls;
}

void undo_spec_caches(Engine& target, Engine& draft, const Lane& lane, const LaneStep& record) {
  if (!record.spec) return;
  if (lane.seq >= 0 && target.cache().contains(lane.seq) &&
      target.cache().length(lane.seq) > record.start_pos)
    target.cache().truncate(lane.seq, record.start_pos);
  if (lane.draft_seq >= 0 && draft.cache().contains(lane.draft_seq) &&
      draft.cache().length(lane.draft_seq) > record.spec->draft_before)
    draft.cache().truncate(lane.draft_seq, record.spec->draft_before);
}

void commit_spec_round(Lane& lane, const LaneStep& record) {
  const SpecRound& r = *record.spec;
  lane.generated.insert(lane.generated.end(), r.committed.begin(), r.committed.end());
  lane.spec_gamma = r.gamma_next;
}

void uncommit_spec_round(Lane& lane, const LaneStep& record) {
  const SpecRound& r = *record.spec;
  lane.generated.resize(static_cast<size_t>(r.first_index));
  lane.spec_gamma = r.gamma_planned;
}

std::string spec_stop_reason(const Lane& lane, const LaneStep& record, int prompt_tokens,
                             int max_new_tokens, int n_ctx, int eot_id) {
  if (eot_id >= 0 && record.chosen_token == eot_id) return "end of text";
  if (static_cast<int>(lane.generated.size()) >= max_new_tokens)
    return "token limit (" + std::to_string(max_new_tokens) + ")";
  // The last committed token was chosen at context prompt + generated - 1
  // (the same rule as a plain lane's step).
  if (prompt_tokens + static_cast<int>(lane.generated.size()) - 1 >= n_ctx)
    return "context end: the model holds " + std::to_string(n_ctx) + " tokens";
  return {};
}

}  // namespace ts
