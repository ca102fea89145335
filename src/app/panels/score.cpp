#include "app/panels/score.h"

#include <imgui_stdlib.h>

#include <algorithm>
#include <cstdio>

#include "session/session_worker.h"
#include "util/error.h"

namespace ts::app {

const char* const ScorePanel::kHelp =
    "Score a text: instead of letting the model write, give it the words and see how likely "
    "it finds each one.\n\nOne prefill runs over the prompt and the continuation together; "
    "the logits at every position are kept, and each token of the continuation is read off "
    "the position before it (the raw model: no temperature or filters). Each cell is a token, "
    "coloured by its probability (log scale). Hover a cell for its rank among all tokens, "
    "its surprisal in bits (-log2 p: 10 bits is as surprising as ten heads in a row) and "
    "the model's five most likely tokens there.\n\nThe totals: log-probability (the sum over "
    "the tokens) and perplexity (exp of minus the mean): a longer text can have a lower "
    "perplexity and still a lower total. With a second continuation the two are side by "
    "side and the first token where they differ is outlined. With an empty prompt the "
    "continuation is a whole text whose first token is the context.";

namespace {

std::string prob_text(double p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, p >= 0.01 ? "%.4f" : "%.2e", p);
  return buf;
}

ImU32 to_u32(Rgb8 c) { return IM_COL32(c.r, c.g, c.b, 255); }

// Black or white, whichever reads better on `c`.
ImU32 text_on(Rgb8 c) {
  const double luma = 0.299 * c.r + 0.587 * c.g + 0.114 * c.b;
  return luma > 140 ? IM_COL32(0, 0, 0, 255) : IM_COL32(255, 255, 255, 255);
}

// Text fields cannot hold characters beyond the Basic Multilingual Plane
// (emoji): ImGui would replace them. Those texts can be scored with the CLI.
bool beyond_bmp(const std::string& s) {
  return std::any_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) >= 0xF0; });
}

}  // namespace

void ScorePanel::score(SessionWorker& worker, const std::string& prompt, const std::string& a,
                       const std::string& b) {
  if (&worker != worker_) {
    shared_ = std::make_shared<Shared>();  // results of another model do not carry over
    worker_ = &worker;
  }
  prompt_ = prompt;
  text_a_ = a;
  text_b_ = b;
  initialised_ = true;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    shared_->busy = true;
  }
  worker.post([shared = shared_, prompt, a, b](Session& s) {
    std::shared_ptr<const ScoreResult> ra, rb;
    std::string error;
    try {
      ra = std::make_shared<const ScoreResult>(score_text(s.engine(), s.tokenizer(), prompt, a));
      if (!b.empty())
        rb = std::make_shared<const ScoreResult>(score_text(s.engine(), s.tokenizer(), prompt, b));
    } catch (const std::exception& e) {
      error = b.empty() || !ra ? e.what() : std::string("continuation 2: ") + e.what();
    }
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->busy = false;
    shared->error = error;
    // A refused text clears what was shown: figures of another text under
    // its error would read as this one's. A first continuation scored before
    // the second was refused is this text's, and stays.
    shared->results[0] = std::move(ra);
    shared->results[1] = error.empty() ? std::move(rb) : nullptr;
  });
}

std::shared_ptr<const ScoreResult> ScorePanel::result(int column) const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->results[column == 1 ? 1 : 0];
}

std::string ScorePanel::error() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->error;
}

bool ScorePanel::busy() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->busy;
}

