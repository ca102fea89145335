#include "app/panels/lens.h"

#include <algorithm>
#include <cstdio>
#include <string>

namespace ts::app {

const char* const LogitLensPanel::kHelp =
    "The logit lens reads the model's mind layer by layer: the residual stream after "
    "each block goes through the final layer norm and the unembedding, as if the "
    "model stopped there. Each row lists the five tokens that partial model would "
    "predict next, with their probabilities.\n\nThe last row is the model's real "
    "output. Watch where the final answer first appears, and how sure each layer is."
    "\n\nFor a DoLa lane a last column shows, for each candidate layer, the Jensen-Shannon "
    "divergence between that layer's prediction and the final layer's, as DoLa measured it "
    "(read without the final layer norm, as Hugging Face does, so it is not this table's "
    "row); the premature layer it contrasted with is marked. Hugging Face says DoLa is not "
    "recommended for small models: it is shown here anyway, that is the lesson.";

std::string dola_lens_cell(const DolaStep& d, int layer) {
  for (size_t i = 0; i < d.candidate_layers.size(); ++i) {
    if (d.candidate_layers[i] != layer) continue;
    char b[64];
    std::snprintf(b, sizeof b, "JS %.3f%s", i < d.divergence.size() ? d.divergence[i] : 0.0f,
                  layer == d.premature_layer ? " \u25C0 premature" : "");
    return b;
  }
  return "";
}

void LogitLensPanel::draw(PanelContext& ctx) {
  if (!begin_panel(ctx, PanelId::kLogitLens)) return;
  const StepView& v = ctx.view;
  if (!ctx.snap || !ctx.ctl.worker() || !ctx.ctl.analysis()) {
    empty_hint(ctx, ctx.ctl.needs_model_line().c_str());
    panel_help_button(PanelId::kLogitLens);
    end_panel();
    return;
  }
  const SessionSnapshot& snap = *ctx.snap;
  const std::string after = v.cached > 0 ? token_piece(snap, v.tokens[v.cached - 1]) : "";
  if (v.record)
    ImGui::Text("Next token after \u201C%s\u201D (position %d), layer by layer", after.c_str(),
                v.cached - 1);
  else
    ImGui::TextUnformatted("What each layer would predict");
  panel_help_button(PanelId::kLogitLens);
  if (!v.record) {
    empty_hint(ctx,
               "Press Space: after prefill, each layer's guess for the next token "
               "appears here.");
    end_panel();
    return;
  }
  if (v.record->residuals.empty()) {
    empty_hint(ctx,
               "This step kept no residual stream (the session was started with residuals "
               "off).");
    end_panel();
    return;
  }
  const auto rows =
      ctx.ctl.analysis()->logit_lens(*ctx.ctl.worker(), snap.history[v.step], *v.record);
  if (!rows) {
    empty_hint(ctx, "Reading the residual stream through the unembedding...");
    end_panel();
    return;
  }
  const int chosen = v.record->chosen_token;
  const int top1_final = rows->back().top.empty() ? -1 : rows->back().top[0].token;
  const ImGuiTableFlags flags = ImGuiTableFlags_BordersInnerH | ImGuiTableFlags_BordersOuter |
                                ImGuiTableFlags_SizingStretchSame | ImGuiTableFlags_ScrollY;
  const DolaStep* dola = v.record->dola.get();
  const int columns = 1 + static_cast<int>(rows->back().top.size()) + (dola ? 1 : 0);
  const float table_h =
      ImGui::GetContentRegionAvail().y - ImGui::GetTextLineHeightWithSpacing() * 2;
  if (ImGui::BeginTable("lens", columns, flags, ImVec2(0, std::max(table_h, 60.0f)))) {
    ImGui::TableSetupScrollFreeze(1, 1);
    ImGui::TableSetupColumn("read after", ImGuiTableColumnFlags_WidthFixed,
                            ImGui::CalcTextSize("layer 48 (output)").x);
    for (int c = 1; c < columns - (dola ? 1 : 0); ++c)
      ImGui::TableSetupColumn(("#" + std::to_string(c)).c_str());
    if (dola)
      ImGui::TableSetupColumn("DoLa", ImGuiTableColumnFlags_WidthFixed,
                              ImGui::CalcTextSize("JS 0.000 \u25C0 premature").x);
    ImGui::TableHeadersRow();
    const int n_layer = static_cast<int>(rows->size()) - 1;
    for (const LensRow& row : *rows) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      if (row.layer == 0)
        ImGui::TextUnformatted("embedding");
      else if (row.layer == n_layer)
        ImGui::Text("layer %d (output)", row.layer);
      else
        ImGui::Text("layer %d", row.layer);
      for (const LensPrediction& p : row.top) {
        ImGui::TableNextColumn();
        // Cell shade = probability; the token finally chosen in orange.
        const ImU32 base = p.token == chosen ? ctx.pal.accent : ctx.pal.accent2;
        ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg,
                               with_alpha(base, 0.15f + 0.75f * std::clamp(p.prob, 0.0f, 1.0f)));
        const std::string piece = token_piece(snap, p.token);
        ImGui::Text("%s", piece.c_str());
        ImGui::SameLine();
        ImGui::TextDisabled("%s", format_percent(p.prob).c_str());
        if (ImGui::IsItemHovered())
          ImGui::SetTooltip("token %d%s", p.token, p.token == chosen ? " (chosen this step)" : "");
      }
      if (dola) {
        ImGui::TableNextColumn();
        const std::string cell = dola_lens_cell(*dola, row.layer);
        if (row.layer == dola->premature_layer)
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.accent), "%s", cell.c_str());
        else
          ImGui::TextUnformatted(cell.c_str());
      }
    }
    ImGui::EndTable();
  }
  // From which layer on the output's top token stays the top guess.
  int first = -1;
  for (auto it = rows->rbegin(); it != rows->rend(); ++it) {
    if (it->top.empty() || it->top[0].token != top1_final) break;
    first = it->layer;
  }
  if (first >= 0) {
    const std::string piece = token_piece(snap, top1_final);
    if (first == 0)
      dim_text_wrapped(
          "The output's top token \u201C%s\u201D is already the top guess of the "
          "embedding alone.",
          piece.c_str());
    else
      dim_text_wrapped(
          "The output's top token \u201C%s\u201D is the top guess from layer "
          "%d on. Orange = the token this step chose.",
          piece.c_str(), first);
  }
  end_panel();
}

}  // namespace ts::app
