#include "app/panels/lookahead.h"

#include <algorithm>
#include <cstdio>

#include "app/view_model.h"
#include "trace/step_trace.h"

namespace ts::app {

const char* const LookaheadPanel::kHelp =
    "One pass of a lookahead or prompt-lookup lane: no draft model, and one forward pass "
    "that may commit several tokens. The pass feeds the last token x and, after it, "
    "candidate continuations to verify; the model's own choice at each of their rows says "
    "how many of a candidate's tokens it would have chosen itself. The longest such prefix "
    "is accepted, then the model's own token after it: on a greedy lane the output is plain "
    "greedy's, token for token.\n\nLookahead (\"lookahead\" or \"lookahead=W,N,G\") also "
    "feeds a window of N\u22121 rows by W columns of guesses (Jacobi iteration): each pass "
    "the model guesses the token after every cell of the last row, the rows move up and "
    "the guesses become the new last row (the cells the last pass changed are highlighted). "
    "Each column, read top to bottom with its new guess, is an n-gram for the pool; the "
    "pool's n-grams that start with x are the next pass's candidates (at most G).\n\nPrompt "
    "lookup (\"prompt_lookup\" or \"prompt_lookup=K,M\") finds the context's last M tokens "
    "earlier in the context and proposes the K tokens that followed them there. Both help "
    "most on text that repeats itself: a list, a refrain, code. Below: the rows fed, the "
    "pass's time, a stepper through the fed rows (each row's token, position, branch and the "
    "rows its mask lets it attend to), and the lane's tokens per pass so far.";

LookaheadTotals lookahead_totals(const SessionSnapshot& snap, int lane, int up_to_step) {
  LookaheadTotals t;
  const int last = std::min(up_to_step, static_cast<int>(snap.history.size()) - 1);
  for (int i = 0; i <= last; ++i) {
    const LaneStep* ls = find_lane_step(*snap.history[i], lane);
    if (!ls || !ls->lookahead) continue;
    ++t.passes;
    t.committed += static_cast<int>(ls->lookahead->committed.size());
    t.fed += ls->lookahead->fed();
  }
  return t;
}

std::string LookaheadRowBranch::text() const {
  switch (kind) {
    case kCandidate:
      return "verification candidate " + std::to_string(candidate + 1) + ", token " +
             std::to_string(index + 1);
    case kWindow:
      return "lookahead window row " + std::to_string(row + 1) + ", column " +
             std::to_string(col + 1);
    case kInput:
      break;
  }
  return "input: the last token x";
}

LookaheadRowBranch lookahead_row_branch(const LookaheadPassLayout& layout, int row) {
  LookaheadRowBranch b;
  if (layout.window_row >= 0 && layout.window_cols > 0 && row >= layout.window_row) {
    b.kind = LookaheadRowBranch::kWindow;
    b.row = (row - layout.window_row) / layout.window_cols;
    b.col = (row - layout.window_row) % layout.window_cols;
    return b;
  }
  for (size_t g = 0; g < layout.candidate_row.size() && g < layout.candidates.size(); ++g) {
    const int first = layout.candidate_row[g];
    if (row >= first && row < first + static_cast<int>(layout.candidates[g].size())) {
      b.kind = LookaheadRowBranch::kCandidate;
      b.candidate = static_cast<int>(g);
      b.index = row - first;
      return b;
    }
  }
  return b;
}

std::vector<int> lookahead_row_sees(const LookaheadPassLayout& layout, int row) {
  const size_t n = layout.tokens.size();
  std::vector<int> sees;
  if (row < 0 || static_cast<size_t>(row) >= n || layout.mask.size() < n * n) return sees;
  for (size_t j = 0; j < n; ++j)
    if (layout.mask[static_cast<size_t>(row) * n + j]) sees.push_back(static_cast<int>(j));
  return sees;
}

void LookaheadPanel::build_view(const PanelContext& ctx) {
  view_ = LookaheadPanelView{};
  const LaneStep* rec = ctx.view.record;
  if (!ctx.snap || !rec || !rec->lookahead) {
    view_.message =
        rec && rec->params.draft_free()
            ? "This lane's first pass comes at the next decode step (prefill feeds the prompt "
              "only)."
            : "Shows lookahead and prompt-lookup lanes: add a \"lookahead\" or \"prompt "
              "lookup\" lane in the Lanes panel and view it.";
    return;
  }
  const LookaheadPass& p = *rec->lookahead;
  const SessionSnapshot& snap = *ctx.snap;
  view_.has_pass = true;
  view_.prompt_lookup = p.prompt_lookup;
  if (!p.prompt_lookup) {
    view_.window_rows = p.window.rows;
    view_.window_cols = p.window.cols;
    for (size_t i = 0; i < p.window.tokens.size(); ++i) {
      view_.window_cells.push_back(token_piece(snap, p.window.tokens[i]));
      view_.window_changed.push_back(i < p.window.changed.size() ? p.window.changed[i] : 0);
    }
    for (int t : p.window_outputs) view_.window_next.push_back(token_piece(snap, t));
    view_.pool_size = p.pool_size;
    view_.new_ngrams = p.new_ngrams;
  }
  const LookaheadVerdict& v = p.verdict;
  view_.accepted_candidate = v.candidate;
  view_.matched = v.matched;
  if (v.matched < static_cast<int>(v.committed.size())) {
    view_.model_token = v.committed[v.matched];
    view_.model_piece = token_piece(snap, view_.model_token);
  }
  for (size_t g = 0; g < p.layout.candidates.size(); ++g) {
    LookaheadPanelView::Candidate c;
    c.tokens = p.layout.candidates[g];
    for (int t : c.tokens) c.pieces.push_back(token_piece(snap, t));
    while (c.agree < static_cast<int>(c.tokens.size()) &&
           c.agree < static_cast<int>(v.committed.size()) &&
           c.tokens[c.agree] == v.committed[c.agree])
      ++c.agree;
    c.accepted = static_cast<int>(g) == v.candidate;
    view_.candidates.push_back(std::move(c));
  }
  for (int t : p.committed) view_.committed.push_back(token_piece(snap, t));
  view_.sampled = !v.tried.empty();
  view_.fed = p.fed();
  view_.seconds = p.seconds;
  // The stepper's row: kept while the passes have it, else the last one.
  row_ = std::clamp(row_, 0, std::max(0, view_.fed - 1));
  view_.row = row_;
  if (row_ < view_.fed) {
    view_.row_token = p.layout.tokens[row_];
    view_.row_piece = token_piece(snap, view_.row_token);
    view_.row_position =
        row_ < static_cast<int>(p.layout.positions.size()) ? p.layout.positions[row_] : 0;
    view_.row_branch = lookahead_row_branch(p.layout, row_);
    view_.row_sees = lookahead_row_sees(p.layout, row_);
  }
  view_.totals = lookahead_totals(snap, ctx.view.lane, ctx.view.step);
}

void LookaheadPanel::draw(PanelContext& ctx) {
  if (!begin_panel(ctx, PanelId::kLookahead)) return;
  if (ctx.snap) {
    build_view(ctx);
  } else {
    view_ = LookaheadPanelView{};
    view_.message = ctx.ctl.needs_model_line();
  }
  if (view_.has_pass) {
    draw_pass(ctx);
  } else {
    if (ctx.snap)
      ImGui::TextWrapped("%s", view_.message.c_str());
    else
      empty_hint(ctx, view_.message.c_str());
    panel_help_button(PanelId::kLookahead);
  }
  end_panel();
}

namespace {

// A token's piece in quotes, cut to `width` pixels.
std::string quoted(const std::string& piece, float width) {
  return fit_text("\u201C" + piece + "\u201D", width);
}

}  // namespace

void LookaheadPanel::draw_pass(PanelContext& ctx) {
  const LookaheadPass& p = *ctx.view.record->lookahead;
  const LookaheadPanelView& v = view_;
  const Palette& pal = ctx.pal;
  const float font = ImGui::GetFontSize();
  const float cell_w = font * 5;
  const float line = ImGui::GetTextLineHeightWithSpacing();
  // One token per cell, cut to the cell's width; `clipped` counts a cell
  // whose text still ran past its right edge (tests read the count).
  int clipped = 0;
  const auto cell_text = [&](const std::string& piece) {
    ImGui::TableNextColumn();
    const float room = ImGui::GetContentRegionAvail().x;
    const float right = ImGui::GetCursorScreenPos().x + room;
    ImGui::TextUnformatted(quoted(piece, room).c_str());
    if (ImGui::GetItemRectMax().x > right + 0.5f) ++clipped;
  };
  // A table's height for `rows` rows (the header included) and room for the
  // sideways scrollbar a wide window or a long draft needs.
  const auto table_height = [&](int rows) {
    return line * static_cast<float>(rows) + ImGui::GetStyle().ScrollbarSize +
           ImGui::GetStyle().CellPadding.y * 2;
  };
  const ImGuiTableFlags table_flags = ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                                      ImGuiTableFlags_SizingFixedFit | ImGuiTableFlags_ScrollX;

  if (ctx.heading_font) ImGui::PushFont(ctx.heading_font);
  ImGui::Text("%s pass of lane %d: 1 forward pass, %d rows fed, %d token%s committed",
              v.prompt_lookup ? "Prompt-lookup" : "Lookahead", ctx.view.lane, v.fed,
              static_cast<int>(v.committed.size()), v.committed.size() == 1 ? "" : "s");
  if (ctx.heading_font) ImGui::PopFont();
  panel_help_button(PanelId::kLookahead);

  // Lookahead: the window as the pass fed it, and the next row it guessed.
  if (!v.prompt_lookup) {
    if (v.window_rows == 0 || v.window_cols == 0) {
      ImGui::TextDisabled("No window this pass (no room left in the context).");
    } else {
      ImGui::Text("Jacobi window: %d rows \u00D7 %d columns, cells the last pass changed marked",
                  v.window_rows, v.window_cols);
      const bool fed_window = p.layout.window_row >= 0;
      if (!fed_window) ImGui::TextDisabled("(left out of this pass: no room in the context)");
      if (ImGui::BeginTable("window", v.window_cols + 1, table_flags,
                            ImVec2(0, table_height(v.window_rows + 2)))) {
        ImGui::TableSetupColumn("", ImGuiTableColumnFlags_WidthFixed,
                                ImGui::CalcTextSize("next row").x);
        for (int c = 0; c < v.window_cols; ++c) {
          char label[16];
          std::snprintf(label, sizeof label, "col %d", c + 1);
          ImGui::TableSetupColumn(label, ImGuiTableColumnFlags_WidthFixed, cell_w);
        }
        ImGui::TableHeadersRow();
        for (int r = 0; r < v.window_rows; ++r) {
          ImGui::TableNextRow();
          ImGui::TableNextColumn();
          ImGui::TextDisabled("row %d", r + 1);
          for (int c = 0; c < v.window_cols; ++c) {
            const size_t i = static_cast<size_t>(r) * v.window_cols + c;
            cell_text(i < v.window_cells.size() ? v.window_cells[i] : "");
            if (i < v.window_changed.size() && v.window_changed[i])
              ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, with_alpha(pal.accent, 0.35f));
          }
        }
        if (!v.window_next.empty()) {
          ImGui::TableNextRow();
          ImGui::TableNextColumn();
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal.accent2), "next row");
          for (int c = 0; c < v.window_cols; ++c) {
            cell_text(c < static_cast<int>(v.window_next.size()) ? v.window_next[c] : "");
            ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, with_alpha(pal.accent2, 0.25f));
          }
        }
        ImGui::EndTable();
      }
      dim_text_wrapped(
          "Each cell's guess comes from the model's output at the cell above it; the next row "
          "is the model's guess after each cell of the last row. Each column with its new "
          "guess is an n-gram.");
    }
    ImGui::Text("n-gram pool: %d before the pass, %d added by it", v.pool_size, v.new_ngrams);
  }

  // The candidates verified.
  ImGui::Spacing();
  if (v.candidates.empty()) {
    ImGui::TextWrapped(v.prompt_lookup ? "No draft: the context's last tokens do not occur "
                                         "earlier in it, so the pass was a plain decode step."
                                       : "No candidate: the pool has no n-gram starting with "
                                         "the last token, so the pass verified nothing.");
  } else {
    if (v.prompt_lookup)
      ImGui::Text("Draft copied from the context: %zu tokens, %d accepted",
                  v.candidates[0].tokens.size(), v.matched);
    else
      ImGui::Text("Candidates from the pool: %zu verified, %s", v.candidates.size(),
                  v.accepted_candidate >= 0
                      ? ("#" + std::to_string(v.accepted_candidate + 1) + " accepted with " +
                         std::to_string(v.matched) + " token" + (v.matched == 1 ? "" : "s"))
                            .c_str()
                      : "none accepted");
    size_t longest = 0;
    for (const LookaheadPanelView::Candidate& c : v.candidates)
      longest = std::max(longest, c.tokens.size());
    if (ImGui::BeginTable("candidates", static_cast<int>(longest) + 2, table_flags,
                          ImVec2(0, table_height(static_cast<int>(v.candidates.size()) + 1)))) {
      ImGui::TableSetupColumn("#", ImGuiTableColumnFlags_WidthFixed, ImGui::CalcTextSize("#00").x);
      for (size_t i = 0; i < longest; ++i)
        ImGui::TableSetupColumn(std::to_string(i + 1).c_str(), ImGuiTableColumnFlags_WidthFixed,
                                cell_w);
      ImGui::TableSetupColumn("model's token after", ImGuiTableColumnFlags_WidthFixed,
                              std::max(cell_w, ImGui::CalcTextSize("model's token after").x));
      ImGui::TableHeadersRow();
      for (size_t g = 0; g < v.candidates.size(); ++g) {
        const LookaheadPanelView::Candidate& c = v.candidates[g];
        ImGui::TableNextRow();
        ImGui::TableNextColumn();
        if (c.accepted)
          ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(pal.ok), "%zu", g + 1);
        else
          ImGui::Text("%zu", g + 1);
        for (size_t i = 0; i < longest; ++i) {
          if (i >= c.tokens.size()) {
            ImGui::TableNextColumn();
            continue;
          }
          cell_text(c.pieces[i]);
          const bool accepted = c.accepted && static_cast<int>(i) < v.matched;
          const bool rejected =
              c.accepted ? static_cast<int>(i) == v.matched : static_cast<int>(i) == c.agree;
          if (accepted)
            ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, with_alpha(pal.ok, 0.35f));
          else if (rejected)
            ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, with_alpha(pal.error, 0.25f));
        }
        if (c.accepted && v.model_token >= 0) {
          cell_text(v.model_piece);
          ImGui::TableSetBgColor(ImGuiTableBgTarget_CellBg, with_alpha(pal.accent, 0.35f));
        } else {
          ImGui::TableNextColumn();
          ImGui::TextDisabled("-");
        }
      }
      ImGui::EndTable();
    }
    dim_text_wrapped(
        "Green: accepted (the model chose the same token itself); red: the first token it "
        "chose otherwise; orange: the model's own token after the accepted ones.");
  }

  // What the pass committed.
  ImGui::Spacing();
  std::string committed;
  for (const std::string& piece : v.committed) committed += "\u201C" + piece + "\u201D ";
  ImGui::TextUnformatted("Committed:");
  ImGui::SameLine();
  long_text_wrapped(committed, ImGui::CalcTextSize("Committed: ").x);
  if (v.model_token >= 0)
    ImGui::TextDisabled("%d accepted candidate token%s, then the model's own %s", v.matched,
                        v.matched == 1 ? "" : "s", quoted(v.model_piece, font * 10).c_str());
  if (v.sampled)
    dim_text_wrapped(
        "Sampled lane: at each depth the candidates' tokens were tried in turn, each accepted "
        "with its probability; when none was, the token was drawn from what was left.");
  ImGui::Text("cost: 1 pass of %d rows, %s, %s, %s", v.fed, format_seconds(v.seconds).c_str(),
              format_flops(p.cost.flops).c_str(), format_bytes_moved(p.cost.bytes()).c_str());
  view_.clipped_cells = clipped;
  draw_row_stepper(ctx);

  // The lane so far.
  const LookaheadTotals& t = v.totals;
  ImGui::Spacing();
  if (ctx.heading_font) ImGui::PushFont(ctx.heading_font);
  ImGui::Text("%.2f tokens per pass (%d tokens in %d passes, %d rows fed)", t.tokens_per_pass(),
              t.committed, t.passes, t.fed);
  if (ctx.heading_font) ImGui::PopFont();
}

}  // namespace ts::app

