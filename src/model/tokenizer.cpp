#include "model/tokenizer.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>

#include "model/mapped_file.h"
#include "model/split_regex.h"
#include "model/tokenizer_nfc.h"
#include "model/unicode_categories.h"
#include "util/error.h"

namespace ts {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kEndOfText = "<|endoftext|>";
// Long words (base64, runs of digits) are rare and would only bloat the cache.
constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kMaxCachedWords = size_t{1} << 16;

// GPT-2 writes every byte as a printable code point so its BPE files are
// text: printable Latin-1 bytes stand for themselves, the other 68 bytes
// take U+0100.. in byte order.
struct ByteAlphabet {
  std::array<char32_t, 256> to_cp{};
  std::array<int, 324> from_cp{};  // -1: not in the alphabet
};

const ByteAlphabet& byte_alphabet() {
  static const ByteAlphabet alphabet = [] {
    ByteAlphabet a;
    a.from_cp.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      a.to_cp[b] = printable ? char32_t(b) : next++;
      a.from_cp[a.to_cp[b]] = b;
    }
    return a;
  }();
  return alphabet;
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// Inverse of bytes_to_gpt2_unicode; nullopt when `s` is not in that alphabet.
std::optional<std::string> gpt2_unicode_to_bytes(std::string_view s) {
  const ByteAlphabet& alphabet = byte_alphabet();
  std::string out;
  for (size_t pos = 0; pos < s.size();) {
    const Utf8Char c = decode_utf8(s, pos);
    if (!c.valid || c.cp >= alphabet.from_cp.size() || alphabet.from_cp[c.cp] < 0) {
      return std::nullopt;
    }
    out += char(alphabet.from_cp[c.cp]);
    pos += c.len;
  }
  return out;
}

// A token as it appears in the files, quoted and escaped for one-line messages.
// A value echoed in a message is cut after kMaxQuoted bytes (at a UTF-8
// character boundary), its length said: a 10 MB merges.txt line is not
// printed whole.
constexpr size_t kMaxQuoted = 80;

std::string quote(std::string_view s) {
  size_t cut = s.size();
  if (cut > kMaxQuoted) {
    cut = kMaxQuoted;
    while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  }
  std::string q = nlohmann::json(std::string(s.substr(0, cut)))
                      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (cut < s.size()) q += "... (" + std::to_string(s.size()) + " bytes)";
  return q;
}

// Tokenizer files are refused when they are not regular files (a FIFO would
// block forever) or absurdly large (GPT-2's vocab.json is 1 MB).
constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{1} << 28;

std::string read_file(const fs::path& path) {
  return read_regular_file(path, kMaxTokenizerFileBytes, "a tokenizer file");
}

// Token string -> id, with the checks nlohmann does not make: duplicate keys
// (it silently keeps the last) are reported instead of becoming a missing id.
nlohmann::json parse_vocab_json(std::string_view text, const std::string& name) {
  std::unordered_set<std::string> keys;
  std::string duplicate;
  const auto on_event = [&](int depth, nlohmann::json::parse_event_t event,
                            nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1 && duplicate.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys.insert(key).second) duplicate = key;
    }
    return true;
  };
  nlohmann::json vocab;
  try {
    vocab = nlohmann::json::parse(text, on_event);
  } catch (const nlohmann::json::exception& e) {
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix.
    std::string what = e.what();
    const size_t tag_end = what.find("] ");
    if (tag_end != std::string::npos) what = what.substr(tag_end + 2);
    throw Error(name + ": invalid JSON: " + what);
  }
  if (!vocab.is_object()) {
    throw Error(name + ": expected a JSON object mapping token strings to ids");
  }
  if (!duplicate.empty()) throw Error(name + ": duplicate token " + quote(duplicate));
  return vocab;
}

}  // namespace

std::string bytes_to_gpt2_unicode(std::string_view raw_bytes) {
  const ByteAlphabet& alphabet = byte_alphabet();
  std::string out;
  for (char c : raw_bytes) append_utf8(alphabet.to_cp[static_cast<uint8_t>(c)], out);
  return out;
}

