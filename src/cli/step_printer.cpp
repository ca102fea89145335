#include "cli/step_printer.h"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "engine/logit_lens.h"
#include "model/token_display.h"
#include "sampling/banned_words.h"
#include "sampling/distribution.h"

namespace ts::cli {
namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string quoted_piece(const Tokenizer& tok, int id) {
  return "\"" + display_piece(tok.token_bytes(id)) + "\"";
}

// The ids the lane's banned-words stage removes at this step (sorted; empty
// when the stage is off): the model's own top lists may still rank them, and
// they are printed masked there (mask_banned_piece), like the stage's list.
std::vector<int> banned_here(const LaneStep& ls) {
  return ls.banned_words ? banned_ids_for_context(*ls.banned_words, choice_context(ls))
                         : std::vector<int>{};
}

std::string quoted_piece(const Tokenizer& tok, int id, const std::vector<int>& masked) {
  if (!std::binary_search(masked.begin(), masked.end(), id)) return quoted_piece(tok, id);
  return "\"" + display_piece(mask_banned_piece(tok.token_bytes(id))) + "\"";
}

// The banned-words stage of one lane's step: how many tokens it removed, the
// model's probability mass on them, and the most likely of them, masked
// (mask_banned_piece: a listed word is not printed whole).
void print_banned_words(std::ostream& out, const Tokenizer& tok, const LaneStep& ls,
                        const std::vector<float>& probs) {
  if (!ls.banned_words) return;
  std::vector<int> removed = banned_here(ls);
  double mass = 0;
  for (int id : removed) mass += probs[id];
  std::sort(removed.begin(), removed.end(),
            [&](int a, int b) { return probs[a] != probs[b] ? probs[a] > probs[b] : a < b; });
  out << "    banned words: " << removed.size() << " tokens removed (model p " << fmt("%.4f", mass)
      << ")";
  const size_t shown = std::min<size_t>(removed.size(), 3);
  if (shown > 0) out << ", most likely:";
  for (size_t i = 0; i < shown; ++i)
    out << " \"" << display_piece(mask_banned_piece(tok.token_bytes(removed[i]))) << "\" "
        << fmt("%.4f", probs[removed[i]]);
  out << "\n";
}

// One line per candidate: probability, degeneration penalty (and the
// earlier token it is most similar to), score; the winner marked.
void print_contrastive(std::ostream& out, const Tokenizer& tok, const LaneStep& ls) {
  const ContrastiveStep& c = *ls.contrastive;
  out << "    contrastive k=" << c.k << " alpha=" << fmt("%.2f", c.alpha)
      << ": score = (1 - alpha) p - alpha penalty\n";
  for (size_t i = 0; i < c.candidates.size(); ++i) {
    const ContrastiveCandidate& cand = c.candidates[i];
    const int similar = cand.similar_pos < static_cast<int>(ls.context_ids.size())
                            ? ls.context_ids[cand.similar_pos]
                            : -1;
    out << "      " << (static_cast<int>(i) == c.chosen ? "* " : "  ")
        << quoted_piece(tok, cand.token) << " p " << fmt("%.3f", cand.prob) << " penalty "
        << fmt("%.3f", cand.penalty) << " (like "
        << (similar >= 0 ? quoted_piece(tok, similar) : std::string("?")) << " at "
        << cand.similar_pos << ") score " << fmt("%.3f", cand.score) << "\n";
  }
}

// A lookahead or prompt-lookup pass: the rows fed, the candidates tried
// (the accepted one marked with how far it matched), the pool and the
// window's Jacobi step, the tokens committed.
void print_lookahead_pass(std::ostream& out, const Tokenizer& tok, const LaneStep& ls) {
  const LookaheadPass& p = *ls.lookahead;
  const auto pieces = [&](const std::vector<int>& ids) {
    std::string s;
    for (int id : ids) s += (s.empty() ? "" : " ") + quoted_piece(tok, id);
    return s;
  };
  out << "    " << (p.prompt_lookup ? "prompt lookup" : "lookahead") << " pass: " << p.fed()
      << " rows fed (x, " << p.layout.candidates.size() << " candidate"
      << (p.layout.candidates.size() == 1 ? "" : "s");
  if (p.layout.window_row >= 0)
    out << ", a " << p.layout.window_rows << " x " << p.layout.window_cols << " window";
  out << "), committed " << p.committed.size() << ": " << pieces(p.committed) << "\n";
  for (size_t g = 0; g < p.layout.candidates.size(); ++g) {
    out << "      candidate " << g << ": " << pieces(p.layout.candidates[g]);
    if (static_cast<int>(g) == p.verdict.candidate)
      out << "  <- accepted " << p.verdict.matched << " of " << p.layout.candidates[g].size();
    out << "\n";
  }
  if (!p.prompt_lookup)
    out << "      pool: " << p.pool_size << " n-grams before the pass, " << p.new_ngrams
        << " new; the window's next row: " << pieces(p.window_outputs) << "\n";
}

// A speculative round: the draft's proposals with q and p (and, sampled,
// p/q against u), the verdict, the tokens committed, the slots released and
// the two sides' cost.
void print_spec_round(std::ostream& out, const Tokenizer& tok, const LaneStep& ls) {
  const SpecRound& r = *ls.spec;
  out << "    speculative round: drafted " << r.gamma;
  if (r.gamma < r.gamma_planned) out << " of " << r.gamma_planned << " (" << r.clamp_reason << ")";
  out << ", accepted " << r.accepted << ", then " << spec_next_name(r.next) << " "
      << quoted_piece(tok, r.next_token) << "\n";
  for (const SpecDraftToken& d : r.drafts) {
    out << "      " << quoted_piece(tok, d.token) << " q " << fmt("%.3f", d.q) << " p "
        << fmt("%.3f", d.p);
    if (r.sampled && d.checked)
      out << " p/q " << fmt("%.3f", d.ratio) << " u " << fmt("%.3f", d.uniform);
    if (!r.sampled && d.checked && !d.accepted)
      out << " (target chose " << quoted_piece(tok, d.target_choice) << ")";
    out << (d.accepted ? " accepted" : d.checked ? " rejected" : " not checked") << "\n";
  }
  if (!r.residual.empty()) {
    out << "      residual norm(max(0, p - q)):";
    for (int id : top_n(r.residual, 3))
      if (r.residual[id] > 0)
        out << " " << quoted_piece(tok, id) << " " << fmt("%.3f", r.residual[id]);
    out << "\n";
  }
  out << "    committed " << r.committed.size() << " tokens:";
  for (int id : r.committed) out << " " << quoted_piece(tok, id);
  out << " | KV: target " << r.target_before << " -> " << r.target_after << " ("
      << r.target_slots_released.size() << " slots released), draft " << r.draft_before << " -> "
      << r.draft_after << " (" << r.draft_slots_released.size() << " released)\n";
  out << "    cost: draft " << r.draft_passes << " passes " << fmt("%.2f", r.draft_seconds * 1e3)
      << " ms, " << fmt("%.4f", r.draft_cost.flops * 1e-9) << " GFLOP, "
      << fmt("%.2f", r.draft_cost.bytes() * 1e-6) << " MB; verify 1 pass of " << ls.rows()
      << " tokens " << fmt("%.2f", r.verify_seconds * 1e3) << " ms, "
      << fmt("%.4f", r.verify_cost.flops * 1e-9) << " GFLOP, "
      << fmt("%.2f", r.verify_cost.bytes() * 1e-6) << " MB\n";
}

// DoLa: the candidate layers' divergences (the premature layer marked),
// then the tokens the relative-top filter kept with log p at the final and
// at the premature layer and their contrast, the chosen one marked.
void print_dola(std::ostream& out, const Tokenizer& tok, const LaneStep& ls) {
  const DolaStep& d = *ls.dola;
  out << "    dola: premature layer " << d.premature_layer << " of candidates";
  for (size_t i = 0; i < d.candidate_layers.size(); ++i) {
    out << " " << d.candidate_layers[i];
    if (d.candidate_layers.size() > 1) out << " (div " << fmt("%.4f", d.divergence[i]) << ")";
  }
  out << "; " << d.kept << " tokens kept (p >= 0.1 x the top p)\n";
  for (const DolaToken& t : d.top)
    out << "      " << (t.token == ls.chosen_token ? "* " : "  ") << quoted_piece(tok, t.token)
        << " log p final " << fmt("%.3f", t.final_logp) << " (rank " << t.final_rank + 1
        << ") premature " << fmt("%.3f", t.premature_logp) << " contrast "
        << fmt("%.3f", t.contrast) << "\n";
}

}  // namespace

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