namespace ts::app {

void LookaheadPanel::draw_row_stepper(PanelContext& ctx) {
  const LookaheadPanelView& v = view_;
  if (v.fed <= 0) return;
  const LookaheadPassLayout& layout = ctx.view.record->lookahead->layout;
  const Palette& pal = ctx.pal;
  const float font = ImGui::GetFontSize();
  ImGui::Spacing();
  ImGui::PushID("rows");
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Fed row");
  ImGui::SameLine();
  if (ImGui::ArrowButton("prev", ImGuiDir_Left)) row_ = std::max(0, v.row - 1);
  ImGui::SameLine();
  ImGui::Text("%d / %d", v.row + 1, v.fed);
  ImGui::SameLine();
  if (ImGui::ArrowButton("next", ImGuiDir_Right)) row_ = std::min(v.fed - 1, v.row + 1);
  ImGui::SameLine();
  ImGui::TextWrapped("%s (id %d) at position %d: %s", quoted(v.row_piece, font * 8).c_str(),
                     v.row_token, v.row_position, v.row_branch.text().c_str());

  // Its mask row: one square per fed row, filled where it may attend, the
  // row itself outlined; a gap before each branch. Click a square to step there.
  const int n = v.fed;
  const float sq = font * 0.8f, pad = font * 0.15f, branch_gap = font * 0.5f;
  std::vector<uint8_t> sees(static_cast<size_t>(n), 0);
  for (int j : v.row_sees)
    if (j >= 0 && j < n) sees[static_cast<size_t>(j)] = 1;
  const auto starts_branch = [&](int j) {
    if (j == layout.window_row) return true;
    return std::find(layout.candidate_row.begin(), layout.candidate_row.end(), j) !=
           layout.candidate_row.end();
  };
  const float width = std::max(ImGui::GetContentRegionAvail().x, sq * 4);
  std::vector<ImVec2> at(static_cast<size_t>(n));
  float x = 0, y = 0;
  for (int j = 0; j < n; ++j) {
    if (j > 0 && starts_branch(j)) x += branch_gap;
    if (x + sq > width && x > 0) {
      x = 0;
      y += sq + pad;
    }
    at[static_cast<size_t>(j)] = ImVec2(x, y);
    x += sq + pad;
  }
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("mask", ImVec2(width, y + sq));
  const bool hovered = ImGui::IsItemHovered();
  const bool clicked = ImGui::IsItemClicked();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  int hover = -1;
  for (int j = 0; j < n; ++j) {
    const ImVec2 a(origin.x + at[static_cast<size_t>(j)].x,
                   origin.y + at[static_cast<size_t>(j)].y);
    const ImVec2 b(a.x + sq, a.y + sq);
    dl->AddRectFilled(
        a, b, sees[static_cast<size_t>(j)] ? pal.accent : ImGui::GetColorU32(ImGuiCol_FrameBg));
    if (j == v.row) dl->AddRect(a, b, pal.accent2, 0, 0, 2.0f);
    if (hovered && mouse.x >= a.x && mouse.x < b.x && mouse.y >= a.y && mouse.y < b.y) hover = j;
  }
  if (hover >= 0) {
    const LookaheadRowBranch b = lookahead_row_branch(layout, hover);
    ImGui::SetTooltip(
        "row %d: %s at position %d, %s%s", hover + 1,
        quoted(token_piece(*ctx.snap, layout.tokens[static_cast<size_t>(hover)]), font * 8).c_str(),
        layout.positions[static_cast<size_t>(hover)], b.text().c_str(),
        sees[static_cast<size_t>(hover)] ? " (seen by the selected row)" : "");
    if (clicked) row_ = hover;
  }
  std::string seen;
  for (int j : v.row_sees) seen += (seen.empty() ? "" : ", ") + std::to_string(j + 1);
  dim_text_wrapped("%s",
                   ("It attends to the cached context and fed rows " + seen +
                    " (filled): the mask keeps each branch from seeing the others, so one pass "
                    "computes them all as if each ran alone.")
                       .c_str());
  ImGui::PopID();
}

}  // namespace ts::app
