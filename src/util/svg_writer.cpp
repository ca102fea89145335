#include "util/svg_writer.h"

#include <cstdio>

namespace ts {

namespace {

// Length of the well-formed UTF-8 sequence at s[pos] that XML 1.0 may carry,
// or 0 when the byte there must be replaced.
size_t xml_char_length(std::string_view s, size_t pos) {
  const auto b0 = static_cast<uint8_t>(s[pos]);
  if (b0 < 0x80) return (b0 >= 0x20 || b0 == '\t' || b0 == '\n' || b0 == '\r') ? 1 : 0;
  size_t len;
  uint32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    cp = b0 & 0x0F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    cp = b0 & 0x07;
  } else {
    return 0;  // a continuation byte, an overlong lead (C0, C1) or beyond U+10FFFF
  }
  if (pos + len > s.size()) return 0;  // cut short: part of a character
  for (size_t i = 1; i < len; ++i) {
    const auto b = static_cast<uint8_t>(s[pos + i]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
  if (overlong || surrogate || cp > 0x10FFFF || cp == 0xFFFE || cp == 0xFFFF) return 0;
  return len;
}

void append_number(std::string& out, double v) {
  char b[32];
  std::snprintf(b, sizeof(b), "%.2f", v);
  // Trim trailing zeros: "12.50" -> "12.5", "3.00" -> "3".
  std::string s(b);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  if (s == "-0") s = "0";
  out += s;
}

std::string num(double v) {
  std::string s;
  append_number(s, v);
  return s;
}

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = xml_char_length(text, pos);
    if (len == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      ++pos;
      continue;
    }
    if (len == 1) {
      switch (text[pos]) {
        case '&':
          out += "&amp;";
          break;
        case '<':
          out += "&lt;";
          break;
        case '>':
          out += "&gt;";
          break;
        case '"':
          out += "&quot;";
          break;
        case '\'':
          out += "&apos;";
          break;
        case '\t':
          out += "&#9;";  // kept as a character: an attribute value would fold a raw tab
          break;
        case '\n':
          out += "&#10;";
          break;
        case '\r':
          out += "&#13;";
          break;
        default:
          out += text[pos];
      }
    } else {
      out.append(text.substr(pos, len));
    }
    pos += len;
  }
  return out;
}

std::string svg_color(uint8_t r, uint8_t g, uint8_t b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "#%02x%02x%02x", r, g, b);
  return buf;
}

SvgWriter::SvgWriter(double width, double height, std::string_view background) {
  out_ = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out_ += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + num(width) +
          "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
          "\" font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\">\n";
  if (!background.empty())
    out_ += "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"" +
            xml_escape(background) + "\"/>\n";
}

void SvgWriter::title(std::string_view text) {
  out_ += "<title>" + xml_escape(text) + "</title>\n";
}

void SvgWriter::defs(std::string_view markup) {
  out_ += "<defs>";
  out_ += markup;
  out_ += "</defs>\n";
}

void SvgWriter::begin_group(std::string_view attrs) {
  out_ += "<g";
  if (!attrs.empty()) {
    out_ += ' ';
    out_ += attrs;
  }
  out_ += ">\n";
  ++open_groups_;
}

void SvgWriter::end_group() {
  if (open_groups_ == 0) return;
  out_ += "</g>\n";
  --open_groups_;
}

void SvgWriter::rect(double x, double y, double w, double h, std::string_view fill,
                     std::string_view stroke, double stroke_width, std::string_view tooltip,
                     std::string_view extra_attrs) {
  out_ += "<rect x=\"";
  append_number(out_, x);
  out_ += "\" y=\"";
  append_number(out_, y);
  out_ += "\" width=\"";
  append_number(out_, w);
  out_ += "\" height=\"";
  append_number(out_, h);
  out_ += "\" fill=\"";
  out_ += xml_escape(fill);
  out_ += '"';
  if (stroke != "none" && !stroke.empty()) {
    out_ += " stroke=\"" + xml_escape(stroke) + "\" stroke-width=\"";
    append_number(out_, stroke_width);
    out_ += '"';
  }
  if (!extra_attrs.empty()) {
    out_ += ' ';
    out_ += extra_attrs;
  }
  if (tooltip.empty()) {
    out_ += "/>\n";
  } else {
    out_ += "><title>" + xml_escape(tooltip) + "</title></rect>\n";
  }
}

void SvgWriter::line(double x1, double y1, double x2, double y2, std::string_view stroke,
                     double stroke_width) {
  out_ += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y1) + "\" x2=\"" + num(x2) + "\" y2=\"" +
          num(y2) + "\" stroke=\"" + xml_escape(stroke) + "\" stroke-width=\"" + num(stroke_width) +
          "\"/>\n";
}

void SvgWriter::polygon(std::string_view points, std::string_view fill) {
  out_ += "<polygon points=\"" + xml_escape(points) + "\" fill=\"" + xml_escape(fill) + "\"/>\n";
}

void SvgWriter::text(double x, double y, std::string_view text, const TextStyle& style) {
  out_ += "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + num(style.size) +
          "\" fill=\"" + xml_escape(style.fill) + "\"";
  if (style.anchor == Anchor::kMiddle) out_ += " text-anchor=\"middle\"";
  if (style.anchor == Anchor::kEnd) out_ += " text-anchor=\"end\"";
  if (style.bold) out_ += " font-weight=\"bold\"";
  if (style.rotate != 0)
    out_ += " transform=\"rotate(" + num(style.rotate) + " " + num(x) + " " + num(y) + ")\"";
  // Spaces at either end of a token matter: keep them.
  out_ += " xml:space=\"preserve\">" + xml_escape(text) + "</text>\n";
}

std::string SvgWriter::finish() {
  while (open_groups_ > 0) end_group();
  out_ += "</svg>\n";
  return std::move(out_);
}

}  // namespace ts