std::string clipped(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "... (" + std::to_string(text.size()) + " bytes)";
}

void print_step(std::ostream& out, const Session& session, const StepTrace& step, int top) {
  const Tokenizer& tok = session.tokenizer();
  const int inputs = step.lanes.empty() ? 0 : step.lanes.front().rows();
  out << "[" << phase_name(step.phase);
  if (step.phase == Phase::kDecode) out << " " << step.index;
  out << "] ";
  // Contrastive lanes run k candidates each in the same forward (in prefill,
  // a second forward after the prompt's).
  int candidates = 0, rounds = 0;
  for (const LaneStep& ls : step.lanes) {
    if (ls.contrastive) candidates += ls.contrastive->k;
    if (ls.spec) ++rounds;
  }
  if (step.phase == Phase::kPrefill) {
    out << inputs << " tokens in one pass";
    if (candidates > 0) out << ", then " << candidates << " contrastive candidates";
  } else {
    out << step.lanes.size() << (step.lanes.size() == 1 ? " lane" : " lanes");
    if (rounds == 0)
      out << ", 1 token each";
    else
      out << ", " << rounds << " of them speculative (a round each: 1 or more tokens)";
    if (candidates > 0) out << " (" << candidates << " contrastive candidates among them)";
  }
  if (!step.kv_cache) out << " (KV cache off: " << step.recomputed_tokens << " tokens recomputed)";
  out << " | " << fmt("%.2f", step.seconds * 1e3) << " ms on " << step.backend << " | "
      << fmt("%.3f", step.cost.flops * 1e-9) << " GFLOP, " << fmt("%.1f", step.cost.bytes() * 1e-6)
      << " MB moved\n";
  const KvOccupancy& kv = step.kv_after;
  out << "  KV cache: " << kv.blocks_used << "/" << kv.blocks_total << " blocks used ("
      << kv.blocks_shared << " shared), " << fmt("%.1f", kv.bytes_per_layer_used / 1024.0)
      << " KiB per layer, " << kv.wasted_slots << " empty slots in last blocks\n";
  for (const LaneStep& ls : step.lanes) {
    const std::vector<float> probs = softmax(ls.logits);
    out << "  ";
    if (step.lanes.size() > 1 || session.lanes().size() > 1) out << "lane " << ls.lane << ": ";
    out << "chose " << quoted_piece(tok, ls.chosen_token) << " (model p "
        << fmt("%.3f", probs[ls.chosen_token]);
    if (ls.params.do_sample || ls.dola)
      out << ", after " << (ls.dola ? "the contrast" : "filters") << " p "
          << fmt("%.3f", ls.chosen_prob);
    out << ")";
    if (ls.params.do_sample) out << " u=" << fmt("%.4f", ls.uniform);
    out << " | top:";
    const std::vector<int> banned = banned_here(ls);
    for (int id : top_n(ls.logits, top))
      out << " " << quoted_piece(tok, id, banned) << " " << fmt("%.3f", probs[id]);
    out << "\n";
    print_banned_words(out, tok, ls, probs);
    if (ls.contrastive) print_contrastive(out, tok, ls);
    if (ls.spec) print_spec_round(out, tok, ls);
    if (ls.lookahead) print_lookahead_pass(out, tok, ls);
    if (ls.dola) print_dola(out, tok, ls);
  }
}

