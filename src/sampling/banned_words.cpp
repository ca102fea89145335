#include "sampling/banned_words.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <limits>
#include <set>

#include "model/token_display.h"
#include "util/error.h"

namespace ts {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string capitalise_first(std::string_view s) {
  std::string out(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z')
    out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

// True when `context` ends with the first `prefix_len` tokens of `seq`.
bool ends_with_prefix(const std::vector<int>& context, const std::vector<int>& seq,
                      size_t prefix_len) {
  return std::equal(seq.begin(), seq.begin() + static_cast<long>(prefix_len),
                    context.end() - static_cast<long>(prefix_len));
}

}  // namespace

BannedWordList parse_banned_word_list(std::string_view text, const std::string& source) {
  BannedWordList list;
  list.source = source;
  size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string where = source + ":" + std::to_string(line_no) + ": ";
    for (char c : line) {
      const auto u = static_cast<unsigned char>(c);
      if (u == 0) throw Error(where + "the line holds a NUL byte (is this a text file?)");
      if ((u < 0x20 && c != '\t') || u == 0x7f)
        throw Error(where + "the line holds a control character (byte " + std::to_string(u) + ")");
    }
    if (!is_complete_utf8(line)) throw Error(where + "the line is not valid UTF-8");
    const std::string_view entry = trim(line);
    if (entry.empty() || entry.front() == '#') continue;
    if (entry.size() > kMaxBannedEntryBytes)
      throw Error(where + "the entry has " + std::to_string(entry.size()) + " bytes, at most " +
                  std::to_string(kMaxBannedEntryBytes));
    list.entries.emplace_back(entry);
  }
  if (list.entries.empty())
    throw Error(source + ": the word list is empty (one word or phrase a line; '#' starts a " +
                "comment)");
  return list;
}

BannedWordList read_banned_word_list(const std::filesystem::path& path) {
  const std::string name = path.string();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw Error(name + ": is a folder, not a word list file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(name + ": cannot be read (no such file, or no permission)");
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxBannedListBytes)
      throw Error(name + ": the word list is larger than " +
                  std::to_string(kMaxBannedListBytes >> 20) + " MiB");
  }
  if (in.bad()) throw Error(name + ": reading failed");
  return parse_banned_word_list(text, name);
}

std::vector<std::string> banned_word_forms(std::string_view entry) {
  const std::string as_written(entry);
  const std::string capital = capitalise_first(entry);
  const std::string lower = ascii_lower(entry);
  std::vector<std::string> forms;
  for (const std::string& f : {as_written, capital, lower})
    for (const std::string& g : {f, " " + f})
      if (std::find(forms.begin(), forms.end(), g) == forms.end()) forms.push_back(g);
  return forms;
}

BannedTokens build_banned_tokens(const BannedWordList& list,
                                 const std::function<std::vector<int>(std::string_view)>& encode,
                                 int vocab_size, int eos_id) {
  BannedTokens out;
  out.source = list.source;
  out.entries = static_cast<int>(list.entries.size());
  std::set<std::vector<int>> seen;
  for (const std::string& entry : list.entries) {
    for (const std::string& form : banned_word_forms(entry)) {
      std::vector<int> ids = encode(form);
      if (ids.empty()) continue;
      for (int id : ids)
        if (id < 0 || id >= vocab_size)
          throw Error("banned words: \"" + entry + "\" encodes to token " + std::to_string(id) +
                      ", outside the vocabulary of " + std::to_string(vocab_size));
      if (ids.size() == 1 && ids[0] == eos_id) continue;
      seen.insert(std::move(ids));
    }
  }
  if (seen.empty()) throw Error(list.source + ": no entry gives a token sequence to ban");
  out.sequences.assign(seen.begin(), seen.end());
  for (const std::vector<int>& s : out.sequences) {
    if (s.size() == 1)
      out.singles.push_back(s[0]);
    else
      out.multi.push_back(s);
  }
  std::sort(out.singles.begin(), out.singles.end());
  return out;
}

std::vector<int> banned_ids_for_context(const BannedTokens& banned,
                                        const std::vector<int>& context) {
  std::vector<int> ids = banned.singles;
  for (const std::vector<int>& seq : banned.multi) {
    // HF skips a sequence longer than the whole context.
    if (seq.size() > context.size()) continue;
    if (ends_with_prefix(context, seq, seq.size() - 1)) ids.push_back(seq.back());
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

void apply_banned_words(std::vector<float>& logits, const BannedTokens& banned,
                        const std::vector<int>& context) {
  for (int id : banned_ids_for_context(banned, context)) {
    if (id < 0 || id >= static_cast<int>(logits.size()))
      throw Error("banned words: token " + std::to_string(id) + " is outside the " +
                  std::to_string(logits.size()) + " logits");
    logits[id] = -std::numeric_limits<float>::infinity();
  }
}

namespace {

// Bytes of the UTF-8 character starting at text[i] (1 for a stray or
// truncated sequence).
size_t utf8_char_bytes(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  const size_t want = c < 0x80           ? 1
                      : (c >> 5) == 0x6  ? 2
                      : (c >> 4) == 0xE  ? 3
                      : (c >> 3) == 0x1E ? 4
                                         : 1;
  size_t n = 1;
  while (n < want && i + n < text.size() &&
         (static_cast<unsigned char>(text[i + n]) & 0xC0) == 0x80)
    ++n;
  return n;
}

}  // namespace

std::string mask_banned_piece(std::string_view raw) {
  std::string out;
  size_t i = 0;
  while (i < raw.size() && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r'))
    out += raw[i++];
  bool first = true;
  while (i < raw.size()) {
    const size_t n = utf8_char_bytes(raw, i);
    const auto c = static_cast<unsigned char>(raw[i]);
    const bool word_char = c >= 0x80 || std::isalnum(c);
    if ((first && c < 0x80) || !word_char)
      out.append(raw.substr(i, n));
    else
      out += '*';
    if (word_char) first = false;
    i += n;
  }
  return out;
}

}  // namespace ts
