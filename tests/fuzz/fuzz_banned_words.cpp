// Banned-words lists (--ban-words FILE) and the stage built from them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "model/token_display.h"
#include "sampling/banned_words.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ts;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  BannedWordList list;
  try {
    list = parse_banned_word_list(text, "fuzz.txt");
  } catch (const Error&) {
    return 0;
  }
  // Every accepted entry is a trimmed, non-empty, valid line of text.
  FUZZ_CHECK(!list.entries.empty());
  for (const std::string& e : list.entries) {
    FUZZ_CHECK(!e.empty() && e.size() <= kMaxBannedEntryBytes);
    FUZZ_CHECK(e.front() != ' ' && e.front() != '\t' && e.back() != ' ' && e.back() != '\t');
    FUZZ_CHECK(e.front() != '#');
    FUZZ_CHECK(is_complete_utf8(e));
    FUZZ_CHECK(std::none_of(e.begin(), e.end(), [](char c) {
      const auto u = static_cast<unsigned char>(c);
      return (u < 0x20 && c != '\t') || u == 0x7f;
    }));
  }
  // A toy tokenizer: one token per byte (256 ids, 255 = end of text).
  const auto encode = [](std::string_view s) {
    std::vector<int> ids;
    for (char c : s) ids.push_back(static_cast<unsigned char>(c));
    return ids;
  };
  BannedTokens banned;
  try {
    banned = build_banned_tokens(list, encode, 256, 255);
  } catch (const Error&) {
    return 0;  // nothing left to ban (every form was the end of text)
  }
  FUZZ_CHECK(std::is_sorted(banned.sequences.begin(), banned.sequences.end()));
  FUZZ_CHECK(std::adjacent_find(banned.sequences.begin(), banned.sequences.end()) ==
             banned.sequences.end());
  FUZZ_CHECK(banned.singles.size() + banned.multi.size() == banned.sequences.size());
  // The stage after a context made of the input's last bytes: exactly the
  // banned ids become -inf, nothing else changes.
  std::vector<int> context = encode(text.substr(text.size() > 8 ? text.size() - 8 : 0));
  if (context.empty()) context.push_back(0);
  const std::vector<int> ids = banned_ids_for_context(banned, context);
  FUZZ_CHECK(std::is_sorted(ids.begin(), ids.end()));
  FUZZ_CHECK(std::adjacent_find(ids.begin(), ids.end()) == ids.end());
  std::vector<float> logits(256);
  for (int i = 0; i < 256; ++i) logits[i] = static_cast<float>(i % 7) - 3.0f;
  apply_banned_words(logits, banned, context);
  for (int i = 0; i < 256; ++i) {
    const bool is_banned = std::binary_search(ids.begin(), ids.end(), i);
    FUZZ_CHECK(is_banned ? logits[i] == -INFINITY : logits[i] == static_cast<float>(i % 7) - 3.0f);
  }
  return 0;
}