void print_logit_lens(std::ostream& out, const Session& session, const StepTrace& step) {
  const Tokenizer& tok = session.tokenizer();
  for (const LaneStep& ls : step.lanes) {
    out << "  logit lens";
    if (step.lanes.size() > 1) out << " (lane " << ls.lane << ")";
    // A speculative round records the residual stream of its verify pass's
    // last row only, which is its chosen token's row when all were accepted.
    if (ls.residuals.empty() && ls.spec) {
      out << ": not recorded for this round (its last token was not chosen at the verify "
             "pass's last row)\n";
      continue;
    }
    out << ": top-5 after each layer\n";
    const std::vector<int> banned = banned_here(ls);
    for (const LensRow& row : logit_lens(session.engine().weights(), ls.residuals, 5)) {
      out << "    " << (row.layer == 0 ? std::string("embed") : "L" + std::to_string(row.layer))
          << "\t";
      for (const LensPrediction& p : row.top)
        out << " " << quoted_piece(tok, p.token, banned) << " " << fmt("%.3f", p.prob);
      out << "\n";
    }
  }
}

void print_lanes_text(std::ostream& out, const Session& session) {
  const Tokenizer& tok = session.tokenizer();
  for (const Lane& lane : session.lanes()) {
    if (session.lanes().size() > 1)
      out << "lane " << lane.id << " (" << describe(lane.params) << "): ";
    // A token can end inside a UTF-8 character: U+FFFD there, as --json's
    // "prompt" and "text" have it (each converted on its own, as there).
    out << printable(with_replacement_chars(session.prompt_text()) +
                     with_replacement_chars(tok.decode(lane.generated)));
    if (!lane.stop_reason.empty()) out << "   [" << lane.stop_reason << "]";
    out << "\n";
  }
}

}  // namespace ts::cli