std::vector<std::string_view> pretokenize(std::string_view text) {
  // Decode once; chars[n] is a sentinel holding the end offset.
  struct Char {
    size_t pos;
    char32_t cp;
    CharClass cls;
  };
  std::vector<Char> chars;
  chars.reserve(text.size() + 1);
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    chars.push_back({pos, c.cp, c.valid ? char_class(c.cp) : CharClass::kOther});
    pos += c.len;
  }
  const size_t n = chars.size();
  chars.push_back({text.size(), 0, CharClass::kOther});

  // Invalid bytes carry cp >= 0x80, so they never compare equal to ASCII here.
  const auto is = [&](size_t i, char ascii) { return i < n && chars[i].cp == char32_t(ascii); };

  // End (exclusive, in chars) of the pattern's match starting at char i.
  const auto match_end = [&](size_t i) -> size_t {
    // 's|'t|'re|'ve|'m|'ll|'d  (lower case only, as in GPT-2)
    if (is(i, '\'')) {
      if (is(i + 1, 's') || is(i + 1, 't') || is(i + 1, 'm') || is(i + 1, 'd')) return i + 2;
      if ((is(i + 1, 'r') && is(i + 2, 'e')) || (is(i + 1, 'v') && is(i + 2, 'e')) ||
          (is(i + 1, 'l') && is(i + 2, 'l'))) {
        return i + 3;
      }
    }
    // ` ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+`: an optional space, then a run of
    // one non-space class; the class of the first character picks the branch.
    const size_t start =
        (is(i, ' ') && i + 1 < n && chars[i + 1].cls != CharClass::kSpace) ? i + 1 : i;
    const CharClass cls = chars[start].cls;
    size_t end = start;
    if (cls != CharClass::kSpace) {
      while (end < n && chars[end].cls == cls) ++end;
      return end;
    }
    // `\s+(?!\S)|\s+`: a whitespace run, except that when text follows, its last
    // character is left to start the next piece (" b" in "a  b"), unless the
    // run is that single character.
    while (end < n && chars[end].cls == CharClass::kSpace) ++end;
    if (end == n) return end;
    return end - i >= 2 ? end - 1 : end;
  };

  std::vector<std::string_view> pieces;
  for (size_t i = 0; i < n;) {
    const size_t end = match_end(i);
    pieces.push_back(text.substr(chars[i].pos, chars[end].pos - chars[i].pos));
    i = end;
  }
  return pieces;
}

Tokenizer Tokenizer::load(const fs::path& model_dir) {
  std::error_code ec;
  if (!fs::is_directory(model_dir, ec)) throw Error(model_dir.string() + ": not a directory");
  const auto has = [&](const char* name) { return fs::exists(model_dir / name, ec); };
  if (has("vocab.json") || has("merges.txt")) {
    return from_files(model_dir / "vocab.json", model_dir / "merges.txt");
  }
  if (has("encoder.json") || has("vocab.bpe")) {
    return from_files(model_dir / "encoder.json", model_dir / "vocab.bpe");
  }
  throw Error(model_dir.string() +
              ": no tokenizer files (expected vocab.json + merges.txt, or encoder.json + "
              "vocab.bpe)");
}

Tokenizer Tokenizer::from_files(const fs::path& vocab_path, const fs::path& merges_path) {
  const std::string vocab_text = read_file(vocab_path);
  const std::string merges_text = read_file(merges_path);
  return from_text(vocab_text, merges_text, vocab_path.string(), merges_path.string());
}

