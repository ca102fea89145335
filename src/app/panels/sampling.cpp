#include "app/panels/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/panels/dola_view.h"
#include "model/token_display.h"
#include "sampling/banned_words.h"
#include "sampling/contrastive.h"
#include "sampling/distribution.h"
#include "util/error.h"

namespace ts::app {

const char* const SamplingPanel::kHelp =
    "How the decoding strategy turns the logits into one token, stage by stage "
    "(Hugging Face order): repetition penalty, banned words, temperature, top-k, top-p, "
    "min-p, then the draw. Greyed tokens were removed by that stage. In a narrow panel the "
    "bars give way to the numbers alone, and then the table scrolls sideways, the token "
    "column held in place.\n\n\"Ban listed "
    "words\" gives the tokens of a word list logit -inf (one-token words always, the last "
    "token of a longer one right after its other tokens); it changes only what the model "
    "generates, never the prompt.\n\nGreedy takes the most "
    "likely token. Sampling draws a random number u in [0, 1) from the seed and picks "
    "the token where the cumulative probability passes u.\n\nChanging a control "
    "re-chooses the newest step's token from the same logits: same logits, different "
    "token.\n\nContrastive search (a contrastive=K lane) runs the K most likely tokens "
    "through the model and penalises each by how similar its last-layer hidden state is "
    "to what was already said (the largest cosine similarity with any earlier position): "
    "score = (1 - alpha) p - alpha penalty. The alpha slider re-ranks the recorded "
    "candidates; hover a candidate to see its similarity to every earlier token.";

std::string stage_label(const StageRecord& stage, const SamplingParams& p) {
  char b[64];
  const std::string& n = stage.name;
  // A DoLa lane's stages run on the layer contrast (log p_final - log
  // p_premature), not on the model's raw logits.
  if (n == "raw") return p.dola() ? "DoLa contrast" : "raw";
  if (n == "repetition_penalty") {
    std::snprintf(b, sizeof(b), "repetition %.2g", p.repetition_penalty);
    return b;
  }
  if (n == "temperature") {
    std::snprintf(b, sizeof(b), "temperature %.2g", p.temperature);
    return b;
  }
  if (n == "top_k") return "top-k " + std::to_string(p.top_k);
  if (n == "top_p") {
    std::snprintf(b, sizeof(b), "top-p %.2g", p.top_p);
    return b;
  }
  if (n == "min_p") {
    std::snprintf(b, sizeof(b), "min-p %.2g", p.min_p);
    return b;
  }
  if (n == "banned_words") return "banned words";
  return n;
}

std::string banned_words_summary(const StageRecord& stage) {
  return "banned words: " + std::to_string(stage.removed_here) +
         (stage.removed_here == 1 ? " token removed" : " tokens removed");
}

std::string banned_words_removed_list(const SessionSnapshot& snap, const StageRecord& stage,
                                      const std::vector<float>& probs, int max_listed) {
  std::vector<int> ids = stage.removed_ids_here;
  std::sort(ids.begin(), ids.end(),
            [&](int a, int b) { return probs[a] != probs[b] ? probs[a] > probs[b] : a < b; });
  std::string out;
  const int shown = std::min<int>(max_listed, static_cast<int>(ids.size()));
  for (int i = 0; i < shown; ++i) {
    char p[32];
    std::snprintf(p, sizeof p, "%.4f", probs[ids[i]]);
    // Masked: the hover names what was removed without showing the word.
    const std::string piece =
        snap.tokenizer ? display_piece(mask_banned_piece(snap.tokenizer->token_bytes(ids[i])))
                       : token_piece(snap, ids[i]);
    out += "\u201C" + piece + "\u201D " + p + "\n";
  }
  if (static_cast<int>(ids.size()) > shown)
    out += "and " + std::to_string(ids.size() - shown) + " more\n";
  return out;
}

void SamplingPanel::draw_banned_words(PanelContext& ctx) {
  if (!ctx.snap) return;
  bool on = ctx.ctl.banned_words_on();
  const auto& list = ctx.ctl.banned_words_list();
  ImGui::BeginDisabled(!list);
  if (ImGui::Checkbox("Ban listed words", &on)) ctx.ctl.set_banned_words(on);
  ImGui::EndDisabled();
  if (ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip(
        "%s",
        list ? ("The model cannot generate the " + std::to_string(list->entries) +
                " words and phrases of " + list->source +
                " (as written, with a leading space, capitalised, lower case): their tokens get "
                "logit -inf, after the repetition penalty and before temperature. Applies from "
                "the next choice on; the prompt is never changed.")
                   .c_str()
             : "no banned-words list could be loaded");
  // What the stage did at the viewed step (the record's own list).
  if (!rec_ || !ctx.view.record || !ctx.view.record->banned_words) return;
  const int s = stage_index("banned_words");
  const StageRecord& st = rec_->stages[s];
  ImGui::SameLine();
  dim_text_wrapped("%s", banned_words_summary(st).c_str());
  if (ImGui::IsItemHovered() && st.removed_here > 0)
    ImGui::SetTooltip("%s",
                      banned_words_removed_list(*ctx.snap, st, stage_probs_[s - 1], 20).c_str());
}

void SamplingPanel::update(PanelContext& ctx) {
  const StepView& v = ctx.view;
  if (!v.record || v.record->logits.empty()) {
    rec_.reset();
    rec_trace_ = nullptr;
    kept_.reset();
    return;
  }
  if (rec_trace_ == v.trace && rec_lane_ == v.lane) return;
  rec_trace_ = v.trace;
  rec_lane_ = v.lane;
  kept_ = ctx.snap->history[v.step];
  rec_error_.clear();
  try {
    rec_ = sample_next(choice_logits(*v.record), v.record->context_ids, v.record->params,
                       v.record->step_index, v.record->banned_words.get());
  } catch (const std::exception& e) {
    rec_.reset();
    rec_error_ = e.what();
    return;
  }
  stage_probs_.clear();
  for (const StageRecord& s : rec_->stages) stage_probs_.push_back(softmax(s.logits));
  // Candidates: the most likely before and after the strategy, and the choice.
  const std::vector<int> raw_top = top_n(stage_probs_.front(), 8);
  const std::vector<int> final_top = top_n(rec_->final_probs, 8);
  candidates_ = raw_top;
  for (int id : final_top)
    if (std::find(candidates_.begin(), candidates_.end(), id) == candidates_.end())
      candidates_.push_back(id);
  // A branch shows the token the user chose (the strategy's own stays listed).
  for (int chosen : {rec_->draw.chosen_token, v.branched ? v.record->chosen_token : -1})
    if (chosen >= 0 &&
        std::find(candidates_.begin(), candidates_.end(), chosen) == candidates_.end())
      candidates_.push_back(chosen);
  const std::vector<float>& raw = stage_probs_.front();
  std::stable_sort(candidates_.begin(), candidates_.end(),
                   [&](int a, int b) { return raw[a] > raw[b]; });
}

void SamplingPanel::draw(PanelContext& ctx) {
  visible_rows_ = 0;
  if (!begin_panel(ctx, PanelId::kSampling)) return;
  if (ctx.view.record && ctx.view.record->beam) {
    draw_beam_step(ctx, *ctx.view.record->beam);
    end_panel();
    return;
  }
  if (ctx.view.record && ctx.view.record->contrastive && !ctx.view.branched) {
    draw_contrastive_step(ctx, *ctx.view.record);
    end_panel();
    return;
  }
  // Room first for the candidate table (its header, the kept row and at
  // least kMinTableRows candidates): in a short panel (a projector's large
  // font, a lesson bar below) the controls fold into one line that opens
  // them and the strip becomes its one line of text.
  const float font = ImGui::GetFontSize();
  const float line = ImGui::GetTextLineHeightWithSpacing();
  const float avail = ImGui::GetContentRegionAvail().y;
  const float strip_h = font * 4.6f;
  // A table row is a line of text and the cells' padding above and below.
  const float row = line + 2 * ImGui::GetStyle().CellPadding.y;
  const float table_min = (kMinTableRows + 2) * row + ImGui::GetStyle().ItemSpacing.y;
  const float around = 2 * line;  // the banned-words line and the headline
  const bool has_table = ctx.snap && ctx.view.record;
  // In font sizes, not pixels: measured under a projector's large font, the
  // height in pixels would keep the controls folded after presentation mode
  // is switched off.
  const float controls_h =
      controls_lines_ > 0 ? controls_lines_ * font : 3 * ImGui::GetFrameHeightWithSpacing();
  compact_strip_ = has_table && avail < controls_h + around + table_min + strip_h;
  fold_controls_ = has_table && avail < controls_h + around + table_min + line;
  if (fold_controls_) {
    ImGui::SetNextItemOpen(controls_unfolded_, ImGuiCond_Always);
    const std::string label = "Strategy: " + describe(ctx.state.strategy) + "###strategy";
    controls_unfolded_ = ImGui::CollapsingHeader(label.c_str());
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("click: the strategy's controls (folded to leave the table room)");
  }
  if (!fold_controls_ || controls_unfolded_) {
    const float y0 = ImGui::GetCursorPosY();
    draw_controls(ctx);
    if (!fold_controls_) controls_lines_ = (ImGui::GetCursorPosY() - y0) / font;
  }
  if (!ctx.snap || !ctx.view.record) {
    empty_hint(ctx, ctx.snap ? "After prefill this shows how the strategy picks the next token."
                             : "No model loaded yet.");
    end_panel();
    return;
  }
  update(ctx);
  if (!fold_controls_ || controls_unfolded_) draw_banned_words(ctx);  // a control too
  if (!rec_) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.error), "%s", rec_error_.c_str());
    end_panel();
    return;
  }
  const float below = compact_strip_ ? line : strip_h;
  if (ctx.view.record->dola)  // DoLa: the layer contrast the stages below run on
    draw_dola_view(ctx, *ctx.view.record, (ImGui::GetContentRegionAvail().y - below) * 0.55f);
  draw_stages(ctx, below);
  draw_strip(ctx);
  end_panel();
}