void ScorePanel::draw_column(PanelContext& ctx, int column, const ScoreResult& s, int highlight) {
  const ImGuiStyle& style = ImGui::GetStyle();
  const float pad = 3.0f * ctx.scale;
  const float right = ImGui::GetCursorScreenPos().x + ImGui::GetContentRegionAvail().x;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  for (size_t i = 0; i < s.scored.size(); ++i) {
    const ScoredToken& t = s.scored[i];
    // Two lines: the token, and its probability (readable without hovering,
    // on a projector too).
    const std::string p = prob_text(t.probability);
    const ImVec2 text = ImGui::CalcTextSize(t.text.c_str()), ptext = ImGui::CalcTextSize(p.c_str());
    const ImVec2 size(std::max(text.x, ptext.x) + 2 * pad, text.y + ptext.y + 2 * pad);
    if (i > 0) {
      ImGui::SameLine(0, style.ItemSpacing.x * 0.5f);
      if (ImGui::GetCursorScreenPos().x + size.x > right) ImGui::NewLine();
    }
    ImGui::PushID(static_cast<int>(column * 100000 + i));
    ImGui::InvisibleButton("cell", size);
    ImGui::PopID();
    const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
    const Rgb8 c =
        colorize(static_cast<float>(t.probability), ctx.state.settings.colormap, color_range());
    dl->AddRectFilled(a, b, to_u32(c), 2.0f);
    dl->AddText(ImVec2(a.x + pad, a.y + pad), text_on(c), t.text.c_str());
    dl->AddText(ImVec2(a.x + pad, a.y + pad + text.y), with_alpha(text_on(c), 0.8f), p.c_str());
    if (static_cast<int>(i) == highlight)
      dl->AddRect(ImVec2(a.x - 2, a.y - 2), ImVec2(b.x + 2, b.y + 2), ctx.pal.accent, 2.0f, 0,
                  2.5f * ctx.scale);
    cells_.push_back({column, static_cast<int>(i), t.id, t.probability, c, a.x, a.y, b.x, b.y});
    if (ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      ImGui::Text("\"%s\" (token %d)", t.text.c_str(), t.id);
      ImGui::Text("probability %s, rank %d of %d", prob_text(t.probability).c_str(), t.rank,
                  ctx.snap ? ctx.snap->config.vocab_size : 0);
      ImGui::Text("surprisal %.2f bits (log p = %.4f)", t.surprisal_bits, t.log_prob);
      ImGui::Separator();
      ImGui::TextUnformatted("the model's top 5 here:");
      for (const ScoreAlternative& alt : t.top)
        ImGui::Text("  %s \"%s\" %s", alt.id == t.id ? "\u25B6" : " ", alt.text.c_str(),
                    prob_text(alt.probability).c_str());
      ImGui::EndTooltip();
    }
  }
  ImGui::Spacing();
  ImGui::Text("log-probability %.4f nats (%.2f bits of surprisal)", s.total_log_prob, s.total_bits);
  ImGui::Text("perplexity %.4g over %d tokens", s.perplexity, static_cast<int>(s.scored.size()));
}

