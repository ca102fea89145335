#pragma once
// The regular expressions tokenizer.json pre-tokenizers split text with
// (GPT-2's, Llama 3's, Qwen2's and patterns like them), matched over Unicode
// code points with the leftmost-first semantics of Oniguruma and JavaScript.
//
// Supported: literals; escapes \r \n \t \f \v \0 \xHH \x{H..} \uHHHH and
// escaped punctuation; \s \S (Unicode White_Space), \d \D (ASCII digits, as
// JavaScript), \p{L} \p{N} \P{L} \P{N} (also spelled Letter / Number);
// `.` (anything but \n); character classes [..] with ranges and negation;
// groups ( ) (?: ) (?i: ) (case-insensitive for ASCII letters only); `|`;
// greedy quantifiers ? * + {n} {n,} {n,m}; negative lookahead (?!..).
// Anything else (anchors, lazy or possessive quantifiers, backreferences,
// other properties) is refused with one line naming its position.
//
// Matching is a backtracking search that remembers each (instruction,
// position) it has already tried, so no input makes it exponential: one
// match attempt costs at most program size x characters scanned.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ts {

class SplitRegex {
 public:
  // Throws Error("split regex: <what> at character N of <pattern>").
  explicit SplitRegex(std::string_view pattern);

  const std::string& pattern() const { return pattern_; }

  // Byte ranges [begin, end) of the successive non-empty, non-overlapping
  // leftmost-first matches in `text`.
  std::vector<std::pair<size_t, size_t>> find_all(std::string_view text) const;

  // What the "Isolated" split behavior gives: the matches and the text
  // between them, in order, covering `text` exactly with non-empty views.
  std::vector<std::string_view> split(std::string_view text) const;

  // One character test: code point ranges, plus whole classes.
  struct CharSet {
    std::vector<std::pair<char32_t, char32_t>> ranges;
    uint8_t classes = 0;      // bit per CharClass value the set includes
    uint8_t not_classes = 0;  // bit per CharClass value whose complement it includes
    bool any_but_newline = false;
    bool negated = false;
  };
  struct Inst {
    enum Op : uint8_t { kChar, kSplit, kJmp, kNegLook, kMatch } op;
    uint32_t x = 0;  // kChar: set index; kSplit: preferred; kJmp: target; kNegLook: sub-program
    uint32_t y = 0;  // kSplit: alternative
  };

 private:
  struct Input;
  // End (in characters) of the highest-priority match of the program at
  // `pc` starting at character `start`, or -1.
  long run(const Input& in, uint32_t pc, size_t start) const;

  std::string pattern_;
  std::vector<CharSet> sets_;
  std::vector<Inst> prog_;  // the main program starts at 0
};

}  // namespace ts
