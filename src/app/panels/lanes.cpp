#include "app/panels/lanes.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <imgui_stdlib.h>

#include "util/error.h"

namespace ts::app {

const char* const LanesPanel::kHelp =
    "Several decoding strategies over the same prompt. The prompt is processed once "
    "(one prefill); every lane forks its KV cache sequence, so the prompt's blocks are "
    "shared, and each decode step feeds one token per lane in a single batched "
    "forward pass: the weights are read once for all lanes.\n\nEach column shows a "
    "lane's text, each step's token with p, its probability in the distribution the lane "
    "chose it from (after the lane's filters; a DoLa lane's contrast; tokenscope-cli "
    "--compare prints the same p), and a summary: "
    "log p (how likely the model finds the text), perplexity, distinct 2-grams "
    "(repetition) and speed, and how each lane chose at the step shown (\"chosen by\"). "
    "The highlighted row is where the lanes first choose differently.\n\nBeam search "
    "keeps the num_beams most likely sequences; its tree "
    "shows the beams kept, finished and pruned at every step. Click a token in the "
    "Logits panel to branch a new lane with that token at the viewed step.";

namespace {

struct Preset {
  const char* label;
  const char* strategy;
};
constexpr Preset kPresets[] = {{"greedy", "greedy"},
                               {"T 0.7", "temperature=0.7,seed=1"},
                               {"top-k 40", "top_k=40,seed=2"},
                               {"top-p 0.9", "top_p=0.9,seed=3"},
                               {"min-p 0.05", "min_p=0.05,seed=4"},
                               {"rep 1.3", "repetition_penalty=1.3"},
                               {"beams 4", "beams=4"},
                               {"contrastive 4", "contrastive=4,alpha=0.6"},
                               {"DoLa high", "dola=high"},
                               {"DoLa low", "dola=low"},
                               {"spec 4", "spec=4"},
                               {"lookahead", "lookahead"},
                               {"prompt lookup", "prompt_lookup"}};

}  // namespace

PanelBox LanesPanel::preset_box(const std::string& label) const {
  for (size_t i = 0; i < preset_boxes_.size() && i < std::size(kPresets); ++i)
    if (label == kPresets[i].label) return preset_boxes_[i];
  return {};
}

std::vector<std::pair<std::string, std::string>> lane_presets() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Preset& p : kPresets) out.emplace_back(p.label, p.strategy);
  return out;
}

namespace {

// The first history step where the lanes that have a record chose different tokens.
int first_divergence(const SessionSnapshot& snap) {
  for (int s = 0; s < static_cast<int>(snap.history.size()); ++s) {
    int token = -1;
    for (int l = 0; l < static_cast<int>(snap.lanes.size()); ++l) {
      const LaneStep* r = lane_record(snap, s, l);
      if (!r) continue;
      if (token >= 0 && r->chosen_token != token) return s;
      token = r->chosen_token;
    }
  }
  return -1;
}

// One line on how the lane's strategy chose this token (the compact view
// of its sampling stages; the Choosing panel has the full one).
std::string stage_summary(const SessionSnapshot& snap, const LaneStep& r) {
  char b[256];
  const int vocab = static_cast<int>(r.logits.size());
  if (is_branch_record(snap, &r))
    std::snprintf(b, sizeof(b), "%s\nbranched: you chose \u201C%s\u201D\np = %s, entropy %.2f nats",
                  describe(r.params).c_str(), token_piece(snap, r.chosen_token).c_str(),
                  format_percent(r.chosen_prob).c_str(), r.entropy);
  else if (r.beam)
    std::snprintf(b, sizeof(b), "%s\nbest beam's token; %zu candidates ranked",
                  describe(r.params).c_str(), r.beam->candidates.size());
  else if (r.contrastive)
    std::snprintf(b, sizeof(b),
                  "%s\nbest score of %d candidates: penalty %.3f\np = %s, entropy %.2f nats",
                  describe(r.params).c_str(), r.contrastive->k,
                  r.contrastive->candidates[r.contrastive->chosen].penalty,
                  format_percent(r.chosen_prob).c_str(), r.entropy);
  else if (r.params.do_sample)
    std::snprintf(
        b, sizeof(b),
        "%s\n%d of %d tokens kept by the filters; drew u = %.4f\np = %s, entropy %.2f nats",
        describe(r.params).c_str(), r.kept_tokens, vocab, r.uniform,
        format_percent(r.chosen_prob).c_str(), r.entropy);
  else
    std::snprintf(b, sizeof(b), "%s\nthe most likely token (argmax)\np = %s, entropy %.2f nats",
                  describe(r.params).c_str(), format_percent(r.chosen_prob).c_str(), r.entropy);
  return b;
}

std::string lane_status(const Lane& lane) {
  if (lane.closed) return "closed";
  if (lane.running()) return "running";
  return lane.stop_reason;
}

}  // namespace

