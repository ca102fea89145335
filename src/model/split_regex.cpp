#include "model/split_regex.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "model/unicode_categories.h"
#include "util/error.h"

namespace ts {
namespace {

// Limits that keep hostile patterns cheap: nesting (the parser and emitter
// recurse once per level), counted repetition and the compiled size.
constexpr int kMaxNesting = 64;
constexpr int kMaxRepeat = 1000;
constexpr size_t kMaxProgram = size_t{1} << 14;
constexpr size_t kMaxQuotedPattern = 120;
// What an undecodable byte of the text is: equal to no literal, in class kOther.
constexpr char32_t kInvalidChar = 0xFFFFFFFF;

uint8_t bit(CharClass c) { return uint8_t(1u << static_cast<unsigned>(c)); }

struct Node {
  enum Kind { kSet, kConcat, kAlt, kRepeat, kNegLook } kind = kConcat;
  uint32_t set = 0;
  int min = 0, max = -1;  // kRepeat; max -1: unbounded
  std::vector<Node> kids;
};

class Parser {
 public:
  Parser(std::string_view pattern, std::vector<SplitRegex::CharSet>& sets)
      : source_(pattern), sets_(sets) {
    for (size_t pos = 0; pos < pattern.size();) {
      const Utf8Char c = decode_utf8(pattern, pos);
      if (!c.valid) fail("invalid UTF-8", pat_.size());
      pat_.push_back(c.cp);
      pos += c.len;
    }
  }

  Node parse() {
    Node root = alternation(false, 0);
    if (i_ < pat_.size()) fail("unbalanced ')'", i_);
    return root;
  }

  [[noreturn]] void fail(const std::string& what, size_t at) const {
    std::string shown(source_.substr(0, std::min(source_.size(), kMaxQuotedPattern)));
    if (shown.size() < source_.size()) shown += "...";
    throw Error("split regex: " + what + " at character " + std::to_string(at) + " of \"" + shown +
                "\"");
  }

 private:
  bool at_end() const { return i_ >= pat_.size(); }
  char32_t peek(size_t ahead = 0) const {
    return i_ + ahead < pat_.size() ? pat_[i_ + ahead] : char32_t(0);
  }
  bool eat(char32_t c) {
    if (at_end() || pat_[i_] != c) return false;
    ++i_;
    return true;
  }

  Node alternation(bool icase, int depth) {
    if (depth > kMaxNesting) fail("groups nested too deeply", i_);
    Node alt;
    alt.kind = Node::kAlt;
    alt.kids.push_back(concatenation(icase, depth));
    while (eat('|')) alt.kids.push_back(concatenation(icase, depth));
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Node concatenation(bool icase, int depth) {
    Node seq;
    while (!at_end() && peek() != '|' && peek() != ')') {
      Node atom = this->atom(icase, depth);
      seq.kids.push_back(quantified(std::move(atom)));
    }
    return seq;
  }

  Node quantified(Node atom) {
    int min = -2, max = -1;
    const size_t at = i_;
    if (eat('?')) {
      min = 0, max = 1;
    } else if (eat('*')) {
      min = 0;
    } else if (eat('+')) {
      min = 1;
    } else if (peek() == '{') {
      ++i_;
      min = number(at);
      if (eat(',')) {
        max = peek() == '}' ? -1 : number(at);
      } else {
        max = min;
      }
      if (!eat('}')) fail("expected '}' to close the repetition", i_);
      if (max != -1 && max < min) fail("repetition {n,m} with m < n", at);
    }
    if (min == -2) return atom;
    if (peek() == '?') fail("lazy quantifiers are not supported", i_);
    if (peek() == '+') fail("possessive quantifiers are not supported", i_);
    if (peek() == '*' || peek() == '{') fail("nested quantifier", i_);
    Node rep;
    rep.kind = Node::kRepeat;
    rep.min = min;
    rep.max = max;
    rep.kids.push_back(std::move(atom));
    return rep;
  }

  int number(size_t quant_at) {
    int value = 0;
    const size_t start = i_;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      value = value * 10 + int(peek() - '0');
      if (value > kMaxRepeat) fail("repetition count above " + std::to_string(kMaxRepeat), start);
      ++i_;
    }
    if (i_ == start) fail("expected a number in the repetition", quant_at);
    return value;
  }

  Node set_node(SplitRegex::CharSet set) {
    Node n;
    n.kind = Node::kSet;
    n.set = uint32_t(sets_.size());
    sets_.push_back(std::move(set));
    return n;
  }