Tokenizer Tokenizer::from_text(std::string_view vocab_text, std::string_view merges_text,
                               const std::string& vocab_name, const std::string& merges_name) {
  Tokenizer tok;

  // --- vocabulary: dense ids 0..n-1, tokens in GPT-2's byte alphabet ---
  const nlohmann::json vocab = parse_vocab_json(vocab_text, vocab_name);
  const size_t n = vocab.size();
  if (n == 0) throw Error(vocab_name + ": vocabulary is empty");
  if (n > size_t(INT_MAX)) throw Error(vocab_name + ": too many tokens");
  tok.id_to_bytes_.resize(n);
  tok.bytes_to_id_.reserve(n);
  std::vector<bool> seen(n, false);
  for (const auto& [key, value] : vocab.items()) {
    if (!value.is_number_integer()) {
      throw Error(vocab_name + ": token " + quote(key) + ": id must be an integer");
    }
    tok.set_token(key, value.get<int64_t>(), seen, vocab_name);
  }
  tok.finish_vocab(vocab_name);
  tok.eot_id_ = tok.find(kEndOfText).value_or(-1);
  if (tok.eot_id_ >= 0) tok.add_added_token(std::string(kEndOfText), tok.eot_id_);

  // --- merges: "left right" per line, rank = order of appearance ---
  const std::string vocab_file = fs::path(vocab_name).filename().string();
  std::istringstream lines{std::string(merges_text)};
  std::string line;
  int line_no = 0;
  std::unordered_map<uint64_t, std::string> first_seen;  // for the duplicate message
  while (std::getline(lines, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line_no == 1 && line.rfind("#version", 0) == 0) continue;
    const std::string where = merges_name + ":" + std::to_string(line_no) + ": ";
    const size_t space = line.find(' ');
    if (space == std::string::npos || space == 0 || space + 1 == line.size() ||
        line.find(' ', space + 1) != std::string::npos) {
      throw Error(where + "expected two tokens separated by one space, got " + quote(line));
    }
    tok.add_merge(std::string_view(line).substr(0, space), std::string_view(line).substr(space + 1),
                  where, "line " + std::to_string(line_no), vocab_file, first_seen);
  }
  if (lines.bad()) throw Error(merges_name + ": read error");
  return tok;
}

void Tokenizer::set_token(std::string_view key, int64_t id, std::vector<bool>& seen,
                          const std::string& name) {
  const size_t n = seen.size();
  if (id < 0 || id >= int64_t(n)) {
    throw Error(name + ": token " + quote(key) + ": id " + std::to_string(id) + " is outside 0.." +
                std::to_string(n - 1) + " (ids must be dense)");
  }
  if (seen[id]) {
    throw Error(name + ": id " + std::to_string(id) + " is used by both " +
                quote(bytes_to_gpt2_unicode(id_to_bytes_[id])) + " and " + quote(key));
  }
  std::optional<std::string> bytes = gpt2_unicode_to_bytes(key);
  if (!bytes || bytes->empty()) {
    throw Error(name + ": token " + quote(key) +
                (bytes ? " is empty" : " has a character outside GPT-2's byte alphabet"));
  }
  if (!bytes_to_id_.emplace(*bytes, int(id)).second) {
    throw Error(name + ": token " + quote(key) + " appears twice");
  }
  seen[id] = true;
  id_to_bytes_[id] = std::move(*bytes);
}

void Tokenizer::finish_vocab(const std::string& name) {
  // Byte-level BPE starts every word from single bytes, so all 256 must exist.
  for (int b = 0; b < 256; ++b) {
    const auto it = bytes_to_id_.find(std::string(1, char(b)));
    if (it == bytes_to_id_.end()) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      throw Error(name + ": no token for byte " + hex + " (" +
                  quote(bytes_to_gpt2_unicode(std::string(1, char(b)))) +
                  "); byte-level BPE needs all 256");
    }
    byte_id_[b] = it->second;
  }
  model_size_ = int(id_to_bytes_.size());
}