void ScorePanel::draw(PanelContext& ctx) {
  cells_.clear();
  if (!begin_panel(ctx, PanelId::kScore)) return;
  SessionWorker* worker = ctx.ctl.worker();
  if (!ctx.snap || !worker) {
    empty_hint(ctx, ctx.ctl.needs_model_line().c_str());
    panel_help_button(PanelId::kScore);
    end_panel();
    return;
  }
  const float font = ImGui::GetFontSize();
  if (worker != worker_ && worker_ != nullptr) {
    shared_ = std::make_shared<Shared>();  // a new model: the old figures are not its
    worker_ = worker;
  }
  // The first time: the session's prompt and an example pair, scored at once
  // so the panel shows what it does.
  if (!initialised_) {
    score(*worker, ctx.snap->prompt_text, " nice and warm.", " nice and purple.");
  }
  const bool busy_now = busy();
  bool go = false;
  auto field = [&](const char* label, const char* id, std::string& text) {
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted(label);
    ImGui::SameLine(font * 9);
    ImGui::SetNextItemWidth(std::max(font * 8, ImGui::GetContentRegionAvail().x - font * 6));
    const bool ro = beyond_bmp(text);
    go |= ImGui::InputText(
        id, &text, ImGuiInputTextFlags_EnterReturnsTrue | (ro ? ImGuiInputTextFlags_ReadOnly : 0));
    if (ro && ImGui::IsItemHovered())
      ImGui::SetTooltip(
          "This text has characters beyond the Basic Multilingual Plane (emoji) "
          "that the field cannot edit; score it with tokenscope-cli --score.");
  };
  field("Prompt", "##prompt", prompt_);
  ImGui::SameLine();
  if (ImGui::SmallButton("session's")) prompt_ = ctx.snap->prompt_text;
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("Use the session's prompt");
  field("Continuation", "##a", text_a_);
  field("Compare with", "##b", text_b_);
  ImGui::BeginDisabled(busy_now);
  go |= ImGui::Button(busy_now ? "scoring..." : "Score");
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::TextDisabled(
      "one prefill over prompt + continuation; leave \"Compare with\" empty "
      "for one text");
  panel_help_button(PanelId::kScore);
  if (go && !busy_now) score(*worker, prompt_, text_a_, text_b_);
  if (const std::string err = error(); !err.empty())
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.error), "%s", err.c_str());

  // Legend: the colour of each decade of probability.
  ImGui::TextUnformatted("p:");
  for (double p : {1.0, 1e-1, 1e-2, 1e-3, 1e-4, 1e-5, 1e-6}) {
    ImGui::SameLine();
    const Rgb8 c = colorize(static_cast<float>(p), ctx.state.settings.colormap, color_range());
    char label[16];
    std::snprintf(label, sizeof label, p >= 0.01 ? "%g" : "%.0e", p);
    const ImVec2 ts = ImGui::CalcTextSize(label);
    const ImVec2 at = ImGui::GetCursorScreenPos();
    ImGui::Dummy(ImVec2(ts.x + font * 0.6f, ts.y));
    ImGui::GetWindowDrawList()->AddRectFilled(at, ImVec2(at.x + ts.x + font * 0.6f, at.y + ts.y),
                                              to_u32(c));
    ImGui::GetWindowDrawList()->AddText(ImVec2(at.x + font * 0.3f, at.y), text_on(c), label);
  }
  ImGui::SameLine();
  ImGui::TextDisabled("(log scale; 1e-06 and below share the darkest colour)");
  const auto a = result(0), b = result(1);
  if (!a) {
    empty_hint(ctx, busy_now ? "Scoring..." : "Type a continuation and press Score.");
    end_panel();
    return;
  }
  int highlight = -1;
  if (b) {
    const ScoreDifference d = first_difference(*a, *b);
    highlight = d.index;
    if (d.index < 0)
      ImGui::TextUnformatted("The two continuations are the same tokens.");
    else {
      auto side = [](const ScoredToken* t) {
        return t ? "\"" + t->text + "\" p=" + prob_text(t->probability) + " (rank " +
                       std::to_string(t->rank) + ")"
                 : std::string("(ended)");
      };
      if (ctx.heading_font) ImGui::PushFont(ctx.heading_font);
      ImGui::Text("First difference, token %d: %s vs %s", d.index + 1, side(d.a).c_str(),
                  side(d.b).c_str());
      if (ctx.heading_font) ImGui::PopFont();
    }
    if (!d.same_context) ImGui::TextDisabled("(the two texts have different contexts)");
  }
  ImGui::TextDisabled("after \"%s\"%s", a->prompt.c_str(),
                      a->prompt.empty() ? " (none: the first token is the context)" : "");
  const ImGuiTableFlags tf = ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchSame;
  if (ImGui::BeginTable("scores", b ? 2 : 1, tf)) {
    for (int col = 0; col < (b ? 2 : 1); ++col) {
      const ScoreResult& s = col == 0 ? *a : *b;
      ImGui::TableNextColumn();
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.accent2), "\"%s\"",
                         s.continuation.c_str());
      draw_column(ctx, col, s, highlight);
    }
    ImGui::EndTable();
  }
  end_panel();
}

}  // namespace ts::app
