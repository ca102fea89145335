#pragma once
// Drawing helpers the panels share: the colour palette (Okabe-Ito, safe for
// colour-blind viewers), a bar chart drawn with the ImGui draw list, token
// chips, hatching, and small layout helpers.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include <imgui.h>

namespace ts::app {

struct Palette {
  ImU32 text = 0, text_dim = 0, frame = 0, frame_border = 0;
  ImU32 prompt = 0;     // prompt tokens
  ImU32 generated = 0;  // generated tokens
  ImU32 accent = 0;     // "this step": new row, written slots, chosen token (orange)
  ImU32 accent2 = 0;    // second series: prefill, cached slots (blue)
  ImU32 selected = 0;   // a user's selection (outline)
  ImU32 removed = 0;    // greyed-out candidates
  ImU32 bar = 0;        // neutral bars
  ImU32 grid = 0;       // chart grid lines
  ImU32 error = 0, warning = 0, ok = 0;
};
const Palette& palette(bool light);

ImU32 with_alpha(ImU32 color, float alpha);

// Text with a coloured background pill (a label like "PREFILL").
void badge(const char* text, ImU32 bg, ImU32 fg);

// A "?" button at the right end of the current line; opens a popup with the text.
void help_button(const char* id, const char* title, const char* text);

// s cut to at most max_w pixels in the current font, on a UTF-8 character
// boundary, ending in "\u2026" when cut.
std::string fit_text(const std::string& s, float max_w);

// Text that wraps at the window's edge, in the dim colour.
void dim_text_wrapped(const char* fmt, ...) IM_FMTARGS(1);

// Text that wraps at the window's edge, only at blanks: ImGui's own wrap also
// breaks after a comma or a full stop, splitting "8,192" into "8," and "192".
// After SameLine its lines start under the first one.
void text_wrapped(const char* fmt, ...) IM_FMTARGS(1);

// The lines `text` wraps into at `width` pixels in the current font, broken
// only at blanks and newlines (a word wider than a line is cut where it must
// be); the first line leaves `first_line_offset` pixels. Blanks at a break are
// dropped.
std::vector<std::string_view> wrap_at_blanks(std::string_view text, float width,
                                             float first_line_offset = 0.0f);

// Text from data (a lesson step, a prompt, generated text), of any length,
// wrapped to the panel. Only the lines in view are drawn: Dear ImGui draws a
// wrapped text in one call with 16-bit vertex indices and stops the window
// when a call passes about 16,000 characters. `first_line_offset`: the width
// already taken on the current line (after SameLine), which the first line leaves.
void long_text_wrapped(std::string_view text, float first_line_offset = 0.0f);

// Diagonal hatching inside a rectangle (masked / removed).
void hatch_rect(ImDrawList* dl, ImVec2 a, ImVec2 b, ImU32 color, float spacing);

struct ChartSeries {
  std::string name;
  std::vector<double> values;  // one per bar; NaN = no bar
  ImU32 color = 0;
  std::vector<ImU32> bar_colors;  // optional: per-bar colour (overrides color)
};

struct ChartOptions {
  std::string title;
  std::function<std::string(double)> format;  // value -> label
  std::vector<std::string> x_labels;          // per bar; tooltip header and ticks
  int highlight = -1;                         // bar drawn with an outline (the viewed step)
  bool log_scale = false;
  bool stacked = false;              // one bar per x, the series stacked bottom up (linear scale)
  std::vector<std::string> x_notes;  // per bar: an extra tooltip line (empty: none)
};

// Grouped (or stacked) bars, one group per x. Returns the index of the bar group clicked
// this frame, or -1. Hover shows every series' value.
int bar_chart(const char* id, const std::vector<ChartSeries>& series, const ChartOptions& options,
              ImVec2 size);

// One token as a framed chip: the piece on top, the id below in small type.
struct ChipStyle {
  ImU32 fill = 0;
  ImU32 border = 0;
  float border_width = 1.0f;
  bool dashed = false;  // pending token: chosen, not yet in the cache
};
// Returns true when clicked. With continue_line the chip goes on the current
// line, or starts a new one when it does not fit.
bool token_chip(const char* id, const std::string& piece, const std::string& small,
                const ChipStyle& style, bool continue_line);

// A candidate token in a table cell: the piece, in the accent colour when it
// is the chosen token. Returns true when clicked.
bool token_cell(int id, const std::string& piece, bool chosen, ImU32 accent);

// Horizontal bar inside the current cell / line: value in [0, 1] of `width`.
void inline_bar(float fraction, float width, float height, ImU32 color, ImU32 background);

}  // namespace ts::app
