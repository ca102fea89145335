#pragma once
// How a token's raw bytes are shown to a person (GUI token strip, CLI).
// Tokens can be a fragment of a UTF-8 character or contain invisible bytes;
// the rendering makes every byte visible and is always valid UTF-8.
#include <string>
#include <string_view>

namespace ts {

// Glyphs standing in for invisible characters (all present in DejaVu Sans).
inline constexpr std::string_view kSpaceGlyph = "\u2423";    // ␣
inline constexpr std::string_view kNewlineGlyph = "\u21B5";  // ↵
inline constexpr std::string_view kTabGlyph = "\u2192";      // →

// True when `s` is entirely well-formed UTF-8: no truncated or stray bytes.
bool is_complete_utf8(std::string_view s);

// `s` with each invalid UTF-8 sequence replaced by U+FFFD, exactly as the
// JSON export writes text (nlohmann::json's error_handler_t::replace), so
// that printed text and exported text agree; valid text is returned as is.
std::string with_replacement_chars(std::string_view s);

// Visible rendering of raw token bytes: ' ' -> ␣, '\n' -> ↵, '\t' -> →,
// other control characters and bytes that are not (or not yet) a complete
// UTF-8 character -> "<0xE2>" per byte, C1 controls -> "<U+0085>"; everything
// else as itself.
std::string display_piece(std::string_view raw_bytes);

}  // namespace ts