void SamplingPanel::draw_beam_step(PanelContext& ctx, const BeamStep& step) {
  const SessionSnapshot& snap = *ctx.snap;
  const int beams = step.before ? static_cast<int>(step.before->beams.size()) : 0;
  const int kept = step.after ? static_cast<int>(step.after->beams.size()) : 0;
  ImGui::Text("Beam search: %s", describe(ctx.view.record->params).c_str());
  panel_help_button(PanelId::kSampling);
  dim_text_wrapped(
      "No sampling and no single argmax: every open beam (%d here) is extended by its most likely "
      "tokens, and the 2 \u00D7 num_beams best sequences by total log-probability are ranked "
      "below. The best ones become the next beams (%d kept); an end of text among the top ones "
      "finishes a hypothesis; the rest are pruned. The Lanes panel draws the whole tree.",
      beams, kept);
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingStretchProp;
  if (!ImGui::BeginTable("beam", 6, flags, ImVec2(0, ImGui::GetContentRegionAvail().y))) return;
  ImGui::TableSetupScrollFreeze(0, 1);
  ImGui::TableSetupColumn("rank");
  ImGui::TableSetupColumn("extends");
  ImGui::TableSetupColumn("token");
  ImGui::TableSetupColumn("log p");
  ImGui::TableSetupColumn("total log p");
  ImGui::TableSetupColumn("fate");
  ImGui::TableHeadersRow();
  for (size_t i = 0; i < step.candidates.size(); ++i) {
    const BeamCandidate& c = step.candidates[i];
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::Text("%zu", i + 1);
    ImGui::TableNextColumn();
    std::string parent = "beam " + std::to_string(c.parent);
    if (step.before && c.parent < beams && !step.before->beams[c.parent].tokens.empty())
      parent += ": \u2026" + token_piece(snap, step.before->beams[c.parent].tokens.back());
    ImGui::TextUnformatted(parent.c_str());
    ImGui::TableNextColumn();
    const bool kept_beam = c.fate == CandidateFate::kKept;
    const std::string piece = token_piece(snap, c.token);
    if (kept_beam && c.new_beam == 0)  // the new best beam's token
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.accent), "%s", piece.c_str());
    else
      ImGui::TextUnformatted(piece.c_str());
    ImGui::TableNextColumn();
    ImGui::Text("%.3f", c.log_prob);
    ImGui::TableNextColumn();
    ImGui::Text("%.3f", c.sum_log_prob);
    ImGui::TableNextColumn();
    const ImU32 color = kept_beam                            ? ctx.pal.accent
                        : c.fate == CandidateFate::kFinished ? ctx.pal.ok
                                                             : ctx.pal.text_dim;
    std::string fate = candidate_fate_name(c.fate);
    if (kept_beam) fate += " \u2192 beam " + std::to_string(c.new_beam);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(color), "%s", fate.c_str());
  }
  ImGui::EndTable();
}

