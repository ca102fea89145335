#include "app/panels/dola_view.h"

#include <algorithm>
#include <cstdio>

#include "sampling/sampling_params.h"

namespace ts::app {
namespace {

DolaViewModel& last() {
  static DolaViewModel model;
  return model;
}

}  // namespace

const char* const kDolaHelp =
    "DoLa (Decoding by Contrasting Layers) reads an early layer's prediction the way the "
    "logit lens does, but without the final layer norm, as Hugging Face does. Of the "
    "candidate layers it takes the one whose prediction differs most from the final "
    "layer's (the bars: HF's divergence, summed over the vocabulary), keeps only the "
    "tokens with at least 0.1 x the final layer's top probability, and scores each "
    "log p_final - log p_early: tokens the model only became sure of in its late layers "
    "are promoted. The stages below then run on these scores (repetition penalty, and the "
    "filters when sampling). Hugging Face says DoLa is not recommended for small models: "
    "this 4-layer model shows the mechanism, not the gain in factuality.";

DolaViewModel dola_view_model(const SessionSnapshot& snap, const LaneStep& record) {
  DolaViewModel m;
  if (!record.dola) return m;
  const DolaStep& d = *record.dola;
  m.kept = d.kept;
  for (size_t i = 0; i < d.candidate_layers.size(); ++i)
    m.layers.push_back(
        {d.candidate_layers[i], d.divergence[i], d.candidate_layers[i] == d.premature_layer});
  for (size_t i = 0; i < d.top.size(); ++i) {
    const DolaToken& t = d.top[i];
    DolaViewModel::Row row;
    row.token = t.token;
    row.piece = token_piece(snap, t.token);
    row.final_logp = t.final_logp;
    row.premature_logp = t.premature_logp;
    row.contrast = t.contrast;
    row.final_rank = t.final_rank;
    row.contrast_rank = static_cast<int>(i);
    row.promoted = row.contrast_rank < row.final_rank;
    row.chosen = t.token == record.chosen_token;
    m.rows.push_back(std::move(row));
  }
  m.headline = "DoLa: layer " + std::to_string(d.premature_layer) +
               " contrasted with the final layer \u2192 \u201C" +
               token_piece(snap, record.chosen_token) + "\u201D";
  return m;
}

const DolaViewModel& last_dola_view() { return last(); }

void draw_dola_view(PanelContext& ctx, const LaneStep& record, float height) {
  if (!ctx.snap || !record.dola) return;
  DolaViewModel& m = last();
  m = dola_view_model(*ctx.snap, record);
  const float font = ImGui::GetFontSize();
  ImGui::BeginChild("##dola", ImVec2(0, std::max(height, font * 8)), false);
  ImGui::TextUnformatted(m.headline.c_str());
  ImGui::SameLine();
  help_button("dola_help", "DoLa", kDolaHelp);

  // One bar per candidate layer: its divergence from the final layer.
  float top = 1e-9f;
  for (const auto& l : m.layers) top = std::max(top, l.divergence);
  const bool single = m.layers.size() == 1;
  if (single)
    dim_text_wrapped("One candidate layer (%d): it is the premature layer, nothing is compared.",
                     m.layers[0].layer);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const float label_w = font * 5.5f;
  for (const auto& l : m.layers) {
    const ImVec2 at = ImGui::GetCursorScreenPos();
    const float w = std::max(ImGui::GetContentRegionAvail().x - label_w - font * 10, font * 4);
    char label[48];
    std::snprintf(label, sizeof label, "%s %d", l.layer == 0 ? "embed" : "layer", l.layer);
    dl->AddText(at, l.premature ? ctx.pal.accent : ctx.pal.text, label);
    const float frac = single ? 0.0f : std::clamp(l.divergence / top, 0.0f, 1.0f);
    const ImVec2 a(at.x + label_w, at.y + 2), b(at.x + label_w + w * frac, at.y + font - 1);
    dl->AddRectFilled(a, ImVec2(at.x + label_w + w, b.y), with_alpha(ctx.pal.frame, 0.6f));
    dl->AddRectFilled(a, b, l.premature ? ctx.pal.accent : ctx.pal.accent2);
    char value[48];
    std::snprintf(value, sizeof value, single ? "\u2014" : "%.4f%s", l.divergence,
                  l.premature ? "  \u25C0 premature" : "");
    dl->AddText(ImVec2(at.x + label_w + w + font * 0.4f, at.y),
                l.premature ? ctx.pal.accent : ctx.pal.text_dim, value);
    ImGui::Dummy(ImVec2(label_w + w, font * 1.15f));
  }

  // The kept tokens: log p final and premature, the contrast, and whether
  // the contrast ranks a token above where the final layer put it.
  ImGui::Text("%d token%s kept (p \u2265 0.1 \u00d7 the top p); highest contrast first:", m.kept,
              m.kept == 1 ? "" : "s");
  const ImGuiTableFlags flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingStretchProp;
  if (ImGui::BeginTable("dola_tokens", 6, flags,
                        ImVec2(0, std::max(ImGui::GetContentRegionAvail().y, font * 4)))) {
    ImGui::TableSetupScrollFreeze(0, 1);
    ImGui::TableSetupColumn("token");
    ImGui::TableSetupColumn("log p final");
    ImGui::TableSetupColumn("log p premature");
    ImGui::TableSetupColumn("contrast");
    ImGui::TableSetupColumn("rank final \u2192 contrast");
    ImGui::TableSetupColumn("");
    ImGui::TableHeadersRow();
    for (const auto& r : m.rows) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      if (r.chosen)
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.accent), "\u201C%s\u201D",
                           r.piece.c_str());
      else
        ImGui::Text("\u201C%s\u201D", r.piece.c_str());
      ImGui::TableNextColumn();
      ImGui::Text("%.3f", r.final_logp);
      ImGui::TableNextColumn();
      ImGui::Text("%.3f", r.premature_logp);
      ImGui::TableNextColumn();
      ImGui::Text("%+.3f", r.contrast);
      ImGui::TableNextColumn();
      ImGui::Text("%d \u2192 %d", r.final_rank + 1, r.contrast_rank + 1);
      ImGui::TableNextColumn();
      if (r.chosen)
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.accent), "\u2713 chosen");
      else if (r.promoted)
        ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.ok), "\u2191 promoted");
    }
    ImGui::EndTable();
  }
  ImGui::EndChild();
}

}  // namespace ts::app
