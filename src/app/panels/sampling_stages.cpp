// The Choosing panel's stage table (each stage's probabilities as bars,
// removed tokens greyed out) and the draw's cumulative strip; the rest of
// the panel is in sampling.cpp.
#include "app/panels/sampling.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/token_display.h"
#include "sampling/banned_words.h"
#include "sampling/distribution.h"

namespace ts::app {

namespace {

// Whether the record's banned-words stage removed `id` (a listed word, or
// the last token of a listed phrase after its prefix): its row is masked.
bool banned_here(const SamplingRecord& r, int id) {
  for (const StageRecord& st : r.stages)
    if (st.name == "banned_words")
      return std::binary_search(st.removed_ids_here.begin(), st.removed_ids_here.end(), id);
  return false;
}

// Whether the last item lies wholly inside the area drawn now (the stage
// table's child window, clipped by the panel around it): a row cut off at
// the bottom, or scrolled out of view, does not count as readable.
bool row_fully_visible(ImVec2 child_min, ImVec2 child_max) {
  const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
  const ImDrawList* dl = ImGui::GetWindowDrawList();
  const float top = std::max(child_min.y, dl->GetClipRectMin().y);
  const float bottom = std::min(child_max.y, dl->GetClipRectMax().y);
  return a.y >= top - 0.5f && b.y <= bottom + 0.5f;
}

}  // namespace

void SamplingPanel::draw_stages(PanelContext& ctx, float below) {
  const SamplingRecord& r = *rec_;
  const float font = ImGui::GetFontSize();
  // Stages shown: raw, the active ones, final (the controls above say which are off).
  std::vector<int> shown;
  for (int s = 0; s < static_cast<int>(r.stages.size()); ++s)
    if (s == 0 || s + 1 == static_cast<int>(r.stages.size()) || r.stages[s].active)
      shown.push_back(s);
  const bool branched = ctx.view.branched;
  const int chosen = branched ? ctx.view.record->chosen_token : r.draw.chosen_token;
  const int vocab = static_cast<int>(r.final_probs.size());
  if (branched) {
    headline_ = "branched: you chose \u201C" + token_piece(*ctx.snap, chosen) + "\u201D";
    ImGui::TextUnformatted(headline_.c_str());
    ImGui::SameLine();
    dim_text_wrapped("p = %s; the strategy chose \u201C%s\u201D",
                     format_percent(ctx.view.record->chosen_prob).c_str(),
                     token_piece(*ctx.snap, r.draw.chosen_token).c_str());
  } else {
    headline_ = std::string(r.params.do_sample ? "drawn" : "greedy argmax") +
                (r.params.dola() ? " of the DoLa contrast" : "") + " \u2192 \u201C" +
                token_piece(*ctx.snap, chosen) + "\u201D";
    ImGui::TextUnformatted(headline_.c_str());
    ImGui::SameLine();
    dim_text_wrapped("p = %s, %s of %s tokens kept", format_percent(r.draw.chosen_prob).c_str(),
                     format_count(r.stages.back().kept).c_str(), format_count(vocab).c_str());
  }

  // Bars are relative to the largest candidate of each stage; the numbers are absolute.
  std::vector<float> col_max(r.stages.size(), 1e-12f);
  for (int s : shown)
    for (int id : candidates_) col_max[s] = std::max(col_max[s], stage_probs_[s][id]);

  // Never shorter than the header, the kept row and kMinTableRows candidates
  // (with the controls unfolded in a short panel, the panel scrolls instead).
  const float line = ImGui::GetTextLineHeightWithSpacing();
  const float height = ImGui::GetContentRegionAvail().y - below;
  ImGui::BeginChild("stages", ImVec2(0, std::max(height, (kMinTableRows + 2) * line)), false);
  visible_rows_ = 0;
  const ImVec2 child_min = ImGui::GetWindowPos();
  const ImVec2 child_max(child_min.x + ImGui::GetWindowWidth(),
                         child_min.y + ImGui::GetWindowHeight());
  const int cols = static_cast<int>(shown.size()) + 1;
  // What each stage column needs so that nothing in it is cut: its header,
  // its kept count and a probability (or "removed"), plus a bar of at least
  // two characters. Where the panel is narrower (a projector font in a
  // 1024-pixel window), the bars go first; where even the numbers do not
  // fit, the columns keep their widths and the table scrolls sideways with
  // the token column held in place.
  std::vector<std::string> kept_text(r.stages.size());
  for (int s : shown) {
    const StageRecord& st = r.stages[s];
    kept_text[s] = st.removed_here > 0
                       ? format_count(st.kept) + " (\u2212" + format_count(st.removed_here) + ")"
                       : format_count(st.kept);
  }
  const float pad = ImGui::GetStyle().CellPadding.x * 2;
  // The widest a probability can print (format_percent), or "removed".
  float tw = 0;
  for (const char* widest : {"<0.001%", "0.000%", "100.0%", "removed"})
    tw = std::max(tw, ImGui::CalcTextSize(widest).x);
  const float token_w = font * 6.5f;
  std::vector<float> need_text(r.stages.size(), 0), need_bars(r.stages.size(), 0);
  // A few pixels a column of slack: ImGui rounds the edges and borders.
  float sum_text = token_w + pad + 4, sum_bars = token_w + pad + 4;
  for (int s : shown) {
    const float label_w =
        std::max(ImGui::CalcTextSize(stage_label(r.stages[s], r.params).c_str()).x,
                 ImGui::CalcTextSize(kept_text[s].c_str()).x);
    need_text[s] = std::max(label_w, tw) + pad;
    need_bars[s] = std::max(label_w, tw + font * 2.3f) + pad;
    sum_text += need_text[s] + 4;
    sum_bars += need_bars[s] + 4;
  }
  const float avail = ImGui::GetContentRegionAvail().x;
  table_layout_ = sum_bars <= avail   ? StageTableLayout::kBars
                  : sum_text <= avail ? StageTableLayout::kNumbers
                                      : StageTableLayout::kScrolled;
  const bool bars = table_layout_ == StageTableLayout::kBars;
  const bool scrolled = table_layout_ == StageTableLayout::kScrolled;
  clipped_cells_ = 0;
  // Counts a cell whose last item reaches past the cell's right edge.
  auto check_fit = [&](float cell_right) {
    if (ImGui::GetItemRectMax().x > cell_right + 0.5f) ++clipped_cells_;
  };
  const ImGuiTableFlags flags = ImGuiTableFlags_BordersInnerV |
                                (scrolled ? ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollX
                                          : ImGuiTableFlags_SizingStretchProp);
  if (ImGui::BeginTable("stagetable", cols, flags)) {
    if (scrolled) ImGui::TableSetupScrollFreeze(1, 0);
    ImGui::TableSetupColumn("token", ImGuiTableColumnFlags_WidthFixed, token_w);
    // Stretched columns share the room in proportion to what each needs, so
    // that each gets at least that; scrolled ones keep exactly that.
    for (int s : shown)
      ImGui::TableSetupColumn(
          r.stages[s].name.c_str(),
          scrolled ? ImGuiTableColumnFlags_WidthFixed : ImGuiTableColumnFlags_WidthStretch,
          scrolled ? need_text[s] - pad
          : bars   ? need_bars[s]
                   : need_text[s]);
    // Header: stage name and how many tokens it kept.
    ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
    ImGui::TableNextColumn();
    ImGui::TextDisabled("token");
    for (int s : shown) {
      ImGui::TableNextColumn();
      const StageRecord& st = r.stages[s];
      const float cell_right = ImGui::GetCursorScreenPos().x + ImGui::GetContentRegionAvail().x;
      ImGui::TextUnformatted(stage_label(st, r.params).c_str());
      check_fit(cell_right);
      if (ImGui::IsItemHovered()) {
        if (st.removed_here > 0)
          ImGui::SetTooltip("this stage removed %d tokens; %d remain", st.removed_here, st.kept);
        else
          ImGui::SetTooltip("%d tokens remain", st.kept);
      }
    }
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextDisabled("kept");
    for (int s : shown) {
      ImGui::TableNextColumn();
      const StageRecord& st = r.stages[s];
      const float cell_right = ImGui::GetCursorScreenPos().x + ImGui::GetContentRegionAvail().x;
      if (st.removed_here > 0)
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.accent), "%s",
                           kept_text[s].c_str());
      else
        ImGui::TextDisabled("%s", kept_text[s].c_str());
      check_fit(cell_right);
    }
    for (int id : candidates_) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      const std::string piece =
          banned_here(r, id) && ctx.snap->tokenizer
              ? display_piece(mask_banned_piece(ctx.snap->tokenizer->token_bytes(id)))
              : token_piece(*ctx.snap, id);
      if (token_cell(id, piece, id == chosen, ctx.pal.accent)) branch_with_token(ctx, id);
      if (row_fully_visible(child_min, child_max)) ++visible_rows_;
      if (ImGui::IsItemHovered() && id != chosen)
        ImGui::SetTooltip("%s", candidate_hint(ctx.snap, ctx.view, id));
      for (int s : shown) {
        ImGui::TableNextColumn();
        const StageRecord& st = r.stages[s];
        const bool removed = !std::isfinite(st.logits[id]);
        const bool removed_here = removed && std::binary_search(st.removed_ids_here.begin(),
                                                                st.removed_ids_here.end(), id);
        const float p = stage_probs_[s][id];
        const float w = ImGui::GetContentRegionAvail().x;
        const ImVec2 pos = ImGui::GetCursorScreenPos();
        const float cell_right = pos.x + w;
        char label[32];
        if (removed)
          std::snprintf(label, sizeof(label), removed_here ? "removed" : "");
        else
          std::snprintf(label, sizeof(label), "%s", format_percent(p).c_str());
        const float bar_w = std::max(w - tw - font * 0.3f, font);
        if (!bars) {
          // Numbers only: the removed ones greyed, the chosen one in the accent.
          const ImU32 col = removed        ? ctx.pal.removed
                            : id == chosen ? ctx.pal.accent
                                           : ImGui::GetColorU32(ImGuiCol_Text);
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(col), "%s", label);
        } else if (removed) {
          ImDrawList* dl = ImGui::GetWindowDrawList();
          const float y = pos.y + ImGui::GetTextLineHeight() * 0.15f;
          const float h = ImGui::GetTextLineHeight() * 0.7f;
          if (removed_here) {
            dl->AddRectFilled(ImVec2(pos.x, y), ImVec2(pos.x + bar_w, y + h),
                              with_alpha(ctx.pal.removed, 0.35f));
            hatch_rect(dl, ImVec2(pos.x, y), ImVec2(pos.x + bar_w, y + h), ctx.pal.removed,
                       5.0f * ctx.scale);
          }
          ImGui::Dummy(ImVec2(bar_w, ImGui::GetTextLineHeight()));
          ImGui::SameLine(0, font * 0.3f);
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.removed), "%s", label);
        } else {
          inline_bar(p / col_max[s], bar_w, font * 0.7f,
                     id == chosen ? ctx.pal.accent : ctx.pal.accent2,
                     ImGui::GetColorU32(ImGuiCol_FrameBg));
          ImGui::SameLine(0, font * 0.3f);
          ImGui::TextUnformatted(label);
        }
        check_fit(cell_right);
        if (ImGui::IsItemHovered() && !removed)
          ImGui::SetTooltip("\u201C%s\u201D after %s: logit %.3f, probability %.4f", piece.c_str(),
                            stage_label(st, r.params).c_str(), st.logits[id], p);
      }
    }
    ImGui::EndTable();
  }
  ImGui::EndChild();
}