void SamplingPanel::draw_contrastive_step(PanelContext& ctx, const LaneStep& record) {
  const SessionSnapshot& snap = *ctx.snap;
  const ContrastiveStep& step = *record.contrastive;
  const float font = ImGui::GetFontSize();
  if (alpha_step_ != &step) {  // a new step on show: start from the lane's own alpha
    alpha_step_ = &step;
    alpha_view_ = step.alpha;
    hovered_candidate_ = -1;
  }
  ImGui::Text("Contrastive search: %s", describe(record.params).c_str());
  panel_help_button(PanelId::kSampling);
  dim_text_wrapped(
      "The %d most likely tokens ran through the model in one batched forward. Each is "
      "penalised by the largest cosine similarity between its hidden state and an earlier "
      "position's: score = (1 \u2212 \u03b1) p \u2212 \u03b1 penalty, the largest wins.",
      step.k);
  ImGui::SetNextItemWidth(std::min(ImGui::GetContentRegionAvail().x, font * 22));
  ImGui::SliderFloat("##alpha", &alpha_view_, 0.0f, 1.0f, "\u03b1 %.2f (re-ranks, no recompute)");
  alpha_view_ = std::clamp(alpha_view_, 0.0f, 1.0f);
  ImGui::SameLine();
  if (ImGui::SmallButton("lane's \u03b1")) alpha_view_ = step.alpha;
  alpha_winner_ = contrastive_choice(step.candidates, alpha_view_, &alpha_scores_);
  const ContrastiveCandidate& won = step.candidates[alpha_winner_];
  headline_ = "contrastive \u2192 \u201C" + token_piece(snap, won.token) + "\u201D";
  ImGui::TextUnformatted(headline_.c_str());
  ImGui::SameLine();
  if (alpha_winner_ == step.chosen)
    dim_text_wrapped("p = %s, penalty %.3f, score %.3f", format_percent(won.prob).c_str(),
                     won.penalty, alpha_scores_[alpha_winner_]);
  else
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.warning),
                       "at \u03b1 %.2f; the lane (\u03b1 %.2f) chose \u201C%s\u201D", alpha_view_,
                       step.alpha, token_piece(snap, step.candidates[step.chosen].token).c_str());

  // Bars: the two terms of the score, (1 - alpha) p against alpha penalty,
  // on one scale so that their difference is the score.
  float scale = 1e-6f;
  for (const ContrastiveCandidate& c : step.candidates)
    scale = std::max({scale, (1 - alpha_view_) * c.prob, alpha_view_ * std::max(c.penalty, 0.0f)});
  const float strip_h = font * 3.2f;
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingStretchProp;
  int hovered = -1;
  if (ImGui::BeginTable(
          "contrastive", 7, flags,
          ImVec2(0, std::max(ImGui::GetContentRegionAvail().y - strip_h, font * 6)))) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("token");
    ImGui::TableSetupColumn("p");
    ImGui::TableSetupColumn("penalty");
    ImGui::TableSetupColumn("most like");
    ImGui::TableSetupColumn("score");
    ImGui::TableSetupColumn("chosen");
    ImGui::TableSetupColumn("(1\u2212\u03b1) p (blue) vs \u03b1 penalty (red)",
                            ImGuiTableColumnFlags_WidthStretch, 3.0f);
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < step.candidates.size(); ++i) {
      const ContrastiveCandidate& c = step.candidates[i];
      const bool wins = static_cast<int>(i) == alpha_winner_;
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      const std::string piece = token_piece(snap, c.token);
      // The row is one selectable: hovering any of it shows the candidate's
      // similarity strip below.
      ImGui::PushID(static_cast<int>(i));
      if (wins) ImGui::PushStyleColor(ImGuiCol_Text, ctx.pal.accent);
      ImGui::Selectable(piece.c_str(), false, ImGuiSelectableFlags_SpanAllColumns);
      if (wins) ImGui::PopStyleColor();
      if (ImGui::IsItemHovered()) hovered = static_cast<int>(i);
      ImGui::PopID();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(format_percent(c.prob).c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%.3f", c.penalty);
      ImGui::TableNextColumn();
      const bool known = c.similar_pos < static_cast<int>(record.context_ids.size());
      ImGui::Text("\u201C%s\u201D @%d",
                  known ? token_piece(snap, record.context_ids[c.similar_pos]).c_str() : "?",
                  c.similar_pos);
      ImGui::TableNextColumn();
      ImGui::Text("%.3f", alpha_scores_[i]);
      ImGui::TableNextColumn();
      if (wins)
        ImGui::TextColored(
            ImGui::ColorConvertU32ToFloat4(ctx.pal.accent), "%s",
            static_cast<int>(i) == step.chosen ? "\u2713 chosen" : "\u2713 would win");
      else if (static_cast<int>(i) == step.chosen)
        ImGui::TextDisabled("lane chose");
      ImGui::TableNextColumn();
      const float w = ImGui::GetContentRegionAvail().x;
      const float bar_h = font * 0.35f;
      const ImVec2 at = ImGui::GetCursorScreenPos();
      ImDrawList* dl = ImGui::GetWindowDrawList();
      const float conf = (1 - alpha_view_) * c.prob / scale;
      const float pen = alpha_view_ * std::max(c.penalty, 0.0f) / scale;
      const float y0 = at.y + ImGui::GetTextLineHeight() * 0.5f - bar_h - 1;
      dl->AddRectFilled(ImVec2(at.x, y0),
                        ImVec2(at.x + w * std::clamp(conf, 0.0f, 1.0f), y0 + bar_h),
                        ctx.pal.accent2);
      dl->AddRectFilled(ImVec2(at.x, y0 + bar_h + 2),
                        ImVec2(at.x + w * std::clamp(pen, 0.0f, 1.0f), y0 + 2 * bar_h + 2),
                        ctx.pal.error);
      ImGui::Dummy(ImVec2(w, ImGui::GetTextLineHeight()));
    }
    ImGui::EndTable();
  }
  if (hovered >= 0) hovered_candidate_ = hovered;
  // The similarity strip: one cell per earlier position, darker = more
  // similar to the hovered candidate (the winner until one is hovered).
  const int shown =
      hovered_candidate_ >= 0 && hovered_candidate_ < step.k ? hovered_candidate_ : alpha_winner_;
  const ContrastiveCandidate& sc = step.candidates[shown];
  ImGui::TextDisabled("similarity of \u201C%s\u201D to each earlier token (max %.3f at @%d):",
                      token_piece(snap, sc.token).c_str(), sc.penalty, sc.similar_pos);
  const float avail = ImGui::GetContentRegionAvail().x;
  const int n = step.positions;
  if (n > 0 && step.similarity.size() >= static_cast<size_t>(step.k) * n) {
    const float cell = std::max(avail / n, 1.0f);
    const float h = font * 1.1f;
    const ImVec2 at = ImGui::GetCursorScreenPos();
    ImDrawList* dl = ImGui::GetWindowDrawList();
    for (int p = 0; p < n; ++p) {
      const float sim = step.similarity[static_cast<size_t>(shown) * n + p];
      const ImVec2 a(at.x + p * cell, at.y),
          b(at.x + (p + 1) * cell - (cell > 3 ? 1 : 0), at.y + h);
      dl->AddRectFilled(a, b, with_alpha(ctx.pal.error, std::clamp(sim, 0.0f, 1.0f)));
      if (p == sc.similar_pos) dl->AddRect(a, b, ctx.pal.selected, 0, 0, 2.0f);
      // The token itself where the cell is wide enough to read it.
      if (cell >= font * 1.8f && p < static_cast<int>(record.context_ids.size())) {
        const std::string piece =
            fit_text(token_piece(snap, record.context_ids[p]), cell - font * 0.3f);
        dl->AddText(ImVec2(a.x + font * 0.15f, a.y + (h - font) * 0.5f), ctx.pal.text,
                    piece.c_str());
      }
    }
    ImGui::InvisibleButton("##simstrip", ImVec2(cell * n, h));
    if (ImGui::IsItemHovered()) {
      const int p =
          std::clamp(static_cast<int>((ImGui::GetIO().MousePos.x - at.x) / cell), 0, n - 1);
      const bool known = p < static_cast<int>(record.context_ids.size());
      ImGui::SetTooltip("@%d \u201C%s\u201D: cosine %.3f", p,
                        known ? token_piece(snap, record.context_ids[p]).c_str() : "?",
                        step.similarity[static_cast<size_t>(shown) * n + p]);
    }
  }
}

