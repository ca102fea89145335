#include "app/panels/prompt.h"

#include <cstdio>

#include <imgui_stdlib.h>

#include "model/token_display.h"
#include "model/unicode_categories.h"

namespace ts::app {

const char* const PromptPanel::kHelp =
    "The prompt is cut into tokens by GPT-2's byte-level BPE tokenizer. Each chip is "
    "one token: its text on top (a space shows as \u2423, a newline as \u21B5) and its "
    "id in the vocabulary below.\n\nBlue chips are the prompt, orange chips were "
    "generated. The dashed chip is the token the last step chose: it is not in the KV "
    "cache yet; the next decode step feeds it through the model.\n\nClick a chip to see "
    "what that token attends to in the Attention panel.";

void PromptPanel::draw(PanelContext& ctx) {
  if (!begin_panel(ctx, PanelId::kPrompt)) return;
  draw_editor(ctx);
  ImGui::Separator();
  draw_strip(ctx);
  end_panel();
}

void PromptPanel::draw_editor(PanelContext& ctx) {
  AppState& st = ctx.state;
  const float font = ImGui::GetFontSize();
  // Live token count of what is typed (the tokenizer is shared and const),
  // and where the model's context ends in it. The session's own prompt
  // counts as the tokens it holds: a reopened session's tokenizer has the
  // vocabulary but no merges, and would count it byte by byte.
  const bool session_prompt = ctx.snap && st.prompt_edit == ctx.snap->prompt_text &&
                              (!ctx.snap->prompt_tokens.empty() || ctx.ctl.replaying());
  if (ctx.snap && ctx.snap->tokenizer &&
      (preview_text_ != st.prompt_edit || preview_snapshot_ != ctx.snap)) {
    preview_text_ = st.prompt_edit;
    preview_snapshot_ = ctx.snap;
    preview_error_.clear();
    over_context_.clear();
    preview_count_ = -1;  // new text in a reopened session: no merges to count it with
    if (session_prompt || !ctx.ctl.replaying()) {
      try {
        const std::vector<TokenSpan> tokens =
            session_prompt ? ctx.snap->prompt_tokens
                           : ctx.snap->tokenizer->encode_prompt(preview_text_);
        preview_count_ = static_cast<int>(tokens.size());
        const int n_ctx = ctx.snap->config.n_ctx;
        if (n_ctx > 0 && preview_count_ > n_ctx) {
          // The last words that fit, so the teacher knows where to cut.
          const size_t end = tokens[n_ctx].byte_begin;
          size_t begin = end > 40 ? end - 40 : 0;
          while (begin > 0 && (static_cast<unsigned char>(preview_text_[begin]) & 0xC0) == 0x80)
            --begin;
          over_context_ = std::to_string(preview_count_) + " tokens: the model's context holds " +
                          std::to_string(n_ctx) + ". It ends after \u201C" +
                          (begin > 0 ? "\u2026" : "") + preview_text_.substr(begin, end - begin) +
                          "\u201D; shorten the prompt.";
        }
      } catch (const std::exception& e) {
        preview_count_ = -1;
        preview_error_ = e.what();
      }
    }
  }
  // Characters this Dear ImGui cannot hold (beyond U+FFFF: it keeps 16-bit
  // characters, and editing such text turns them into U+FFFD) and characters
  // the font has no glyph for (drawn as U+FFFD; the model still gets them).
  if (scanned_text_ != st.prompt_edit) {
    scanned_text_ = st.prompt_edit;
    beyond_bmp_ = 0;
    no_glyph_.clear();
    int listed = 0;
    for (size_t pos = 0; pos < scanned_text_.size();) {
      const Utf8Char c = decode_utf8(scanned_text_, pos);
      pos += c.len;
      if (!c.valid) continue;
      const bool beyond = c.cp > 0xFFFF;
      beyond_bmp_ += beyond ? 1 : 0;
      if (beyond || !ImGui::GetFont()->FindGlyphNoFallback(static_cast<ImWchar>(c.cp))) {
        char b[16];
        std::snprintf(b, sizeof(b), "U+%04X", static_cast<unsigned>(c.cp));
        if (no_glyph_.find(b) != std::string::npos) continue;
        if (++listed <= 6)
          no_glyph_ += (no_glyph_.empty() ? "" : " ") + std::string(b);
        else if (listed == 7)
          no_glyph_ += " \u2026";
      }
    }
  }
  const bool changed = ctx.snap && st.prompt_edit != ctx.snap->prompt_text;
  std::string hint;
  if (!preview_error_.empty())
    hint = "invalid";
  else if (ctx.snap && preview_count_ >= 0)
    hint = std::to_string(preview_count_) + (preview_count_ == 1 ? " token" : " tokens") +
           (changed && over_context_.empty() ? " (Enter)" : "");

  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Prompt");
  ImGui::SameLine();
  const ImGuiStyle& style = ImGui::GetStyle();
  const float button_w = ImGui::CalcTextSize("Set prompt").x + style.FramePadding.x * 2;
  const float help_w = ImGui::CalcTextSize("?").x + style.FramePadding.x * 2;
  // The field takes what the button, the token count and "?" leave.
  const float hint_w = hint.empty() ? 0 : ImGui::CalcTextSize(hint.c_str()).x + style.ItemSpacing.x;
  const float input_w =
      ImGui::GetContentRegionAvail().x - button_w - hint_w - help_w - style.ItemSpacing.x * 3;
  ImGui::SetNextItemWidth(std::max(input_w, font * 8));
  const bool enter = ImGui::InputText(
      "##prompt", &st.prompt_edit,
      ImGuiInputTextFlags_EnterReturnsTrue | (beyond_bmp_ > 0 ? ImGuiInputTextFlags_ReadOnly : 0));
  ImGui::SameLine();
  ImGui::BeginDisabled(!ctx.snap || !changed);
  const bool set = ImGui::Button("Set prompt");
  ImGui::EndDisabled();
  if ((set || (enter && changed)) && ctx.snap) {
    ctx.state.error_text.clear();
    ctx.ctl.set_prompt(st.prompt_edit, st.strategies());
    st.view_step = -1;
    st.attention.query = -1;
  }
  if (!hint.empty()) {
    ImGui::SameLine();
    const ImU32 col = !preview_error_.empty() || !over_context_.empty()
                          ? ctx.pal.error
                          : ImGui::GetColorU32(ImGuiCol_TextDisabled);
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(col), "%s", hint.c_str());
  }
  panel_help_button(PanelId::kPrompt);
  if (beyond_bmp_ > 0) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::ColorConvertU32ToFloat4(ctx.pal.warning));
    ImGui::PushTextWrapPos(0.0f);
    ImGui::Text(
        "Read-only: %d character%s beyond U+FFFF (emoji) that this text field would damage. "
        "The model gets the prompt exactly as given; to type another, clear it.",
        beyond_bmp_, beyond_bmp_ == 1 ? "" : "s");
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
    ImGui::SameLine();
    if (ImGui::SmallButton("Clear")) st.prompt_edit.clear();
  }
  if (!no_glyph_.empty())
    dim_text_wrapped(
        "Drawn as \uFFFD (no glyph in this font): %s. The tokens hold the real "
        "characters.",
        no_glyph_.c_str());
  if (!over_context_.empty()) {
    ImGui::PushStyleColor(ImGuiCol_Text, ImGui::ColorConvertU32ToFloat4(ctx.pal.error));
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextUnformatted(over_context_.c_str());
    ImGui::PopTextWrapPos();
    ImGui::PopStyleColor();
  }
}