void SamplingPanel::draw_strip(PanelContext& ctx) {
  const SamplingRecord& r = *rec_;
  const DrawRecord& d = r.draw;
  const float font = ImGui::GetFontSize();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  // Segments in draw order: kept tokens by probability (sampling: the CDF;
  // greedy: the final distribution's ranking).
  std::vector<int> ids;
  std::vector<float> cum;
  if (!d.greedy) {
    ids = d.cdf_tokens;
    cum = d.cdf;
  } else {
    ids = top_n(r.final_probs, 64);
    float c = 0;
    for (int id : ids) cum.push_back(c += r.final_probs[id]);
  }
  const bool branched = ctx.view.branched;
  const int chosen = branched ? ctx.view.record->chosen_token : d.chosen_token;
  if (branched)
    ImGui::Text("Branched: you chose \u201C%s\u201D, not the strategy's \u201C%s\u201D.",
                token_piece(*ctx.snap, chosen).c_str(),
                token_piece(*ctx.snap, d.chosen_token).c_str());
  else if (d.greedy)
    ImGui::Text("Greedy: no random number, the most likely token wins.");
  else
    ImGui::Text("Draw: u = %.4f (seed %llu, step %d) falls in \u201C%s\u201D", d.uniform,
                static_cast<unsigned long long>(r.params.seed), r.step_index,
                token_piece(*ctx.snap, d.chosen_token).c_str());
  if (compact_strip_) return;  // a short panel: the line above says it
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const ImVec2 p0 = ImGui::GetCursorScreenPos();
  const float h = font * 1.6f;
  const float w = avail.x;
  ImGui::InvisibleButton("strip", ImVec2(w, h + font * 1.3f));
  const bool hovered = ImGui::IsItemHovered();
  const float top = p0.y + font * 0.1f;
  dl->AddRectFilled(ImVec2(p0.x, top), ImVec2(p0.x + w, top + h),
                    ImGui::GetColorU32(ImGuiCol_FrameBg));
  // Tokens too thin to draw one by one still fill their share of the strip.
  if (!cum.empty())
    dl->AddRectFilled(ImVec2(p0.x, top), ImVec2(p0.x + cum.back() * w, top + h),
                      with_alpha(ctx.pal.accent2, 0.4f));
  float prev = 0;
  int hover_id = -1;
  float hover_p = 0;
  const float mx = ImGui::GetIO().MousePos.x;
  for (size_t i = 0; i < ids.size(); ++i) {
    const float x0 = p0.x + prev * w, x1 = p0.x + cum[i] * w;
    const bool is_chosen = ids[i] == chosen;
    ImU32 c = is_chosen ? ctx.pal.accent
                        : (i % 2 == 0 ? ctx.pal.accent2 : with_alpha(ctx.pal.accent2, 0.6f));
    if (x1 - x0 >= 1.5f || is_chosen) {
      dl->AddRectFilled(ImVec2(x0, top), ImVec2(std::max(x1, x0 + 2.0f * ctx.scale), top + h), c);
      dl->AddLine(ImVec2(x1, top), ImVec2(x1, top + h), ImGui::GetColorU32(ImGuiCol_WindowBg));
      const std::string piece = token_piece(*ctx.snap, ids[i]);
      const float tw = ImGui::CalcTextSize(piece.c_str()).x;
      if (tw + 4 < x1 - x0)
        dl->AddText(ImVec2((x0 + x1 - tw) * 0.5f, top + (h - font) * 0.5f),
                    IM_COL32(15, 15, 20, 255), piece.c_str());
    }
    if (hovered && mx >= x0 && mx < x1) {
      hover_id = ids[i];
      hover_p = cum[i] - prev;
    }
    prev = cum[i];
  }
  if (d.greedy && prev < 1.0f)
    dl->AddText(ImVec2(p0.x + prev * w + 4, top + (h - font) * 0.5f), dim, "others");
  // 0 and 1, and the random number.
  dl->AddText(ImVec2(p0.x, top + h + 1), dim, "0");
  dl->AddText(ImVec2(p0.x + w - ImGui::CalcTextSize("1").x, top + h + 1), dim, "1");
  dl->AddText(
      ImVec2(p0.x + w * 0.5f - ImGui::CalcTextSize("cumulative probability").x * 0.5f, top + h + 1),
      dim, "cumulative probability");
  if (!d.greedy && !branched) {
    const float ux = p0.x + static_cast<float>(d.uniform) * w;
    const ImU32 mark = ctx.pal.selected;
    dl->AddLine(ImVec2(ux, top - font * 0.1f), ImVec2(ux, top + h + font * 0.2f), mark,
                2.5f * ctx.scale);
    dl->AddTriangleFilled(ImVec2(ux - font * 0.35f, top + h + font * 0.55f),
                          ImVec2(ux + font * 0.35f, top + h + font * 0.55f),
                          ImVec2(ux, top + h + font * 0.1f), mark);
    const char* u = "u";
    dl->AddText(ImVec2(ux + font * 0.4f, top + h + 1), mark, u);
  }
  if (hover_id >= 0)
    ImGui::SetTooltip("\u201C%s\u201D: %s of the kept probability",
                      token_piece(*ctx.snap, hover_id).c_str(), format_percent(hover_p).c_str());
}

}  // namespace ts::app