// The same in a few words, short enough for a lane's column.
std::string stage_line(const SessionSnapshot& snap, const LaneStep& r) {
  char b[96];
  const int vocab = static_cast<int>(r.logits.size());
  if (is_branch_record(snap, &r))
    std::snprintf(b, sizeof(b), "branched: you chose \u201C%s\u201D (p %s)",
                  token_piece(snap, r.chosen_token).c_str(), format_percent(r.chosen_prob).c_str());
  else if (r.beam)
    std::snprintf(b, sizeof(b), "best of %zu beam candidates", r.beam->candidates.size());
  else if (r.contrastive)
    std::snprintf(b, sizeof(b), "best score of %d, penalty %.2f", r.contrastive->k,
                  r.contrastive->candidates[r.contrastive->chosen].penalty);
  else if (r.dola && r.params.do_sample)  // DoLa chooses from the layer contrast
    std::snprintf(b, sizeof(b), "drew u=%.3f from the contrast with layer %d", r.uniform,
                  r.dola->premature_layer);
  else if (r.dola)
    std::snprintf(b, sizeof(b), "argmax of the contrast with layer %d, %s kept",
                  r.dola->premature_layer, format_count(r.kept_tokens).c_str());
  else if (r.params.do_sample)
    std::snprintf(b, sizeof(b), "drew u=%.3f, %s kept", r.uniform,
                  format_count(r.kept_tokens).c_str());
  else
    std::snprintf(b, sizeof(b), "argmax of %s",
                  format_count(r.kept_tokens > 0 ? r.kept_tokens : vocab).c_str());
  return b;
}

void select_lane(AppState& state, const SessionSnapshot* snap, int lane) {
  if (lane == state.lane) return;
  if (!snap || snap->history.empty()) {
    state.lane_setup = state.strategies();
    if (lane < 0 || lane >= static_cast<int>(state.lane_setup.size())) return;
    state.lane = lane;
    state.strategy = state.lane_setup[lane];
  } else {
    state.lane = lane;
    state.strategy_synced = false;  // the Sampling panel shows this lane's parameters
  }
  state.view_step = -1;
}

void LanesPanel::draw(PanelContext& ctx) {
  if (!begin_panel(ctx, PanelId::kLanes)) return;
  if (!ctx.snap) {
    empty_hint(ctx, "No model loaded yet.");
    panel_help_button(PanelId::kLanes);
    end_panel();
    return;
  }
  if (ctx.snap->history.empty()) {
    draw_setup(ctx);
    end_panel();
    return;
  }
  const SessionSnapshot& snap = *ctx.snap;
  int open = 0;
  for (const Lane& l : snap.lanes) open += l.closed ? 0 : 1;
  const int closed = static_cast<int>(snap.lanes.size()) - open;
  if (open == 1)
    ImGui::Text("1 lane after one prefill of %d tokens",
                static_cast<int>(snap.prompt_tokens.size()));
  else
    ImGui::Text("%d lanes share one prefill of %d tokens", open,
                static_cast<int>(snap.prompt_tokens.size()));
  if (closed > 0) {
    ImGui::SameLine();
    ImGui::TextDisabled("(%d closed)", closed);
  }
  ImGui::SameLine();
  ImGui::TextDisabled("each step decodes every running lane in one batched forward");
  panel_help_button(PanelId::kLanes);
  // Said in words too: the marked row may have scrolled out of the table.
  const int diverge = first_divergence(snap);
  if (snap.lanes.size() > 1) {
    if (diverge < 0) {
      ImGui::TextDisabled("all lanes have chosen the same tokens so far");
    } else {
      const std::string where =
          diverge == 0 ? std::string("the prefill") : "decode step " + std::to_string(diverge);
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.accent),
                         "\u25C6 the lanes first choose differently at %s", where.c_str());
    }
  }
  const bool beam_lane = ctx.state.lane < static_cast<int>(snap.lanes.size()) &&
                         snap.lanes[ctx.state.lane].params.num_beams > 1;
  float avail = ImGui::GetContentRegionAvail().y;
  float tree_h = 0;
  if (beam_lane) {
    ImGui::Checkbox("beam tree of the selected lane", &show_tree_);
    avail = ImGui::GetContentRegionAvail().y;
    if (show_tree_) tree_h = std::max(avail * 0.45f, ImGui::GetFontSize() * 8);
  }
  (void)open;
  draw_columns(ctx, avail - tree_h, diverge);
  if (beam_lane && show_tree_) draw_beam_tree(ctx, ctx.state.lane, tree_h);
  end_panel();
}

