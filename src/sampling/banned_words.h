#pragma once
// The banned-words stage: Hugging Face transformers' NoBadWordsLogitsProcessor
// (generate's `bad_words_ids`) as pure functions, plus the plain-text word
// lists it is built from.
//
// A list of words and phrases becomes token sequences; at every step:
//  * a single-token sequence sets that token's logit to -inf, always;
//  * a sequence of n >= 2 tokens sets its last token's logit to -inf when the
//    context (prompt and generated tokens, HF's input_ids) ends with its first
//    n - 1 tokens. Like HF, a sequence longer than the whole context is
//    skipped, even when the context equals its prefix;
//  * a sequence that is just the end-of-text token is dropped (HF drops
//    [eos_token_id] from bad_words_ids so that generation can still end).
// Nothing else changes: every other logit keeps its exact value.
//
// Where it runs: HF's processor order puts the repetition penalty before the
// bad-words processor and both before the warpers, so the pipeline is
// raw -> repetition penalty -> banned words -> temperature -> top-k -> top-p
// -> min-p. (A banned token is -inf either way; the order decides which stage
// the removal is recorded under.) Beam search, as in HF, applies it to each
// beam's log-softmax row before the beams are scored.
//
// The stage acts only on what the model generates: the prompt is read (a
// phrase's prefix may lie in it) but never changed.
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace ts {

// A word list as read from a file: the entries in file order, without blank
// lines and '#' comment lines, each trimmed of surrounding spaces and tabs.
struct BannedWordList {
  std::string source;                // the file it came from (for messages)
  std::vector<std::string> entries;  // non-empty, in file order
};

// Parses list text: one entry a line (LF or CRLF), blank lines and lines whose
// first non-blank character is '#' ignored. Throws ts::Error naming
// `source` and the line for a line with a NUL or another control character
// (other than tab), invalid UTF-8 or more than kMaxBannedEntryBytes bytes, and
// naming `source` for a list with no entry.
BannedWordList parse_banned_word_list(std::string_view text, const std::string& source);

// Reads and parses a list file (at most kMaxBannedListBytes). Throws ts::Error
// naming the file when it cannot be read, is too large, or is malformed.
BannedWordList read_banned_word_list(const std::filesystem::path& path);

inline constexpr size_t kMaxBannedEntryBytes = 256;
inline constexpr size_t kMaxBannedListBytes = 1 << 20;

// The forms of one entry that are banned, deduplicated, in this order: as
// written, with a leading space, first letter capitalised (with and without
// the space), all lower case (with and without the space). Case is changed for
// ASCII letters only; other characters are kept as written.
std::vector<std::string> banned_word_forms(std::string_view entry);

// The token sequences of a list, ready for the stage.
struct BannedTokens {
  std::string source;  // where the list came from, e.g. "assets/banned_words/en.txt"
  int entries = 0;     // entries of the list
  // Every distinct sequence, sorted; singles holds the single-token ones'
  // ids (sorted), multi the others.
  std::vector<std::vector<int>> sequences;
  std::vector<int> singles;
  std::vector<std::vector<int>> multi;
};

// Tokenizes every form of every entry with `encode` (GPT-2 BPE of the text)
// and keeps the distinct non-empty sequences, dropping [eos_id] (eos_id < 0:
// none). Throws ts::Error when an id is outside [0, vocab_size) or nothing is
// left.
BannedTokens build_banned_tokens(const BannedWordList& list,
                                 const std::function<std::vector<int>(std::string_view)>& encode,
                                 int vocab_size, int eos_id);

// The token ids the stage bans after `context` (sorted, distinct): every
// single and the last token of every multi-token sequence whose prefix ends
// the context.
std::vector<int> banned_ids_for_context(const BannedTokens& banned,
                                        const std::vector<int>& context);

// Sets the logits of banned_ids_for_context(banned, context) to -inf. Throws
// ts::Error when a banned id is outside the logits.
void apply_banned_words(std::vector<float>& logits, const BannedTokens& banned,
                        const std::vector<int>& context);

// A banned token's bytes as shown where a listed word would be drawn:
// leading whitespace and a first ASCII letter or digit kept, every later
// letter, digit and every non-ASCII character (an emoji is a word too)
// replaced by '*' (" sexy" -> " s***"). The window and the CLI say which
// tokens the stage took out without putting the listed words themselves on a
// classroom projector. Punctuation is kept; an incomplete UTF-8 sequence (a
// byte-level token may end inside a character) counts as one character.
std::string mask_banned_piece(std::string_view raw_bytes);

}  // namespace ts