  Node atom(bool icase, int depth) {
    const size_t at = i_;
    const char32_t c = peek();
    if (c == '(') {
      ++i_;
      Node group;
      if (eat('?')) {
        if (eat(':')) {
          group = alternation(icase, depth + 1);
        } else if (peek() == 'i' && peek(1) == ':') {
          i_ += 2;
          group = alternation(true, depth + 1);
        } else if (eat('!')) {
          group.kind = Node::kNegLook;
          group.kids.push_back(alternation(icase, depth + 1));
        } else {
          fail("unsupported group syntax '(?'", at);
        }
      } else {
        group = alternation(icase, depth + 1);  // captures are irrelevant to splitting
      }
      if (!eat(')')) fail("missing ')' for the group", at);
      return group;
    }
    if (c == '[') return set_node(char_class(icase));
    if (c == '.') {
      ++i_;
      SplitRegex::CharSet set;
      set.any_but_newline = true;
      return set_node(std::move(set));
    }
    if (c == '^' || c == '$') fail("anchors are not supported", at);
    if (c == '*' || c == '+' || c == '?' || c == '{') fail("quantifier with nothing to repeat", at);
    SplitRegex::CharSet set;
    if (c == '\\') {
      if (const auto lit = escape(set, /*in_class=*/false)) add_char(set, *lit, icase);
    } else {
      ++i_;
      add_char(set, c, icase);
    }
    return set_node(std::move(set));
  }

  static void add_range(SplitRegex::CharSet& set, char32_t lo, char32_t hi, bool icase) {
    set.ranges.emplace_back(lo, hi);
    if (!icase) return;
    // ASCII case folding: the letters of the range in the other case too.
    const auto fold = [&](char32_t a, char32_t z, int shift) {
      const char32_t l = std::max(lo, a), h = std::min(hi, z);
      if (l <= h) set.ranges.emplace_back(char32_t(int(l) + shift), char32_t(int(h) + shift));
    };
    fold('a', 'z', 'A' - 'a');
    fold('A', 'Z', 'a' - 'A');
  }
  static void add_char(SplitRegex::CharSet& set, char32_t c, bool icase) {
    add_range(set, c, c, icase);
  }