void LanesPanel::draw_setup(PanelContext& ctx) {
  AppState& st = ctx.state;
  std::vector<SamplingParams> lanes = st.strategies();
  ImGui::TextWrapped(
      "Lanes share one prefill: the prompt goes through the model once, then "
      "every lane decodes with its own strategy, all in one batched step.");
  panel_help_button(PanelId::kLanes);
  edits_.resize(lanes.size());
  int remove = -1;
  const float font = ImGui::GetFontSize();
  if (ImGui::BeginTable("setup", 3, ImGuiTableFlags_SizingStretchProp)) {
    ImGui::TableSetupColumn("lane", ImGuiTableColumnFlags_WidthFixed, font * 4);
    ImGui::TableSetupColumn("strategy", ImGuiTableColumnFlags_WidthStretch);
    ImGui::TableSetupColumn("", ImGuiTableColumnFlags_WidthFixed, font * 1.6f);
    for (int i = 0; i < static_cast<int>(lanes.size()); ++i) {
      ImGui::PushID(i);
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      char name[24];
      std::snprintf(name, sizeof(name), "lane %d", i);
      if (ImGui::RadioButton(name, st.lane == i)) select_lane(st, ctx.snap, i);
      ImGui::TableNextColumn();
      ImGui::SetNextItemWidth(-FLT_MIN);
      if (editing_ != i) edits_[i] = format_strategy(lanes[i]);
      ImGui::InputText("##strategy", &edits_[i]);
      if (ImGui::IsItemActive()) editing_ = i;
      if (ImGui::IsItemDeactivated() && editing_ == i) editing_ = -1;
      if (ImGui::IsItemDeactivatedAfterEdit()) {
        try {
          const SamplingParams p = parse_strategy(edits_[i]);
          st.lane_setup = st.strategies();
          st.lane_setup[i] = p;
          if (st.lane == i) st.strategy = p;
          edit_error_.clear();
        } catch (const Error& e) {
          edit_error_ = "lane " + std::to_string(i) + ": " + e.what();
        }
      }
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", describe(lanes[i]).c_str());
      ImGui::TableNextColumn();
      if (lanes.size() > 1 && ImGui::SmallButton("x")) remove = i;
      ImGui::PopID();
    }
    ImGui::EndTable();
  }
  if (remove >= 0) {
    st.lane_setup = st.strategies();
    st.lane_setup.erase(st.lane_setup.begin() + remove);
    st.lane = std::min(st.lane, static_cast<int>(st.lane_setup.size()) - 1);
    st.strategy = st.lane_setup[st.lane];
  }
  if (!edit_error_.empty())
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.error), "%s", edit_error_.c_str());
  const bool full = st.strategies().size() >= 8;
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted(full ? "8 lanes (the most)" : "Add a lane:");
  ImGui::BeginDisabled(full);
  preset_boxes_.assign(std::size(kPresets), PanelBox{});
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  for (const Preset& p : kPresets) {
    // The buttons wrap onto more lines where the panel is narrow (a
    // projector's large font): each stays whole and clickable.
    ImGui::SameLine();
    const float w = ImGui::CalcTextSize(p.label).x + ImGui::GetStyle().FramePadding.x * 2;
    if (ImGui::GetCursorScreenPos().x + w > right) ImGui::NewLine();
    // A speculative lane needs the draft model: without one it would only be
    // refused at prefill, so the button is off and says how to get one.
    const bool needs_draft =
        parse_strategy(p.strategy).speculative() && ctx.ctl.draft_name().empty();
    ImGui::BeginDisabled(needs_draft);
    if (ImGui::SmallButton(p.label)) {
      st.lane_setup = st.strategies();
      st.lane_setup.push_back(parse_strategy(p.strategy));
    }
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    preset_boxes_[&p - kPresets] = PanelBox{a.x, a.y, b.x - a.x, b.y - a.y};
    ImGui::EndDisabled();
    if (needs_draft && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
      ImGui::SetTooltip("needs --draft-model DIR (start tokenscope with a draft model)");
  }
  ImGui::EndDisabled();
  dim_text_wrapped(
      "Type any strategy (e.g. \"top_p=0.9,temperature=0.8,seed=7\", \"beams=4,"
      "length_penalty=1.2\", \"contrastive=4,alpha=0.6\", \"lookahead=4,3,4\", "
      "\"prompt_lookup=10,2\"). Press Space to run the prefill "
      "once for every lane.");
}

