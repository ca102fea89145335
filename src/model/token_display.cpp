#include "model/token_display.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "model/unicode_categories.h"

namespace ts {

bool is_complete_utf8(std::string_view s) {
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Char c = decode_utf8(s, pos);
    if (!c.valid) return false;
    pos += c.len;
  }
  return true;
}

std::string with_replacement_chars(std::string_view s) {
  if (is_complete_utf8(s)) return std::string(s);
  // The export's own conversion, then read back: one rule for both.
  using nlohmann::json;
  const std::string dumped =
      json(std::string(s)).dump(-1, ' ', false, json::error_handler_t::replace);
  return json::parse(dumped).get<std::string>();
}

std::string display_piece(std::string_view raw_bytes) {
  std::string out;
  out.reserve(raw_bytes.size() + 8);
  char buf[16];
  for (size_t pos = 0; pos < raw_bytes.size();) {
    const Utf8Char c = decode_utf8(raw_bytes, pos);
    if (!c.valid || c.cp < 0x20 || c.cp == 0x7F) {
      if (c.cp == '\n') {
        out += kNewlineGlyph;
      } else if (c.cp == '\t') {
        out += kTabGlyph;
      } else {
        // A stray byte or a control byte: named, never passed through.
        std::snprintf(buf, sizeof buf, "<0x%02X>", unsigned(static_cast<uint8_t>(raw_bytes[pos])));
        out += buf;
      }
    } else if (c.cp == ' ') {
      out += kSpaceGlyph;
    } else if (c.cp >= 0x80 && c.cp <= 0x9F) {
      // C1 controls are valid UTF-8 but draw nothing (U+0085 is a line break).
      std::snprintf(buf, sizeof buf, "<U+%04X>", unsigned(c.cp));
      out += buf;
    } else {
      out.append(raw_bytes.substr(pos, c.len));
    }
    pos += c.len;
  }
  return out;
}

}  // namespace ts
