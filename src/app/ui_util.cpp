#include "app/ui_util.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include <imgui_internal.h>

namespace ts::app {

namespace {
constexpr ImU32 rgb(int r, int g, int b, int a = 255) { return IM_COL32(r, g, b, a); }
}  // namespace

const Palette& palette(bool light) {
  static const Palette dark = [] {
    Palette p;
    p.text = rgb(235, 235, 240);
    p.text_dim = rgb(160, 163, 175);
    p.frame = rgb(38, 40, 48);
    p.frame_border = rgb(90, 94, 108);
    p.prompt = rgb(30, 72, 112);     // deep blue
    p.generated = rgb(120, 72, 10);  // deep orange
    p.accent = rgb(230, 159, 0);     // Okabe-Ito orange
    p.accent2 = rgb(86, 180, 233);   // Okabe-Ito sky blue
    p.selected = rgb(255, 255, 255);
    p.removed = rgb(85, 87, 95);
    p.bar = rgb(0, 158, 115);  // Okabe-Ito bluish green
    p.grid = rgb(70, 72, 82);
    p.error = rgb(255, 110, 90);
    p.warning = rgb(240, 228, 66);
    p.ok = rgb(0, 158, 115);
    return p;
  }();
  static const Palette bright = [] {
    Palette p;
    p.text = rgb(20, 20, 25);
    p.text_dim = rgb(90, 92, 100);
    p.frame = rgb(236, 238, 242);
    p.frame_border = rgb(150, 152, 160);
    p.prompt = rgb(190, 222, 245);
    p.generated = rgb(250, 220, 170);
    p.accent = rgb(213, 94, 0);    // Okabe-Ito vermillion (contrast on white)
    p.accent2 = rgb(0, 114, 178);  // Okabe-Ito blue
    p.selected = rgb(0, 0, 0);
    p.removed = rgb(190, 192, 198);
    p.bar = rgb(0, 140, 100);
    p.grid = rgb(205, 207, 212);
    p.error = rgb(200, 30, 20);
    p.warning = rgb(150, 110, 0);
    p.ok = rgb(0, 130, 90);
    return p;
  }();
  return light ? bright : dark;
}

ImU32 with_alpha(ImU32 color, float alpha) {
  const ImU32 a = static_cast<ImU32>(std::clamp(alpha, 0.0f, 1.0f) * 255.0f + 0.5f);
  return (color & ~IM_COL32_A_MASK) | (a << IM_COL32_A_SHIFT);
}

void badge(const char* text, ImU32 bg, ImU32 fg) {
  const ImVec2 ts = ImGui::CalcTextSize(text);
  const ImGuiStyle& st = ImGui::GetStyle();
  const ImVec2 pad(st.FramePadding.x, st.FramePadding.y * 0.5f);
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const ImVec2 size(ts.x + pad.x * 2, ts.y + pad.y * 2);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(p, ImVec2(p.x + size.x, p.y + size.y), bg, size.y * 0.5f);
  dl->AddText(ImVec2(p.x + pad.x, p.y + pad.y), fg, text);
  ImGui::Dummy(size);
}

void help_button(const char* id, const char* title, const char* text) {
  ImGui::PushID(id);
  const float w = ImGui::CalcTextSize("?").x + ImGui::GetStyle().FramePadding.x * 2;
  const float right = ImGui::GetWindowContentRegionMax().x;
  // Beside the previous item when it leaves room, else right-aligned below
  // it: a "?" drawn over the end of a long line hides its last words.
  const float prev_end = ImGui::GetItemRectMax().x - ImGui::GetWindowPos().x + ImGui::GetScrollX();
  if (prev_end + ImGui::GetStyle().ItemSpacing.x <= right - w)
    ImGui::SameLine(right - w);
  else
    ImGui::SetCursorPosX(std::max(ImGui::GetCursorPosX(), right - w));
  if (ImGui::SmallButton("?")) ImGui::OpenPopup("help");
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("What am I looking at?");
  ImGui::SetNextWindowSizeConstraints(ImVec2(ImGui::GetFontSize() * 20, 0),
                                      ImVec2(ImGui::GetFontSize() * 34, ImGui::GetFontSize() * 40));
  if (ImGui::BeginPopup("help")) {
    ImGui::TextUnformatted(title);
    ImGui::Separator();
    ImGui::PushTextWrapPos(ImGui::GetFontSize() * 32);
    ImGui::TextUnformatted(text);
    ImGui::PopTextWrapPos();
    ImGui::EndPopup();
  }
  ImGui::PopID();
}

std::string fit_text(const std::string& s, float max_w) {
  if (ImGui::CalcTextSize(s.c_str()).x <= max_w) return s;
  // The longest start that fits with the ellipsis, found in one pass (a
  // token's piece may be thousands of characters long).
  ImFont* font = ImGui::GetFont();
  const float room = max_w - ImGui::CalcTextSize("\u2026").x;
  if (room <= 0) return "\u2026";
  const char* rest = nullptr;
  font->CalcTextSizeA(ImGui::GetFontSize(), room, 0.0f, s.data(), s.data() + s.size(), &rest);
  return s.substr(0, static_cast<size_t>(rest - s.data())) + "\u2026";
}

namespace {

// fmt and its arguments as one string.
std::string format_v(const char* fmt, va_list args) {
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(static_cast<size_t>(std::max(n, 0)), '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, fmt, args);
  return out;
}

// Short text wrapped at blanks from the cursor to the panel's edge; after
// SameLine its lines start under the first one, as ImGui's wrapped text does.
void wrapped_here(std::string_view text) {
  const float width = std::max(ImGui::GetContentRegionAvail().x, ImGui::GetFontSize() * 4);
  ImGui::BeginGroup();
  // Lines as close as in ImGui's own wrapped text.
  ImGui::PushStyleVar(ImGuiStyleVar_ItemSpacing, ImVec2(ImGui::GetStyle().ItemSpacing.x, 0));
  for (std::string_view line : wrap_at_blanks(text, width))
    ImGui::TextUnformatted(line.data(), line.data() + line.size());
  ImGui::PopStyleVar();
  ImGui::EndGroup();
}

}  // namespace

void dim_text_wrapped(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  const std::string text = format_v(fmt, args);
  ImGui::PushStyleColor(ImGuiCol_Text, ImGui::GetStyle().Colors[ImGuiCol_TextDisabled]);
  wrapped_here(text);
  ImGui::PopStyleColor();
  va_end(args);
}

std::vector<std::string_view> wrap_at_blanks(std::string_view text, float width,
                                             float first_line_offset) {
  ImFont* font = ImGui::GetFont();
  const float scale = ImGui::GetFontSize() / font->FontSize;
  std::vector<std::string_view> lines;
  const char* s = text.data();
  const char* const end = s + text.size();
  auto blank = [](char c) { return c == ' ' || c == '\t'; };
  for (;;) {
    const char* nl = std::find(s, end, '\n');
    const char* p = s;
    do {
      const float w = lines.empty() ? std::max(width - first_line_offset, 1.0f) : width;
      const char* eol = font->CalcWordWrapPositionA(scale, p, nl, w);
      // ImGui also breaks after '.', ',', ';', '!' and '?', which splits a
      // number at its thousands comma ("8," / "192"): go back to the blank
      // before the word, unless the word alone is wider than the line.
      if (eol > p && eol < nl && !blank(eol[-1]) && !blank(*eol)) {
        const char* b = eol;
        while (b > p && !blank(b[-1])) --b;
        if (b > p) eol = b;
      }
      if (eol <= p && p < nl) {  // not even one character fits: take one anyway
        unsigned int c = 0;
        eol = p + std::max(ImTextCharFromUtf8(&c, p, nl), 1);
      }
      const char* line_end = eol;
      while (line_end > p && blank(line_end[-1])) --line_end;  // no blanks at a wrap's end
      lines.emplace_back(p, static_cast<size_t>(line_end - p));
      p = eol;
      while (p < nl && blank(*p)) ++p;  // a wrap eats the blanks after it
    } while (p < nl);
    if (nl == end) break;
    s = nl + 1;
  }
  return lines;
}

void long_text_wrapped(std::string_view text, float first_line_offset) {
  const float width = std::max(ImGui::GetContentRegionAvail().x, ImGui::GetFontSize() * 4);
  const std::vector<std::string_view> lines = wrap_at_blanks(text, width, first_line_offset);
  ImGuiListClipper clipper;
  clipper.Begin(static_cast<int>(lines.size()));
  while (clipper.Step())
    for (int i = clipper.DisplayStart; i < clipper.DisplayEnd; ++i)
      ImGui::TextUnformatted(lines[i].data(), lines[i].data() + lines[i].size());
  clipper.End();
}

void text_wrapped(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  const std::string text = format_v(fmt, args);
  va_end(args);
  wrapped_here(text);
}

void hatch_rect(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 color, float spacing) {
  dl->PushClipRect(a, b, true);
  const float h = b.y - a.y;
  for (float x = a.x - h; x < b.x; x += spacing)
    dl->AddLine(ImVec2(x, b.y), ImVec2(x + h, a.y), color, 1.0f);
  dl->PopClipRect();
}

int bar_chart(const char* id, const std::vector<ChartSeries>& series, const ChartOptions& o,
              ImVec2 size) {
  ImGui::PushID(id);
  const ImGuiStyle& st = ImGui::GetStyle();
  const float font = ImGui::GetFontSize();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  ImGui::InvisibleButton("chart", size);
  const bool hovered = ImGui::IsItemHovered();
  const bool clicked = ImGui::IsItemClicked();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const ImU32 grid = ImGui::GetColorU32(ImGuiCol_Separator, 0.6f);

  size_t n = 0;
  double vmax = 0, vmin_pos = 0;
  for (const ChartSeries& s : series) {
    n = std::max(n, s.values.size());
    for (double v : s.values) {
      if (!std::isfinite(v)) continue;
      vmax = std::max(vmax, v);
      if (v > 0 && (vmin_pos == 0 || v < vmin_pos)) vmin_pos = v;
    }
  }
  const bool stacked = o.stacked && !o.log_scale;
  // Stacked: the scale reaches the tallest sum.
  auto stack_value = [&](size_t i, size_t upto) {
    double sum = 0;
    for (size_t s = 0; s < upto && s < series.size(); ++s)
      if (i < series[s].values.size() && std::isfinite(series[s].values[i]))
        sum += std::max(0.0, series[s].values[i]);
    return sum;
  };
  if (stacked)
    for (size_t i = 0; i < n; ++i) vmax = std::max(vmax, stack_value(i, series.size()));
  // Title on the left and the scale's top value on the right, above the plot.
  const float title_h = font + st.ItemInnerSpacing.y;
  if (!o.title.empty()) dl->AddText(origin, text, o.title.c_str());
  const ImVec2 p0(origin.x, origin.y + title_h);
  const ImVec2 p1(origin.x + size.x, origin.y + size.y - font * 1.05f);  // room for x ticks
  dl->AddRectFilled(p0, p1, ImGui::GetColorU32(ImGuiCol_FrameBg));
  int result = -1;
  if (n == 0 || vmax <= 0 || p1.y - p0.y < 4) {
    dl->AddText(ImVec2(p0.x + 4, p0.y + 2), dim, "no steps yet");
    ImGui::PopID();
    return -1;
  }
  const double lo = o.log_scale ? std::log10(vmin_pos) - 0.3 : 0.0;
  const double hi = o.log_scale ? std::log10(vmax) : vmax;
  auto ypos = [&](double v) {
    double t = o.log_scale ? (std::log10(std::max(v, 1e-300)) - lo) / (hi - lo) : v / hi;
    t = std::clamp(t, 0.0, 1.0);
    return static_cast<float>(p1.y - t * (p1.y - p0.y - 2));
  };
  const std::string top = "max " + (o.format ? o.format(vmax) : std::to_string(vmax));
  const float top_w = ImGui::CalcTextSize(top.c_str()).x;
  const float title_w = o.title.empty() ? 0.0f : ImGui::CalcTextSize(o.title.c_str()).x;
  if (title_w + top_w + font < size.x)
    dl->AddText(ImVec2(p1.x - top_w, origin.y), dim, top.c_str());
  dl->AddLine(ImVec2(p0.x, ypos(vmax)), ImVec2(p1.x, ypos(vmax)), grid);

  const float group_w = (p1.x - p0.x) / static_cast<float>(n);
  const float gap = std::min(group_w * 0.2f, 6.0f);
  const float bar_w =
      (group_w - gap) / static_cast<float>(stacked ? 1 : std::max<size_t>(series.size(), 1));
  const ImVec2 mouse = ImGui::GetIO().MousePos;
  int hover_index = -1;
  if (hovered)
    hover_index =
        std::clamp(static_cast<int>((mouse.x - p0.x) / group_w), 0, static_cast<int>(n) - 1);
  for (size_t i = 0; i < n; ++i) {
    const float gx = p0.x + group_w * i + gap * 0.5f;
    if (static_cast<int>(i) == o.highlight || static_cast<int>(i) == hover_index)
      dl->AddRectFilled(ImVec2(gx - gap * 0.5f, p0.y), ImVec2(gx + group_w - gap * 0.5f, p1.y),
                        ImGui::GetColorU32(ImGuiCol_HeaderHovered,
                                           static_cast<int>(i) == o.highlight ? 0.55f : 0.3f));
    for (size_t s = 0; s < series.size(); ++s) {
      if (i >= series[s].values.size() || !std::isfinite(series[s].values[i])) continue;
      const double v = series[s].values[i];
      const ImU32 c = i < series[s].bar_colors.size() ? series[s].bar_colors[i] : series[s].color;
      if (stacked) {
        if (v <= 0) continue;
        const double below = stack_value(i, s);
        dl->AddRectFilled(ImVec2(gx, ypos(below + v)),
                          ImVec2(gx + std::max(bar_w - 1.0f, 1.0f), ypos(below)), c);
        continue;
      }
      const float x = gx + bar_w * s;
      dl->AddRectFilled(ImVec2(x, ypos(v)), ImVec2(x + std::max(bar_w - 1.0f, 1.0f), p1.y), c);
    }
  }
  // Sparse x ticks: as many labels as fit.
  if (!o.x_labels.empty()) {
    float last_end = -1e9f;
    for (size_t i = 0; i < n && i < o.x_labels.size(); ++i) {
      // A word wider than its bar shrinks to its first letter ("prefill" -> "p");
      // numbers stay whole and are skipped where they would overlap.
      std::string label = o.x_labels[i];
      if (ImGui::CalcTextSize(label.c_str()).x > group_w && label.size() > 1 &&
          static_cast<unsigned char>(label[0]) < 0x80 &&
          !std::isdigit(static_cast<unsigned char>(label[0])))
        label = label.substr(0, 1);
      const ImVec2 ts = ImGui::CalcTextSize(label.c_str());
      const float cx = std::clamp(p0.x + group_w * (i + 0.5f) - ts.x * 0.5f, p0.x, p1.x - ts.x);
      if (cx < last_end + 4) continue;
      dl->AddText(ImVec2(cx, p1.y + 1), dim, label.c_str());
      last_end = cx + ts.x;
    }
  }
  if (hover_index >= 0) {
    ImGui::BeginTooltip();
    if (static_cast<size_t>(hover_index) < o.x_labels.size())
      ImGui::TextUnformatted(o.x_labels[hover_index].c_str());
    for (const ChartSeries& s : series) {
      if (static_cast<size_t>(hover_index) >= s.values.size()) continue;
      const double v = s.values[hover_index];
      if (stacked && !(v > 0)) continue;  // a segment this bar does not have
      const std::string label = o.format ? o.format(v) : std::to_string(v);
      if (s.name.empty())
        ImGui::TextUnformatted(label.c_str());
      else
        ImGui::Text("%s: %s", s.name.c_str(), label.c_str());
    }
    if (static_cast<size_t>(hover_index) < o.x_notes.size() && !o.x_notes[hover_index].empty())
      ImGui::TextDisabled("%s", o.x_notes[hover_index].c_str());
    ImGui::EndTooltip();
    if (clicked) result = hover_index;
  }
  ImGui::PopID();
  return result;
}

bool token_chip(const char* id, const std::string& full_piece, const std::string& small,
                const ChipStyle& style, bool continue_line) {
  const float font = ImGui::GetFontSize();
  const float small_size = font * 0.72f;
  ImFont* f = ImGui::GetFont();
  // A token may be any length (a tokenizer's merges decide): a chip shows at
  // most kChipChars characters of it, the rest as an ellipsis.
  constexpr int kChipChars = 48;
  std::string piece = full_piece;
  size_t cut = 0;  // where the last character kept ends
  int chars = 0;
  for (size_t i = 0; i < piece.size(); ++i) {
    if ((static_cast<unsigned char>(piece[i]) & 0xC0) == 0x80) continue;
    if (++chars == kChipChars) cut = i;
    if (chars > kChipChars) {
      piece = piece.substr(0, cut) + "\u2026";
      break;
    }
  }
  const ImVec2 piece_size = ImGui::CalcTextSize(piece.c_str());
  const ImVec2 small_text = f->CalcTextSizeA(small_size, FLT_MAX, 0.0f, small.c_str());
  const float pad = font * 0.3f;
  const ImVec2 size(std::max(piece_size.x, small_text.x) + pad * 2,
                    piece_size.y + small_text.y + pad * 1.4f);
  // Wrap when the chip does not fit on this line.
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  if (continue_line) {
    ImGui::SameLine(0, font * 0.2f);
    if (ImGui::GetCursorScreenPos().x + size.x > right) ImGui::NewLine();
  }
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const bool clicked = ImGui::InvisibleButton(id, size);
  const bool hovered = ImGui::IsItemHovered();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 q(p.x + size.x, p.y + size.y);
  const float r = font * 0.2f;
  dl->AddRectFilled(p, q, style.fill, r);
  if (style.dashed) {
    const float dash = font * 0.35f;
    auto dashed = [&](ImVec2 a, ImVec2 b) {
      const float len = std::hypot(b.x - a.x, b.y - a.y);
      for (float t = 0; t < len; t += dash * 2) {
        const float t2 = std::min(t + dash, len);
        dl->AddLine(ImVec2(a.x + (b.x - a.x) * t / len, a.y + (b.y - a.y) * t / len),
                    ImVec2(a.x + (b.x - a.x) * t2 / len, a.y + (b.y - a.y) * t2 / len),
                    style.border, style.border_width);
      }
    };
    dashed(p, ImVec2(q.x, p.y));
    dashed(ImVec2(q.x, p.y), q);
    dashed(q, ImVec2(p.x, q.y));
    dashed(ImVec2(p.x, q.y), p);
  } else {
    dl->AddRect(p, q, style.border, r, 0, style.border_width);
  }
  if (hovered) dl->AddRect(p, q, ImGui::GetColorU32(ImGuiCol_Text), r, 0, 1.0f);
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);
  dl->AddText(ImVec2(p.x + (size.x - piece_size.x) * 0.5f, p.y + pad * 0.5f), text, piece.c_str());
  dl->AddText(f, small_size,
              ImVec2(p.x + (size.x - small_text.x) * 0.5f, p.y + pad * 0.7f + piece_size.y),
              ImGui::GetColorU32(ImGuiCol_TextDisabled), small.c_str());
  return clicked;
}

void inline_bar(float fraction, float width, float height, ImU32 color, ImU32 background) {
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float y = p.y + (ImGui::GetTextLineHeight() - height) * 0.5f;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRectFilled(ImVec2(p.x, y), ImVec2(p.x + width, y + height), background);
  dl->AddRectFilled(ImVec2(p.x, y),
                    ImVec2(p.x + width * std::clamp(fraction, 0.0f, 1.0f), y + height), color);
  ImGui::Dummy(ImVec2(width, ImGui::GetTextLineHeight()));
}

bool token_cell(int id, const std::string& piece, bool chosen, ImU32 accent) {
  ImGui::PushID(id);
  if (chosen) ImGui::PushStyleColor(ImGuiCol_Text, accent);
  const bool clicked = ImGui::Selectable(piece.c_str(), false);
  if (chosen) ImGui::PopStyleColor();
  ImGui::PopID();
  return clicked;
}

}  // namespace ts::app