void PromptPanel::draw_strip(PanelContext& ctx) {
  if (!ctx.snap) {
    empty_hint(ctx, "No model loaded yet.");
    return;
  }
  const SessionSnapshot& snap = *ctx.snap;
  const StepView& v = ctx.view;
  if (v.tokens.empty()) {
    empty_hint(ctx, "Type a prompt and press Enter.");
    return;
  }
  // Legend line.
  ImGui::AlignTextToFramePadding();
  badge("prompt", ctx.pal.prompt, ctx.pal.text);
  ImGui::SameLine();
  badge("generated", ctx.pal.generated, ctx.pal.text);
  ImGui::SameLine();
  // The longest legend that fits on the badges' line (a projector's panel is
  // narrow), the whole of it on hover.
  static constexpr const char* kLegends[] = {
      "dashed: chosen, not yet in the KV cache  \u00B7  click a token to see its attention",
      "dashed: chosen, not yet in the KV cache", "dashed: not yet cached"};
  const float room = ImGui::GetContentRegionAvail().x;
  const char* legend = kLegends[2];
  for (const char* l : kLegends) {
    if (ImGui::CalcTextSize(l).x <= room) {
      legend = l;
      break;
    }
  }
  ImGui::TextDisabled("%s", legend);
  if (legend != kLegends[0] && ImGui::IsItemHovered()) ImGui::SetTooltip("%s", kLegends[0]);

  ImGui::BeginChild("strip", ImVec2(0, 0), false);
  const int selected = ctx.state.attention.query;
  for (int p = 0; p < static_cast<int>(v.tokens.size()); ++p) {
    const int id = v.tokens[p];
    const bool prompt = p < v.prompt_len;
    const bool pending = p >= v.cached && p >= v.prompt_len;  // chosen, not fed yet
    ChipStyle cs;
    cs.fill = prompt    ? ctx.pal.prompt
              : pending ? with_alpha(ctx.pal.generated, 0.35f)
                        : ctx.pal.generated;
    cs.border = pending ? ctx.pal.accent : ctx.pal.frame_border;
    cs.border_width = pending ? 2.0f * ctx.scale : 1.0f;
    cs.dashed = pending;
    const bool is_query = selected == p || (selected < 0 && !pending && p == v.cached - 1);
    if (is_query && !pending) {
      cs.border = ctx.pal.selected;
      cs.border_width = 2.5f * ctx.scale;
    }
    ImGui::PushID(p);
    const std::string piece = context_piece(snap, id);
    if (token_chip("tok", piece, std::to_string(id), cs, p > 0) && !pending) {
      ctx.state.attention.query = selected == p ? -1 : p;
    }
    if (ImGui::IsItemHovered()) {
      ImGui::BeginTooltip();
      ImGui::Text("position %d \u00B7 token id %d", p, id);
      ImGui::Text("%s", prompt    ? "prompt token"
                        : pending ? "chosen by the last step; the next step feeds it"
                                  : "generated token");
      if (snap.tokenizer) {
        const std::string bytes = snap.tokenizer->token_bytes(id);
        std::string hex;
        char buf[8];
        for (unsigned char c : bytes) {
          std::snprintf(buf, sizeof(buf), "%02X ", c);
          hex += buf;
        }
        ImGui::TextDisabled("bytes: %s%s", hex.c_str(),
                            is_complete_utf8(bytes) ? "" : "(part of a UTF-8 character)");
      }
      if (!pending) ImGui::TextDisabled("click: show what it attends to");
      ImGui::EndTooltip();
    }
    ImGui::PopID();
  }
  // The text so far, as a reader sees it.
  if (snap.tokenizer && static_cast<int>(v.tokens.size()) > v.prompt_len) {
    ImGui::Spacing();
    std::vector<int> gen(v.tokens.begin() + v.prompt_len, v.tokens.end());
    const std::string text = visible_edges(snap.prompt_text + snap.tokenizer->decode(gen));
    ImGui::TextDisabled("Text so far:");
    ImGui::SameLine();
    long_text_wrapped(text, ImGui::GetItemRectSize().x + ImGui::GetStyle().ItemSpacing.x);
  }
  ImGui::EndChild();
}

}  // namespace ts::app