void SamplingPanel::draw_controls(PanelContext& ctx) {
  AppState& st = ctx.state;
  SamplingParams p = st.strategy;
  const float font = ImGui::GetFontSize();
  bool changed = false;
  ImGui::AlignTextToFramePadding();
  int mode = p.do_sample ? 1 : 0;
  changed |= ImGui::RadioButton("greedy", &mode, 0);
  ImGui::SameLine();
  changed |= ImGui::RadioButton("sample", &mode, 1);
  p.do_sample = mode == 1;
  ImGui::SameLine(0, font);
  ImGui::TextDisabled("presets:");
  struct Preset {
    const char* name;
    SamplingParams params;
  };
  SamplingParams greedy, t07, p09, k40;
  t07.do_sample = p09.do_sample = k40.do_sample = true;
  t07.temperature = 0.7f;
  p09.top_p = 0.9f;
  k40.top_k = 40;
  const Preset presets[] = {{"T 0.7", t07}, {"top-p 0.9", p09}, {"top-k 40", k40}};
  for (const Preset& pr : presets) {
    ImGui::SameLine();
    if (ImGui::SmallButton(pr.name)) {
      const uint64_t seed = p.seed;
      p = pr.params;
      p.seed = seed;
      changed = true;
    }
  }
  panel_help_button(PanelId::kSampling);

  if (ImGui::BeginTable("controls", 3, ImGuiTableFlags_SizingStretchSame)) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::BeginDisabled(!p.do_sample);
    ImGui::SetNextItemWidth(-FLT_MIN);
    changed |= ImGui::SliderFloat("##T", &p.temperature, 0.05f, 2.0f, "temperature %.2f",
                                  ImGuiSliderFlags_Logarithmic);
    ImGui::TableNextColumn();
    ImGui::SetNextItemWidth(-FLT_MIN);
    changed |= ImGui::SliderInt("##k", &p.top_k, 0, 100, p.top_k == 0 ? "top-k off" : "top-k %d");
    ImGui::TableNextColumn();
    ImGui::SetNextItemWidth(-FLT_MIN);
    changed |= ImGui::SliderFloat("##p", &p.top_p, 0.05f, 1.0f,
                                  p.top_p >= 1.0f ? "top-p off" : "top-p %.2f");
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::SetNextItemWidth(-FLT_MIN);
    changed |= ImGui::SliderFloat("##minp", &p.min_p, 0.0f, 0.5f,
                                  p.min_p <= 0.0f ? "min-p off" : "min-p %.2f");
    ImGui::EndDisabled();
    ImGui::TableNextColumn();
    ImGui::SetNextItemWidth(-FLT_MIN);
    changed |=
        ImGui::SliderFloat("##rep", &p.repetition_penalty, 1.0f, 2.0f,
                           p.repetition_penalty <= 1.0f ? "repetition off" : "repetition %.2f");
    ImGui::TableNextColumn();
    ImGui::BeginDisabled(!p.do_sample);
    const float btn = ImGui::CalcTextSize("+1").x + ImGui::GetStyle().FramePadding.x * 2;
    ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x - btn -
                            ImGui::GetStyle().ItemSpacing.x);
    changed |= ImGui::InputScalar("##seed", ImGuiDataType_U64, &p.seed, nullptr, nullptr,
                                  "seed %llu", ImGuiInputTextFlags_EnterReturnsTrue);
    ImGui::SameLine();
    if (ImGui::Button("+1")) {
      ++p.seed;
      changed = true;
    }
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("next seed: a different random number u, same logits");
    ImGui::EndDisabled();
    ImGui::EndTable();
  }
  if (p.top_p <= 0.0f) p.top_p = 0.05f;
  if (changed && !(p == st.strategy)) {
    try {
      p.validate();
      st.strategy = p;
      st.strategy_error.clear();
      st.error_text.clear();
      st.view_step = -1;  // re-choosing works on the newest step
      ctx.ctl.choose_with(st.lane, p);
    } catch (const Error& e) {
      st.strategy_error = e.what();
    }
  }
  if (!st.strategy_error.empty())
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.error), "%s",
                       st.strategy_error.c_str());
  if (ctx.snap && !ctx.view.latest && ctx.view.step >= 0)
    dim_text_wrapped("Viewing step %d: a change re-chooses the newest step.", ctx.view.step);
}

}  // namespace ts::app
