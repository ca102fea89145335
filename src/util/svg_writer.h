#pragma once
// A small SVG 1.1 writer for the exports meant for slides (attention map,
// logits, sampling stages, KV blocks): rectangles, lines, polygons and text,
// each text kept as a <text> element so that a slide tool can edit or
// restyle it.
//
// Why our own and not a library: Debian's cairo (libcairo2, LGPL-2.1 or
// MPL-1.1) has an SVG surface, but it writes every glyph as a path (<symbol>
// outlines referenced by <use>), not as <text>, so labels could not be
// edited or searched on a slide, and it brings pixman, fontconfig, freetype
// and libpng with it; librsvg only reads SVG. What the exports need is a few
// elements and correct XML escaping, which fits in this file.
//
// Escaping: text and attribute values can be any bytes (a token can be part
// of a UTF-8 character or hold control bytes). & < > " ' become entities;
// what XML 1.0 cannot carry at all (C0 controls other than tab, newline and
// carriage return, bytes that are not well-formed UTF-8, UTF-16 surrogates,
// U+FFFE / U+FFFF) becomes U+FFFD, one per byte, so the file always parses.
#include <cstdint>
#include <string>
#include <string_view>

namespace ts {

// The escaping above, for text content and attribute values alike.
std::string xml_escape(std::string_view text);

// "#rrggbb".
std::string svg_color(uint8_t r, uint8_t g, uint8_t b);

class SvgWriter {
 public:
  // An SVG document of width x height user units (pixels), with a white
  // background unless `background` is empty.
  SvgWriter(double width, double height, std::string_view background = "#ffffff");

  // <title> of the document (read by screen readers and file browsers).
  void title(std::string_view text);
  // Raw markup for <defs> (patterns, gradients); the caller escapes what it puts in.
  void defs(std::string_view markup);

  // Groups: attrs is raw attribute text, e.g. `id="cells"` (escape values with xml_escape).
  void begin_group(std::string_view attrs = {});
  void end_group();

  // A rectangle; fill / stroke are colours ("#rrggbb", "none", "url(#p)").
  // tooltip, when not empty, becomes the rectangle's <title>.
  void rect(double x, double y, double w, double h, std::string_view fill,
            std::string_view stroke = "none", double stroke_width = 0,
            std::string_view tooltip = {}, std::string_view extra_attrs = {});
  void line(double x1, double y1, double x2, double y2, std::string_view stroke,
            double stroke_width = 1);
  // points: "x1,y1 x2,y2 ...".
  void polygon(std::string_view points, std::string_view fill);

  enum class Anchor { kStart, kMiddle, kEnd };
  // The style owns its colour: a view could outlive the string it was set
  // from (`style.fill = cond ? some_string : "#..."` makes a temporary).
  struct TextStyle {
    double size = 14;
    std::string fill = "#1a1a1a";
    Anchor anchor = Anchor::kStart;
    bool bold = false;
    double rotate = 0;  // degrees, about (x, y)
  };
  // One line of text with its baseline at y; `text` is escaped here.
  void text(double x, double y, std::string_view text, const TextStyle& style);

  // The finished document.
  std::string finish();

 private:
  std::string out_;
  int open_groups_ = 0;
};

}  // namespace ts