  int hex_digits(size_t count, size_t at) {
    int value = 0;
    for (size_t k = 0; k < count; ++k) {
      const char32_t h = peek();
      int d;
      if (h >= '0' && h <= '9') {
        d = int(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        d = int(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        d = int(h - 'A' + 10);
      } else {
        fail("expected a hex digit", at);
      }
      value = value * 16 + d;
      ++i_;
    }
    return value;
  }

  // At a backslash. Returns the code point of a single-character escape, or
  // nullopt after adding a class escape (\s, \p{L}, ...) to `set`.
  std::optional<char32_t> escape(SplitRegex::CharSet& set, bool in_class) {
    const size_t at = i_;
    ++i_;
    if (at_end()) fail("pattern ends with a backslash", at);
    const char32_t e = pat_[i_++];
    switch (e) {
      case 'r':
        return U'\r';
      case 'n':
        return U'\n';
      case 't':
        return U'\t';
      case 'f':
        return U'\f';
      case 'v':
        return U'\v';
      case '0':
        return U'\0';
      case 's':
        set.classes |= bit(CharClass::kSpace);
        return std::nullopt;
      case 'S':
        set.not_classes |= bit(CharClass::kSpace);
        return std::nullopt;
      case 'd':
        set.ranges.emplace_back(U'0', U'9');
        return std::nullopt;
      case 'D':
        if (in_class) fail("\\D inside a character class is not supported", at);
        set.ranges.emplace_back(U'0', U'9');
        set.negated = true;
        return std::nullopt;
      case 'x':
        if (eat('{')) {
          char32_t cp = 0;
          size_t digits = 0;
          while (!at_end() && peek() != '}') {
            cp = cp * 16 + char32_t(hex_digits(1, at));
            if (++digits > 6 || cp > 0x10FFFF) fail("code point out of range", at);
          }
          if (digits == 0 || !eat('}')) fail("malformed \\x{...}", at);
          return cp;
        }
        return char32_t(hex_digits(2, at));
      case 'u':
        return char32_t(hex_digits(4, at));
      case 'p':
      case 'P': {
        if (!eat('{')) fail("expected '{' after \\p", at);
        std::u32string name;
        while (!at_end() && peek() != '}') name += pat_[i_++];
        if (!eat('}')) fail("missing '}' after \\p{", at);
        CharClass cls;
        if (name == U"L" || name == U"Letter") {
          cls = CharClass::kLetter;
        } else if (name == U"N" || name == U"Number") {
          cls = CharClass::kNumber;
        } else {
          fail("unsupported Unicode property (only \\p{L} and \\p{N})", at);
        }
        (e == 'p' ? set.classes : set.not_classes) |= bit(cls);
        return std::nullopt;
      }
      default:
        break;
    }
    const bool ascii_alnum =
        (e >= '0' && e <= '9') || (e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z');
    if (ascii_alnum) fail(std::string("unsupported escape \\") + char(e), at);
    return e;  // an escaped punctuation or other character stands for itself
  }

  SplitRegex::CharSet char_class(bool icase) {
    const size_t at = i_;
    ++i_;  // '['
    SplitRegex::CharSet set;
    set.negated = eat('^');
    bool first = true;
    while (true) {
      if (at_end()) fail("missing ']' for the character class", at);
      const size_t item_at = i_;
      char32_t c = peek();
      if (c == ']' && !first) {
        ++i_;
        break;
      }
      first = false;
      if (c == '[') fail("nested character classes are not supported", item_at);
      if (c == '&' && peek(1) == '&') fail("class intersection is not supported", item_at);
      std::optional<char32_t> lo;
      if (c == '\\') {
        lo = escape(set, /*in_class=*/true);
      } else {
        ++i_;
        lo = c;
      }
      if (!lo) continue;
      if (peek() == '-' && peek(1) != ']' && i_ + 1 < pat_.size()) {
        ++i_;
        std::optional<char32_t> hi;
        if (peek() == '\\') {
          SplitRegex::CharSet scratch;
          hi = escape(scratch, /*in_class=*/true);
          if (!hi) fail("a class escape cannot end a range", item_at);
        } else {
          hi = pat_[i_++];
        }
        if (*hi < *lo) fail("range out of order", item_at);
        add_range(set, *lo, *hi, icase);
      } else {
        add_char(set, *lo, icase);
      }
    }
    return set;
  }

  std::string_view source_;
  std::vector<char32_t> pat_;
  size_t i_ = 0;
  std::vector<SplitRegex::CharSet>& sets_;
};

class Emitter {
 public:
  explicit Emitter(std::vector<SplitRegex::Inst>& prog) : prog_(prog) {}

  void emit(const Node& n) {
    using I = SplitRegex::Inst;
    switch (n.kind) {
      case Node::kSet:
        push({I::kChar, n.set, 0});
        break;
      case Node::kConcat:
        for (const Node& k : n.kids) emit(k);
        break;
      case Node::kAlt: {
        std::vector<size_t> jumps;
        for (size_t k = 0; k < n.kids.size(); ++k) {
          if (k + 1 < n.kids.size()) {
            const size_t split = push({I::kSplit, 0, 0});
            prog_[split].x = here();
            emit(n.kids[k]);
            jumps.push_back(push({I::kJmp, 0, 0}));
            prog_[split].y = here();
          } else {
            emit(n.kids[k]);
          }
        }
        for (const size_t j : jumps) prog_[j].x = here();
        break;
      }
      case Node::kRepeat: {
        for (int k = 0; k < n.min; ++k) emit(n.kids[0]);
        if (n.max == -1) {
          const size_t split = push({I::kSplit, 0, 0});
          prog_[split].x = here();
          emit(n.kids[0]);
          push({I::kJmp, uint32_t(split), 0});
          prog_[split].y = here();
        } else {
          std::vector<size_t> exits;
          for (int k = n.min; k < n.max; ++k) {
            const size_t split = push({I::kSplit, 0, 0});
            prog_[split].x = here();
            exits.push_back(split);
            emit(n.kids[0]);
          }
          for (const size_t s : exits) prog_[s].y = here();
        }
        break;
      }
      case Node::kNegLook: {
        // [NegLook sub] [Jmp after] sub... Match after:
        const size_t look = push({I::kNegLook, 0, 0});
        const size_t jump = push({I::kJmp, 0, 0});
        prog_[look].x = here();
        emit(n.kids[0]);
        push({I::kMatch, 0, 0});
        prog_[jump].x = here();
        break;
      }
    }
  }

  uint32_t here() const { return uint32_t(prog_.size()); }
  size_t push(SplitRegex::Inst inst) {
    if (prog_.size() >= kMaxProgram) {
      throw Error("split regex: pattern compiles to more than " + std::to_string(kMaxProgram) +
                  " instructions");
    }
    prog_.push_back(inst);
    return prog_.size() - 1;
  }

 private:
  std::vector<SplitRegex::Inst>& prog_;
};

bool set_matches(const SplitRegex::CharSet& set, char32_t cp, CharClass cls) {
  bool m = set.any_but_newline && cp != U'\n';
  if (!m) m = (set.classes & bit(cls)) || (set.not_classes & ~bit(cls) & 0x0F);
  if (!m) {
    for (const auto& [lo, hi] : set.ranges) {
      if (cp >= lo && cp <= hi) {
        m = true;
        break;
      }
    }
  }
  return m != set.negated;
}

}  // namespace

struct SplitRegex::Input {
  std::vector<char32_t> cps;
  std::vector<CharClass> classes;
  std::vector<size_t> offsets;  // byte offset of each character, plus the end
  size_t size() const { return cps.size(); }
};

SplitRegex::SplitRegex(std::string_view pattern) : pattern_(pattern) {
  Parser parser(pattern, sets_);
  const Node root = parser.parse();
  Emitter emitter(prog_);
  emitter.emit(root);
  emitter.push({Inst::kMatch, 0, 0});
}

long SplitRegex::run(const Input& in, uint32_t pc0, size_t start) const {
  // (instruction, position) pairs tried so far in this attempt: reaching one
  // again cannot succeed where the first visit failed (no backreferences).
  const size_t width = prog_.size();
  std::vector<uint64_t> visited;
  const auto first_visit = [&](uint32_t pc, size_t pos) {
    const size_t idx = (pos - start) * width + pc;
    if (idx / 64 >= visited.size()) visited.resize(idx / 64 + 1 + visited.size() / 2, 0);
    uint64_t& word = visited[idx / 64];
    const uint64_t mask = uint64_t{1} << (idx % 64);
    if (word & mask) return false;
    word |= mask;
    return true;
  };
  std::vector<std::pair<uint32_t, size_t>> stack{{pc0, start}};
  while (!stack.empty()) {
    auto [pc, pos] = stack.back();
    stack.pop_back();
    while (first_visit(pc, pos)) {
      const Inst& inst = prog_[pc];
      if (inst.op == Inst::kChar) {
        if (pos >= in.size() || !set_matches(sets_[inst.x], in.cps[pos], in.classes[pos])) break;
        ++pc;
        ++pos;
      } else if (inst.op == Inst::kSplit) {
        stack.emplace_back(inst.y, pos);
        pc = inst.x;
      } else if (inst.op == Inst::kJmp) {
        pc = inst.x;
      } else if (inst.op == Inst::kNegLook) {
        // Lookaheads nest no deeper than the pattern's groups (kMaxNesting).
        if (run(in, inst.x, pos) >= 0) break;
        ++pc;
      } else {
        return long(pos);
      }
    }
  }
  return -1;
}

std::vector<std::pair<size_t, size_t>> SplitRegex::find_all(std::string_view text) const {
  Input in;
  in.cps.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = decode_utf8(text, pos);
    in.cps.push_back(c.valid ? c.cp : kInvalidChar);
    in.classes.push_back(c.valid ? char_class(c.cp) : CharClass::kOther);
    in.offsets.push_back(pos);
    pos += c.len;
  }
  in.offsets.push_back(text.size());
  std::vector<std::pair<size_t, size_t>> matches;
  for (size_t start = 0; start < in.size(); ++start) {
    const long end = run(in, 0, start);
    if (end > long(start)) {  // empty matches split nothing
      matches.emplace_back(in.offsets[start], in.offsets[size_t(end)]);
      start = size_t(end) - 1;
    }
  }
  return matches;
}

std::vector<std::string_view> SplitRegex::split(std::string_view text) const {
  std::vector<std::string_view> pieces;
  size_t at = 0;
  for (const auto& [begin, end] : find_all(text)) {
    if (begin > at) pieces.push_back(text.substr(at, begin - at));
    pieces.push_back(text.substr(begin, end - begin));
    at = end;
  }
  if (at < text.size()) pieces.push_back(text.substr(at));
  return pieces;
}

}  // namespace ts
