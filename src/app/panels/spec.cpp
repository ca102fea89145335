#include "app/panels/spec.h"

#include <GLFW/glfw3.h>

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "app/view_model.h"
#include "trace/step_trace.h"

namespace ts::app {

const char* const SpeculativePanel::kHelp =
    "One round of a speculative lane (a \"spec N\" lane; the window needs --draft-model DIR). "
    "The small draft model proposed the tokens in the row, one cheap pass each; the target "
    "checked them all in one verify pass. Each draft shows q (the draft's probability of it) "
    "and p (the target's), and its verdict: accepted, rejected (then replaced by the "
    "correction) or not checked (after a rejection). When every draft is accepted the verify "
    "pass's last row gives a bonus token. Sampled lanes accept when u < p / q; at a rejection "
    "the token is drawn from the residual norm(max(0, p \u2212 q)), shown as bars. Below: "
    "\u03B3 planned and drafted (clamped near the end of the context), the KV caches of both "
    "models before and after the round (the slots of rejected tokens are released), the cost "
    "of the draft passes beside the verify pass, and the lane's acceptance rate and tokens "
    "per target pass so far. \u25C0 / \u25B6 (or [ and ] with the panel focused) reveal the "
    "round one draft token at a time, then the verdict; \"All\" shows it whole. Every number "
    "is the session's record of the round.";

SpecTotals spec_totals(const SessionSnapshot& snap, int lane, int up_to_step) {
  SpecTotals t;
  const int last = std::min(up_to_step, static_cast<int>(snap.history.size()) - 1);
  for (int i = 0; i <= last; ++i) {
    const LaneStep* ls = find_lane_step(*snap.history[i], lane);
    if (!ls || !ls->spec) continue;
    ++t.rounds;
    t.drafted += ls->spec->gamma;
    t.accepted += ls->spec->accepted;
    t.committed += static_cast<int>(ls->spec->committed.size());
  }
  return t;
}

namespace {

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string how_to_get_one(const PanelContext& ctx) {
  return ctx.ctl.draft_name().empty()
             ? "start tokenscope with --draft-model DIR, then add a \"spec 4\" lane (Lanes panel)."
             : "add a \"spec 4\" lane in the Lanes panel (draft model " + ctx.ctl.draft_name() +
                   ") and view it.";
}

}  // namespace

void SpeculativePanel::build_view(const PanelContext& ctx) {
  view_ = SpecPanelView{};
  const LaneStep* rec = ctx.view.record;
  if (!ctx.snap || !rec || !rec->spec) {
    view_.message =
        "Shows a round of speculative decoding (draft, verify, verdict) for a speculative "
        "lane's step: " +
        how_to_get_one(ctx);
    round_key_ = nullptr;
    return;
  }
  const SpecRound& r = *rec->spec;
  const SessionSnapshot& snap = *ctx.snap;
  // A new round restarts a presenter's walk through it.
  if (round_key_ != &r) {
    round_key_ = &r;
    if (substep_ >= 0) substep_ = 0;
  }
  substep_ = std::clamp(substep_, -1, r.gamma + 1);
  view_.has_round = true;
  view_.gamma_planned = r.gamma_planned;
  view_.gamma = r.gamma;
  view_.gamma_next = r.gamma_next;
  view_.clamp_reason = r.clamp_reason;
  view_.sampled = r.sampled;
  view_.revealed = substep_ < 0 ? r.gamma : std::min(substep_, r.gamma);
  view_.verdict_shown = substep_ < 0 || substep_ > r.gamma;
  for (int i = 0; i < view_.revealed && i < static_cast<int>(r.drafts.size()); ++i) {
    const SpecDraftToken& d = r.drafts[i];
    SpecPanelView::Row row;
    row.token = d.token;
    row.piece = token_piece(snap, d.token);
    row.p = d.p;
    row.q = d.q;
    row.ratio = d.ratio;
    row.uniform = d.uniform;
    row.target_choice = d.target_choice;
    row.verdict = d.accepted ? "accepted" : d.checked ? "rejected" : "not checked";
    view_.rows.push_back(std::move(row));
  }
  view_.accepted = r.accepted;
  view_.next_token = r.next_token;
  view_.next_piece = token_piece(snap, r.next_token);
  view_.next_kind = spec_next_name(r.next);
  view_.next_uniform = r.next_uniform;
  view_.residual_fallback = r.residual_fallback;
  if (!r.residual.empty()) {
    std::vector<int> ids(r.residual.size());
    std::iota(ids.begin(), ids.end(), 0);
    const size_t n = std::min<size_t>(5, ids.size());
    std::partial_sort(
        ids.begin(), ids.begin() + static_cast<long>(n), ids.end(), [&](int a, int b) {
          return r.residual[a] != r.residual[b] ? r.residual[a] > r.residual[b] : a < b;
        });
    for (size_t i = 0; i < n; ++i)
      if (r.residual[ids[i]] > 0) view_.residual_top.emplace_back(ids[i], r.residual[ids[i]]);
  }
  view_.totals = spec_totals(snap, ctx.view.lane, ctx.view.step);
}

void SpeculativePanel::draw(PanelContext& ctx) {
  if (!begin_panel(ctx, PanelId::kSpeculative)) return;
  if (!ctx.snap) {
    view_ = SpecPanelView{};
    view_.message = ctx.ctl.needs_model_line();
    empty_hint(ctx, view_.message.c_str());
    panel_help_button(PanelId::kSpeculative);
    end_panel();
    return;
  }
  build_view(ctx);
  if (!view_.has_round) {
    ImGui::TextWrapped("%s", view_.message.c_str());
    panel_help_button(PanelId::kSpeculative);
    end_panel();
    return;
  }
  draw_round(ctx);
  end_panel();
}

void SpeculativePanel::draw_round(PanelContext& ctx) {
  const SpecRound& r = *ctx.view.record->spec;
  const SpecPanelView& v = view_;
  const Palette& pal = ctx.pal;
  const float font = ImGui::GetFontSize();

  // Headline: gamma planned / drafted / next.
  ImGui::Text("Round of lane %d: the draft proposed %d token%s", ctx.view.lane, v.gamma,
              v.gamma == 1 ? "" : "s");
  if (v.gamma < v.gamma_planned) {
    ImGui::SameLine();
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal.warning), "(planned %d: %s)",
                       v.gamma_planned, v.clamp_reason.c_str());
  }
  ImGui::SameLine();
  ImGui::TextDisabled("\u03B3 next round: %d%s", v.gamma_next,
                      v.gamma_next != v.gamma_planned ? " (spec=auto adapts it)" : "");
  panel_help_button(PanelId::kSpeculative);

  // The stepper.
  const bool focused = ImGui::IsWindowFocused(ImGuiFocusedFlags_RootAndChildWindows);
  int k = substep_ < 0 ? v.gamma + 1 : substep_;
  bool prev = ImGui::ArrowButton("##spec_prev", ImGuiDir_Left);
  ImGui::SameLine();
  bool next = ImGui::ArrowButton("##spec_next", ImGuiDir_Right);
  if (focused && ImGui::IsKeyPressed(GLFW_KEY_LEFT_BRACKET)) prev = true;
  if (focused && ImGui::IsKeyPressed(GLFW_KEY_RIGHT_BRACKET)) next = true;
  if (prev) substep_ = std::max(0, k - 1);
  if (next) substep_ = std::min(v.gamma + 1, k + 1);
  ImGui::SameLine();
  if (ImGui::SmallButton("All")) {
    substep_ = -1;
    prev = true;  // rebuilt below
  }
  ImGui::SameLine();
  if (substep_ < 0 || substep_ > v.gamma)
    ImGui::Text("whole round: %d draft tokens and the verdict", v.gamma);
  else
    ImGui::Text("draft token %d of %d", substep_, v.gamma);
  if (prev || next) build_view(ctx);  // this frame already shows the new step

  // The drafts: one row each, p and q side by side.
  const bool sampled = v.sampled;
  const int cols = sampled ? 7 : 6;
  // The bars get the room the text leaves (a projector's narrow panel
  // squeezed the value columns to unreadable slivers); none below 1.5 em.
  // Narrower still, the headers shorten; past that the table scrolls
  // sideways rather than cut a value.
  const auto tw = [](const char* t) { return ImGui::CalcTextSize(t).x; };
  float token_w = tw("draft token");
  for (const SpecPanelView::Row& row : view_.rows)
    token_w = std::max(token_w, tw(("\u201C" + row.piece + "\u201D").c_str()));
  // Cell padding, borders and the panel's scrollbar, with a margin: an
  // estimate too small squeezes the columns, one too large only drops bars.
  const float pad = (ImGui::GetStyle().CellPadding.x * 2 + ImGui::GetStyle().ItemSpacing.x) *
                        static_cast<float>(cols) +
                    ImGui::GetStyle().ScrollbarSize + font * 3;
  const auto width = [&](bool short_headers, float bar) {
    const float value = tw("0.000") + (bar > 0 ? bar + ImGui::GetStyle().ItemSpacing.x : 0);
    float w = tw("#") + token_w + tw("not checked") + pad;
    w += 2 * std::max(value, short_headers ? tw("q") : tw("p (target)"));
    w += sampled ? std::max(tw("0.000"), tw("p / q")) + tw("0.000 \u2265 p/q")
                 : std::max(token_w, tw("target's argmax"));
    return w;
  };
  const float avail = ImGui::GetContentRegionAvail().x;
  float bar_w = std::min(font * 6, (avail - width(false, 0)) / 2);
  if (bar_w < font * 1.5f) bar_w = 0;
  const bool short_headers = bar_w == 0 && width(false, 0) > avail;
  view_.bar_width = bar_w;
  int clipped = 0;
  // Counts a cell whose last item ran past the column (checked in tests).
  float cell_right = 0;
  const auto cell = [&] {
    ImGui::TableNextColumn();
    cell_right = ImGui::GetCursorScreenPos().x + ImGui::GetContentRegionAvail().x;
  };
  const auto check_cell = [&] {
    if (ImGui::GetItemRectMax().x > cell_right + 0.5f) ++clipped;
  };
  if (ImGui::BeginTable("drafts", cols,
                        ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                            ImGuiTableFlags_SizingFixedFit |
                            (width(short_headers, 0) > avail ? ImGuiTableFlags_ScrollX : 0),
                        ImVec2(0, ImGui::GetTextLineHeightWithSpacing() *
                                      (static_cast<float>(view_.rows.size()) + 2.5f)))) {
    ImGui::TableSetupColumn("#");
    ImGui::TableSetupColumn("draft token");
    ImGui::TableSetupColumn("verdict");
    ImGui::TableSetupColumn(short_headers ? "q" : "q (draft)");
    ImGui::TableSetupColumn(short_headers ? "p" : "p (target)");
    if (sampled) {
      ImGui::TableSetupColumn("p / q");
      ImGui::TableSetupColumn("u");
    } else {
      ImGui::TableSetupColumn("target's argmax");
    }
    ImGui::TableHeadersRow();
    for (size_t i = 0; i < view_.rows.size(); ++i) {
      const SpecPanelView::Row& row = view_.rows[i];
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::Text("%zu", i + 1);
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(("\u201C" + row.piece + "\u201D").c_str());
      ImGui::TableNextColumn();
      const ImU32 vc = row.verdict == "accepted"   ? pal.ok
                       : row.verdict == "rejected" ? pal.error
                                                   : pal.text_dim;
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(vc), "%s", row.verdict.c_str());
      cell();
      if (bar_w > 0) {
        inline_bar(row.q, bar_w, font * 0.6f, pal.accent2, pal.frame);
        ImGui::SameLine();
      }
      ImGui::Text("%.3f", row.q);
      check_cell();
      cell();
      if (bar_w > 0) {
        inline_bar(row.p, bar_w, font * 0.6f, pal.accent, pal.frame);
        ImGui::SameLine();
      }
      ImGui::Text("%.3f", row.p);
      check_cell();
      const bool checked = row.verdict != "not checked";
      if (sampled) {
        cell();
        if (checked)
          ImGui::Text("%.3f", row.ratio);
        else
          ImGui::TextDisabled("-");
        check_cell();
        cell();
        if (checked)
          ImGui::Text("%.3f %s", row.uniform, row.uniform < row.ratio ? "< p/q" : "\u2265 p/q");
        else
          ImGui::TextDisabled("-");
        check_cell();
      } else {
        ImGui::TableNextColumn();
        if (checked)
          ImGui::TextUnformatted(
              ("\u201C" + token_piece(*ctx.snap, row.target_choice) + "\u201D").c_str());
        else
          ImGui::TextDisabled("-");
      }
    }
    ImGui::EndTable();
  }
  view_.clipped_cells = clipped;

  if (!v.verdict_shown) {
    ImGui::TextDisabled("Verdict hidden: \u25B6 reveals the next draft token, then the verdict.");
    return;
  }

  // The verdict.
  ImGui::Spacing();
  const char* how = v.next_kind == "bonus"
                        ? "every draft accepted: the verify pass's last row gives it for free"
                    : sampled ? "drawn from the residual at the rejection"
                              : "the target's argmax replaces the rejected draft";
  if (ctx.heading_font) ImGui::PushFont(ctx.heading_font);
  ImGui::Text("accepted %d of %d, then %s \u201C%s\u201D", v.accepted, v.gamma, v.next_kind.c_str(),
              v.next_piece.c_str());
  if (ctx.heading_font) ImGui::PopFont();
  ImGui::TextDisabled("%s%s", how, sampled ? (", u = " + fmt("%.3f", v.next_uniform)).c_str() : "");
  if (sampled && v.next_kind == "correction") {
    if (v.residual_fallback) {
      ImGui::TextWrapped(
          "Residual norm(max(0, p \u2212 q)): p \u2212 q had no positive mass here, so the token "
          "was drawn from p itself.");
    } else if (!v.residual_top.empty()) {
      ImGui::TextUnformatted(
          "Residual norm(max(0, p \u2212 q)), its largest entries (bars: share of the largest):");
      // The drawn token is always listed, also when it is not among the largest.
      std::vector<std::pair<int, float>> shown = v.residual_top;
      const bool drawn_listed = std::any_of(shown.begin(), shown.end(),
                                            [&](const auto& e) { return e.first == v.next_token; });
      if (!drawn_listed && v.next_token >= 0 && v.next_token < static_cast<int>(r.residual.size()))
        shown.emplace_back(v.next_token, r.residual[v.next_token]);
      const float top = v.residual_top.front().second;
      for (const auto& [id, value] : shown) {
        ImGui::TextUnformatted(
            fit_text("\u201C" + token_piece(*ctx.snap, id) + "\u201D", font * 7).c_str());
        ImGui::SameLine(font * 8);
        inline_bar(top > 0 ? value / top : 0, bar_w * 1.5f, font * 0.6f,
                   id == v.next_token ? pal.accent : pal.bar, pal.frame);
        ImGui::SameLine();
        // A tail token can be drawn: its small mass keeps its digits.
        ImGui::Text(value > 0 && value < 0.001f ? "%.2e%s" : "%.3f%s", value,
                    id == v.next_token ? "  \u2190 drawn" : "");
      }
    }
  }

  // KV caches of both models.
  ImGui::Spacing();
  ImGui::Text(
      "KV cache: target %d \u2192 %d (%zu slots released), draft %d \u2192 %d (%zu "
      "released)",
      r.target_before, r.target_after, r.target_slots_released.size(), r.draft_before,
      r.draft_after, r.draft_slots_released.size());
  if (r.target_blocks_freed > 0 || r.draft_blocks_freed > 0)
    ImGui::TextDisabled("blocks freed: target %d, draft %d", r.target_blocks_freed,
                        r.draft_blocks_freed);

  // Cost: draft passes vs the verify pass.
  ImGui::Text("cost: draft %d pass%s %s, %s, %s", r.draft_passes, r.draft_passes == 1 ? "" : "es",
              format_seconds(r.draft_seconds).c_str(), format_flops(r.draft_cost.flops).c_str(),
              format_bytes_moved(r.draft_cost.bytes()).c_str());
  ImGui::Text("      verify 1 pass of %d tokens %s, %s, %s", ctx.view.record->rows(),
              format_seconds(r.verify_seconds).c_str(), format_flops(r.verify_cost.flops).c_str(),
              format_bytes_moved(r.verify_cost.bytes()).c_str());

  // The lane so far.
  const SpecTotals& t = v.totals;
  ImGui::Spacing();
  if (ctx.heading_font) ImGui::PushFont(ctx.heading_font);
  ImGui::Text("acceptance %.0f%% (%d of %d drafts), %.2f tokens per target pass (%d rounds)",
              100.0 * t.acceptance(), t.accepted, t.drafted, t.tokens_per_pass(), t.rounds);
  if (ctx.heading_font) ImGui::PopFont();
}

}  // namespace ts::app