void Tokenizer::add_added_token(std::string content, int id) {
  auto& list = added_[static_cast<uint8_t>(content[0])];
  list.emplace_back(std::move(content), id);
  std::stable_sort(list.begin(), list.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

void Tokenizer::add_merge(std::string_view left, std::string_view right, const std::string& where,
                          const std::string& label, const std::string& vocab_file,
                          std::unordered_map<uint64_t, std::string>& seen) {
  int parts[2];
  std::string joined;
  for (int k = 0; k < 2; ++k) {
    const std::string_view symbol = k == 0 ? left : right;
    const std::optional<std::string> bytes = gpt2_unicode_to_bytes(symbol);
    if (!bytes) {
      throw Error(where + "symbol " + quote(symbol) +
                  " has a character outside GPT-2's byte alphabet");
    }
    const auto id = bytes_to_id_.find(*bytes);
    if (id == bytes_to_id_.end() || id->second >= model_size_) {
      throw Error(where + "unknown symbol " + quote(symbol) + " (not in " + vocab_file + ")");
    }
    parts[k] = id->second;
    joined += *bytes;
  }
  const auto result = bytes_to_id_.find(joined);
  if (result == bytes_to_id_.end() || result->second >= model_size_) {
    throw Error(where + "merge result " + quote(bytes_to_gpt2_unicode(joined)) + " is not in " +
                vocab_file);
  }
  const uint64_t key = pair_key(parts[0], parts[1]);
  const auto [it, inserted] = seen.emplace(key, label);
  if (!inserted) {
    throw Error(where + "duplicate merge " + quote(std::string(left) + " " + std::string(right)) +
                " (first on " + it->second + ")");
  }
  merges_.emplace(key, Merge{int(merges_.size()), result->second});
}

Tokenizer Tokenizer::from_spec(const TokenizerSpec& spec, const std::string& name) {
  Tokenizer tok;
  // Ids: the model's vocabulary first, added tokens may extend it; together
  // they must be dense.
  int64_t total = int64_t(spec.vocab.size());
  for (const TokenizerSpec::AddedToken& a : spec.added) {
    if (a.id < 0 || a.id >= INT_MAX) {
      throw Error(name + ": " + a.where + ": id " + std::to_string(a.id) + " is out of range");
    }
    total = std::max(total, a.id + 1);
  }
  if (spec.vocab.empty()) throw Error(name + ": model.vocab is empty");
  if (total > INT_MAX / 2) throw Error(name + ": too many tokens");
  // The first id past model.vocab that no added token takes, found before
  // anything is sized by the largest id (one added id of 1e9 would otherwise
  // reserve tens of GB before the density check below).
  std::vector<int64_t> past_vocab;
  for (const TokenizerSpec::AddedToken& a : spec.added)
    if (a.id >= int64_t(spec.vocab.size())) past_vocab.push_back(a.id);
  std::sort(past_vocab.begin(), past_vocab.end());
  int64_t next_free = int64_t(spec.vocab.size());
  for (int64_t id : past_vocab) {
    if (id > next_free) break;
    if (id == next_free) ++next_free;
  }
  if (next_free < total) {
    throw Error(name + ": id " + std::to_string(next_free) +
                " has no token (ids must be dense across model.vocab and added_tokens)");
  }
  const std::string vocab_name = name + ": model.vocab";
  std::vector<bool> seen(spec.vocab.size(), false);
  tok.id_to_bytes_.resize(spec.vocab.size());
  tok.bytes_to_id_.reserve(size_t(total));
  for (const TokenizerSpec::Entry& e : spec.vocab) tok.set_token(e.token, e.id, seen, vocab_name);
  tok.finish_vocab(vocab_name);
  tok.id_to_bytes_.resize(size_t(total));
  std::vector<bool> added_seen(size_t(total), false);
  for (const TokenizerSpec::AddedToken& a : spec.added) {
    const std::string where = name + ": " + a.where + ": ";
    if (a.content.empty()) throw Error(where + "content is empty");
    if (added_seen[size_t(a.id)]) {
      throw Error(where + "id " + std::to_string(a.id) + " is given to two added tokens");
    }
    added_seen[size_t(a.id)] = true;
    if (a.id < tok.model_size_) {
      if (tok.id_to_bytes_[size_t(a.id)] != a.content) {
        throw Error(where + "id " + std::to_string(a.id) + " is the model's token " +
                    quote(bytes_to_gpt2_unicode(tok.id_to_bytes_[size_t(a.id)])) + ", not " +
                    quote(a.content));
      }
    } else {
      tok.id_to_bytes_[size_t(a.id)] = a.content;
      tok.bytes_to_id_.emplace(a.content, int(a.id));
    }
    tok.add_added_token(a.content, int(a.id));
  }
  for (int64_t id = tok.model_size_; id < total; ++id) {
    if (!added_seen[size_t(id)]) {
      throw Error(name + ": id " + std::to_string(id) +
                  " has no token (ids must be dense across model.vocab and added_tokens)");
    }
  }
  std::unordered_map<uint64_t, std::string> first_seen;
  for (const TokenizerSpec::MergeRule& m : spec.merges) {
    tok.add_merge(m.left, m.right, name + ": " + m.where + ": ", m.where, "model.vocab",
                  first_seen);
  }
  for (const std::string& pattern : spec.split_patterns) {
    tok.splits_.push_back(std::make_shared<const SplitRegex>(pattern));
  }
  tok.ignore_merges_ = spec.ignore_merges;
  const auto check = [&](int64_t id, const char* what) {
    if (id >= total) {
      throw Error(name + ": " + what + " id " + std::to_string(id) + " is outside the vocabulary");
    }
    return int(id);
  };
  tok.bos_id_ = check(spec.bos_id, "BOS");
  tok.eot_id_ = check(spec.eot_id, "end-of-text");
  tok.add_bos_ = spec.add_bos && tok.bos_id_ >= 0;
  tok.nfc_ = spec.nfc_normalizer;
  if (spec.add_bos && tok.bos_id_ < 0) throw Error(name + ": asks for BOS but names no BOS token");
  return tok;
}

std::vector<std::string> Tokenizer::split_patterns() const {
  std::vector<std::string> patterns;
  for (const auto& split : splits_) patterns.push_back(split->pattern());
  return patterns;
}

std::vector<std::string_view> Tokenizer::split_words(std::string_view segment) const {
  if (splits_.empty()) return pretokenize(segment);
  std::vector<std::string_view> pieces{segment};
  for (const auto& split : splits_) {
    std::vector<std::string_view> finer;
    for (const std::string_view piece : pieces) {
      for (const std::string_view p : split->split(piece)) finer.push_back(p);
    }
    pieces = std::move(finer);
  }
  return pieces;
}

std::vector<TokenSpan> Tokenizer::encode(std::string_view text) const {
  if (nfc_) {
    if (const size_t at = first_nfc_unstable(text); at != std::string_view::npos) {
      const Utf8Char c = decode_utf8(text, at);
      char code[16];
      std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(c.cp));
      throw Error(std::string("the text is not in NFC form at byte ") + std::to_string(at) + " (" +
                  code +
                  "), and this tokenizer's NFC normalizer is not implemented: TokenScope "
                  "tokenizes only text NFC leaves unchanged");
    }
  }
  std::vector<TokenSpan> out;
  out.reserve(text.size() / 3 + 1);
  size_t pos = 0;
  while (pos < text.size()) {
    // The next added token: leftmost, and the longest of those starting there.
    size_t special = std::string_view::npos;
    const std::pair<std::string, int>* hit = nullptr;
    for (size_t at = pos; at < text.size() && !hit; ++at) {
      for (const auto& candidate : added_[static_cast<uint8_t>(text[at])]) {
        if (text.compare(at, candidate.first.size(), candidate.first) == 0) {
          special = at;
          hit = &candidate;
          break;
        }
      }
    }
    const std::string_view segment =
        text.substr(pos, special == std::string_view::npos ? text.size() - pos : special - pos);
    for (const std::string_view word : split_words(segment)) {
      size_t offset = size_t(word.data() - text.data());
      for (const int id : word_ids(word)) {
        const size_t len = id_to_bytes_[id].size();
        out.push_back({id, offset, offset + len});
        offset += len;
      }
    }
    if (!hit) break;
    out.push_back({hit->second, special, special + hit->first.size()});
    pos = special + hit->first.size();
  }
  return out;
}

std::vector<TokenSpan> Tokenizer::encode_prompt(std::string_view text) const {
  std::vector<TokenSpan> spans = encode(text);
  if (add_bos_) spans.insert(spans.begin(), TokenSpan{bos_id_, 0, 0});
  return spans;
}

std::vector<int> Tokenizer::model_input_ids(std::string_view text) const {
  std::vector<int> ids;
  for (const TokenSpan& span : encode_prompt(text)) ids.push_back(span.id);
  return ids;
}

std::vector<int> Tokenizer::added_token_ids() const {
  std::vector<int> ids;
  for (const auto& list : added_)
    for (const auto& entry : list) ids.push_back(entry.second);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

void Tokenizer::pad_to(int model_vocab_size) {
  if (model_vocab_size <= vocab_size()) return;
  token_count_ = token_count();
  id_to_bytes_.resize(static_cast<size_t>(model_vocab_size));
}

void Tokenizer::set_prompt_rules(const std::vector<std::string>& split_patterns,
                                 const std::vector<int>& added_ids, int bos_id, bool add_bos,
                                 bool nfc_normalizer) {
  const std::vector<int> known = added_token_ids();
  for (const int id : added_ids) {
    check_id(id);
    if (id_to_bytes_[id].empty())
      throw Error("tokenizer: added token " + std::to_string(id) + " has no bytes");
    if (!std::binary_search(known.begin(), known.end(), id)) add_added_token(id_to_bytes_[id], id);
  }
  splits_.clear();
  for (const std::string& pattern : split_patterns)
    splits_.push_back(std::make_shared<const SplitRegex>(pattern));
  if (bos_id >= 0) check_id(bos_id);
  if (add_bos && bos_id < 0) throw Error("tokenizer: asks for BOS but names no BOS token");
  bos_id_ = bos_id;
  add_bos_ = add_bos;
  nfc_ = nfc_normalizer;
  cache_ = WordCache();
}

std::vector<int> Tokenizer::encode_ids(std::string_view text) const {
  std::vector<int> ids;
  for (const TokenSpan& span : encode(text)) ids.push_back(span.id);
  return ids;
}

std::vector<int> Tokenizer::word_ids(std::string_view word) const {
  if (word.size() == 1) return {byte_id_[static_cast<uint8_t>(word[0])]};
  if (ignore_merges_) {
    const auto it = bytes_to_id_.find(std::string(word));
    if (it != bytes_to_id_.end() && it->second < model_size_) return {it->second};
  }
  const bool cacheable = word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_.mutex);
    const auto it = cache_.words.find(std::string(word));
    if (it != cache_.words.end()) return it->second;
  }
  std::vector<int> ids = merge_word(word);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_.mutex);
    if (cache_.words.size() >= kMaxCachedWords) cache_.words.clear();
    cache_.words.emplace(std::string(word), ids);
  }
  return ids;
}