void LanesPanel::draw_columns(PanelContext& ctx, float height, int diverge) {
  const SessionSnapshot& snap = *ctx.snap;
  const int n = static_cast<int>(snap.lanes.size());
  const float font = ImGui::GetFontSize();
  if (ctx.ctl.replaying() && replay_summaries_version_ != snap.version) {
    auto out = std::make_shared<std::vector<LaneSummary>>();
    for (int l = 0; l < n; ++l) out->push_back(summarize_lane(snap.history, snap.lanes, l));
    replay_summaries_ = std::move(out);
    replay_summaries_version_ = snap.version;
  }
  const auto summaries = ctx.ctl.replaying() ? replay_summaries_
                         : ctx.ctl.analysis() && ctx.ctl.worker()
                             ? ctx.ctl.analysis()->lane_summaries(*ctx.ctl.worker(), snap)
                             : nullptr;
  const ImGuiTableFlags flags = ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_RowBg |
                                ImGuiTableFlags_ScrollY | ImGuiTableFlags_SizingStretchSame;
  const float table_h = std::max(height, font * 6);
  if (!ImGui::BeginTable("lanes", n + 1, flags, ImVec2(0, table_h))) return;
  // In a tall table the header, the text, the summary and "chosen by" stay
  // while the steps scroll under them. Those rows take about 15 lines; in a
  // shorter table (a projector's large fonts) they would cover every step
  // row, so only the header stays and the rest scrolls with the steps.
  const bool room_for_steps = table_h >= ImGui::GetTextLineHeightWithSpacing() * 22;
  ImGui::TableSetupScrollFreeze(1, room_for_steps ? 7 : 1);
  ImGui::TableSetupColumn("", ImGuiTableColumnFlags_WidthFixed, font * 5.5f);
  for (int l = 0; l < n; ++l) ImGui::TableSetupColumn(("lane " + std::to_string(l)).c_str());
  // Header: which lane, its strategy, its state, and its commands.
  ImGui::TableNextRow(ImGuiTableRowFlags_Headers);
  ImGui::TableNextColumn();
  ImGui::TextDisabled("lane");
  for (int l = 0; l < n; ++l) {
    const Lane& lane = snap.lanes[l];
    ImGui::TableNextColumn();
    ImGui::PushID(l);
    char name[24];
    std::snprintf(name, sizeof(name), "lane %d", l);
    if (ImGui::Selectable(name, ctx.state.lane == l)) select_lane(ctx.state, ctx.snap, l);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("show this lane in the other panels");
    ImGui::TextColored(
        ImGui::ColorConvertU32ToFloat4(ctx.state.lane == l ? ctx.pal.accent : ctx.pal.text), "%s",
        describe(lane.params).c_str());
    if (lane.parent >= 0)
      ImGui::TextDisabled("branch of lane %d at step %d", lane.parent, lane.branch_step);
    if (lane.beam_search()) {
      // Its rows and its text can disagree: a step's best beam may be pruned later.
      ImGui::PushTextWrapPos(0.0f);
      ImGui::TextDisabled("text: the best beam now; steps: each step's best beam then");
      ImGui::PopTextWrapPos();
    }
    ImGui::TextDisabled("%s", lane_status(lane).c_str());
    if (!lane.closed && ctx.ctl.worker()) {
      ImGui::BeginDisabled(snap.busy || snap.running);
      if (ImGui::SmallButton("back")) ctx.ctl.worker()->back_lane(l);
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("undo this lane's last token only");
      ImGui::SameLine();
      if (n > 1 && ImGui::SmallButton("close")) ctx.ctl.worker()->close_lane(l);
      ImGui::EndDisabled();
    }
    ImGui::PopID();
  }
  // The text so far.
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextDisabled("text");
  for (int l = 0; l < n; ++l) {
    ImGui::TableNextColumn();
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(snap.tokenizer->decode(snap.lanes[l].generated).c_str());
    ImGui::PopTextWrapPos();
  }
  // The summary.
  auto summary_row = [&](const char* label, const char* tip, auto value) {
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextDisabled("%s", label);
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", tip);
    for (int l = 0; l < n; ++l) {
      ImGui::TableNextColumn();
      if (summaries && l < static_cast<int>(summaries->size()))
        ImGui::TextUnformatted(value((*summaries)[l]).c_str());
    }
  };
  auto fmt = [](const char* f, double v) {
    char b[48];
    if (std::isnan(v)) return std::string("-");
    std::snprintf(b, sizeof(b), f, v);
    return std::string(b);
  };
  summary_row(
      "log p",
      "sum of log-probabilities of the lane's tokens under the model (higher = more likely)",
      [&](const LaneSummary& s) { return fmt("%.2f", s.log_prob); });
  summary_row("perplexity",
              "exp(-mean log-probability): how surprised the model is by the lane's own text",
              [&](const LaneSummary& s) { return fmt("%.2f", s.perplexity); });
  summary_row("distinct 2",
              "distinct 2-grams / all 2-grams of the generated tokens (1 = no repetition)",
              [&](const LaneSummary& s) { return fmt("%.2f", s.distinct[1]); });
  summary_row("tokens/s", "the lane's tokens over the wall time of the steps that produced them",
              [&](const LaneSummary& s) { return fmt("%.1f", s.tokens_per_second); });
  // How each lane chose at the viewed step, visible without hovering.
  {
    const bool has_step =
        ctx.view.step >= 0 && ctx.view.step < static_cast<int>(snap.history.size());
    ImGui::TableNextRow();
    ImGui::TableNextColumn();
    ImGui::TextDisabled("chosen by");
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip(
          "how each lane's strategy chose its token at the step shown; hover a "
          "step's token below for details");
    for (int l = 0; l < n; ++l) {
      ImGui::TableNextColumn();
      if (const LaneStep* r = has_step ? lane_record(snap, ctx.view.step, l) : nullptr) {
        text_wrapped("%s", stage_line(snap, *r).c_str());  // "argmax of 50,257" kept whole
        if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", stage_summary(snap, *r).c_str());
      }
    }
  }
  // One row per step: the token each lane chose and its p (kLaneProbabilityLegend).
  ImGui::TableNextRow();
  ImGui::TableNextColumn();
  ImGui::TextDisabled("token, p");
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", kLaneProbabilityLegend);
  for (int s = 0; s < static_cast<int>(snap.history.size()); ++s) {
    ImGui::TableNextRow();
    if (s == diverge)
      ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg1, with_alpha(ctx.pal.accent, 0.18f));
    ImGui::TableNextColumn();
    char label[48];
    // The divergence mark goes with the step's label, not after the last lane.
    if (s == diverge)
      std::snprintf(label, sizeof(label), s == 0 ? "prefill \u25C6" : "step %d \u25C6", s);
    else
      std::snprintf(label, sizeof(label), s == 0 ? "prefill" : "step %d", s);
    ImGui::PushID(s + 1000);
    if (ImGui::Selectable(label, ctx.view.step == s && !ctx.view.latest)) ctx.state.view_step = s;
    ImGui::PopID();
    if (s == diverge && ImGui::IsItemHovered())
      ImGui::SetTooltip("the lanes first choose differently here");
    const LaneStep* first = nullptr;
    for (int l = 0; l < n; ++l) {
      ImGui::TableNextColumn();
      const LaneStep* r = lane_record(snap, s, l);
      if (!r) continue;
      if (!first) first = r;
      const std::string piece = token_piece(snap, r->chosen_token);
      const bool differs = r->chosen_token != first->chosen_token;
      ImGui::BeginGroup();
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(differs ? ctx.pal.accent : ctx.pal.text),
                         "%s", piece.c_str());
      ImGui::SameLine();
      ImGui::TextDisabled("%s", format_percent(lane_choice_probability(*r)).c_str());
      ImGui::EndGroup();
      if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", stage_summary(snap, *r).c_str());
    }
  }
  if (ctx.state.view_step < 0) ImGui::SetScrollHereY(1.0f);
  ImGui::EndTable();
}

void LanesPanel::draw_beam_tree(PanelContext& ctx, int lane, float height) {
  const SessionSnapshot& snap = *ctx.snap;
  std::vector<const BeamStep*> steps;
  for (int s = 0; s < static_cast<int>(snap.history.size()); ++s) {
    const LaneStep* r = lane_record(snap, s, lane);
    if (r && r->beam) steps.push_back(r->beam.get());
  }
  if (steps.empty()) {
    empty_hint(ctx, "No beam steps yet.");
    return;
  }
  const int beams = snap.lanes[lane].params.num_beams;
  const float font = ImGui::GetFontSize();
  const float col_w = font * 7.4f, row_h = font * 1.9f, node_w = font * 6.2f;
  const int rows = 2 * beams;
  const ImVec2 content(col_w * (static_cast<float>(steps.size()) + 1) + font,
                       row_h * static_cast<float>(rows) + font * 1.5f);
  ImGui::BeginChild("beamtree", ImVec2(0, height), true, ImGuiWindowFlags_HorizontalScrollbar);
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::Dummy(content);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  auto node_pos = [&](int column, int row) {
    return ImVec2(origin.x + font * 0.5f + col_w * static_cast<float>(column),
                  origin.y + font * 1.4f + row_h * static_cast<float>(row));
  };
  dl->AddText(origin, ctx.pal.text_dim,
              "kept beams (solid), finished (green), pruned (grey); numbers = cumulative log p");
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  std::string tip;
  auto draw_node = [&](ImVec2 p, const std::string& text, double cum, ImU32 fill, ImU32 fg) {
    const ImVec2 b(p.x + node_w, p.y + row_h * 0.8f);
    dl->AddRectFilled(p, b, fill, 3.0f);
    char num[24];
    std::snprintf(num, sizeof(num), "%.2f", cum);
    std::string shown = text.size() > 9 ? text.substr(0, 8) + "\u2026" : text;
    dl->PushClipRect(p, b, true);
    dl->AddText(ImVec2(p.x + 3, p.y + 1), fg, (shown + " " + num).c_str());
    dl->PopClipRect();
    if (mouse.x >= p.x && mouse.x <= b.x && mouse.y >= p.y && mouse.y <= b.y &&
        ImGui::IsWindowHovered())
      tip = text + "\ncumulative log p " + num;
  };
  // Column 0: the prompt (one beam).
  draw_node(node_pos(0, 0), "prompt", 0.0, ctx.pal.frame, ctx.pal.text);
  for (size_t k = 0; k < steps.size(); ++k) {
    const BeamStep& bs = *steps[k];
    int extra = beams;  // rows for the candidates that did not become beams
    for (const BeamCandidate& c : bs.candidates) {
      const int row = c.fate == CandidateFate::kKept ? c.new_beam : extra++;
      if (row >= rows) continue;
      const ImVec2 from = node_pos(static_cast<int>(k), c.parent);
      const ImVec2 to = node_pos(static_cast<int>(k) + 1, row);
      const ImU32 color = c.fate == CandidateFate::kKept       ? ctx.pal.accent
                          : c.fate == CandidateFate::kFinished ? ctx.pal.ok
                                                               : with_alpha(ctx.pal.text_dim, 0.6f);
      dl->AddLine(ImVec2(from.x + node_w, from.y + row_h * 0.4f), ImVec2(to.x, to.y + row_h * 0.4f),
                  color, c.fate == CandidateFate::kPruned ? 1.0f : 2.0f);
      const std::string piece = token_piece(snap, c.token);
      const ImU32 fill = c.fate == CandidateFate::kKept       ? with_alpha(ctx.pal.accent, 0.35f)
                         : c.fate == CandidateFate::kFinished ? with_alpha(ctx.pal.ok, 0.35f)
                                                              : with_alpha(ctx.pal.frame, 0.6f);
      draw_node(to, piece, c.sum_log_prob, fill,
                c.fate == CandidateFate::kPruned ? ctx.pal.text_dim : ctx.pal.text);
    }
  }
  if (!tip.empty()) ImGui::SetTooltip("%s", tip.c_str());
  ImGui::EndChild();
}

}  // namespace ts::app