std::vector<int> Tokenizer::merge_word(std::string_view word) const {
  std::vector<int> symbols;
  symbols.reserve(word.size());
  for (const char c : word) symbols.push_back(byte_id_[static_cast<uint8_t>(c)]);
  // As GPT-2 does: take the adjacent pair with the best (lowest) merge rank
  // anywhere in the word, merge every occurrence of it left to right, repeat.
  while (symbols.size() > 1) {
    int best_rank = INT_MAX;
    int left = 0, right = 0, merged = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      const auto it = merges_.find(pair_key(symbols[i], symbols[i + 1]));
      if (it != merges_.end() && it->second.rank < best_rank) {
        best_rank = it->second.rank;
        left = symbols[i];
        right = symbols[i + 1];
        merged = it->second.result;
      }
    }
    if (best_rank == INT_MAX) break;
    size_t out = 0;
    for (size_t i = 0; i < symbols.size();) {
      if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
        symbols[out++] = merged;
        i += 2;
      } else {
        symbols[out++] = symbols[i++];
      }
    }
    symbols.resize(out);
  }
  return symbols;
}

void Tokenizer::check_id(int id) const {
  if (id < 0 || id >= vocab_size()) {
    throw Error("token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                std::to_string(vocab_size() - 1) + ")");
  }
}

std::string Tokenizer::token_bytes(int id) const {
  check_id(id);
  return id_to_bytes_[id];
}

std::string Tokenizer::decode(const std::vector<int>& ids) const {
  std::string out;
  for (const int id : ids) {
    check_id(id);
    out += id_to_bytes_[id];
  }
  return out;
}

std::optional<int> Tokenizer::find(std::string_view raw_bytes) const {
  const auto it = bytes_to_id_.find(std::string(raw_bytes));
  if (it == bytes_to_id_.end()) return std::nullopt;
  return it->second;
}

}  // namespace ts
