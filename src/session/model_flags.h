#pragma once
// The command-line rules every front end shares (tokenscope-cli, the window,
// tokenscope-bench): how an argument list is read ("--flag value" and
// "--flag=value" mean the same), how numbers are checked (one message for a
// bad number, one for an out-of-range one), and the model / device / thread
// flags, spelt and validated the same way everywhere.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "model/tokenizer.h"
#include "sampling/banned_words.h"
#include "sampling/sampling_params.h"
#include "session/model_setup.h"

namespace ts {

// Walks argv one flag at a time. Every error it raises is a ts::Error whose
// one-line message names the flag.
class FlagReader {
 public:
  FlagReader(int argc, const char* const* argv);

  // Moves to the next argument; false when there is none.
  bool next();
  // The current flag without any "=value" part, e.g. "--steps".
  const std::string& flag() const { return flag_; }
  // The value of the current flag: the text after '=' or the next argument.
  // A next argument that starts with "--" is refused (it is the next flag, a
  // value was forgotten); "--json=--odd-name" still passes such a value.
  std::string value();
  // For a flag without a value: refuses "--quiet=yes".
  void no_value() const;
  // The arguments after the flag up to the next one starting with "--"
  // (--compare's list of strategies); none when the flag had "=value".
  std::vector<std::string> values_up_to_next_flag();

 private:
  int argc_;
  const char* const* argv_;
  int i_ = 0;
  std::string flag_;
  std::string inline_value_;
  bool has_inline_ = false;
};

// A seed for a lane that draws nothing is refused, whether it came as
// --seed or as a strategy's seed=N item: the same run either way.
inline constexpr const char* kSeedDrawsNothing = "greedy decoding draws nothing";

// A strategy given on the command line (--strategy, --compare, the
// window's --rechoose): parse_strategy, and "greedy,seed=1" (also beams,
// contrastive, spec=N or DoLa without a sampling key) refused as --seed
// alone is refused: "FLAG \"TEXT\": seed needs a sampling key ...".
SamplingParams parse_strategy_flag(const std::string& flag, const std::string& text);

// Whole number in [lo, hi]: "--steps: 'x' is not a whole number",
// "--steps: 2147483648 is out of range, at most 1048576".
long long parse_whole_number(const std::string& flag, const std::string& text, long long lo,
                             long long hi);
// Finite decimal number: "--temperature: 'x' is not a number".
float parse_decimal(const std::string& flag, const std::string& text);
// Unsigned 64-bit number (seeds).
uint64_t parse_unsigned(const std::string& flag, const std::string& text);
// A non-empty value: "--json: the value is empty".
std::string non_empty(const std::string& flag, const std::string& text);

// The most CPU threads a front end accepts: 4 x the hardware threads.
int max_cpu_threads();

// --model PATH, --tokenizer DIR, --device auto|cpu|cuda, --weights
// f32|bf16|f16|q8|q4, --kv f32|f16|bf16|q8, --threads N. Returns
// false (consuming nothing) when reader's flag is none of them.
bool parse_model_flag(FlagReader& reader, ModelSetupOptions& setup);

// Help lines for the flags above, the same text in every front end.
std::string model_flags_help();

// --draft-model PATH: the draft model of speculative lanes (spec=N), loaded
// like --model (same device and threads, its own tokenizer files). Returns
// false (consuming nothing) for any other flag; refuses it given twice.
bool parse_draft_model_flag(FlagReader& reader, std::filesystem::path& draft_model);
std::string draft_model_help();

// The banned-words flags the window and tokenscope-cli share:
// --ban-words FILE (a user list) and --no-ban-words.
struct BanWordsFlags {
  enum class Mode { kDefault, kOff, kFile };
  Mode mode = Mode::kDefault;  // kDefault: the shipped list where it is on by default
  std::filesystem::path file;  // kFile
  std::string given;           // the flag that set the mode ("" = none yet)
};

// Parses --ban-words FILE / --no-ban-words. Returns false (consuming nothing)
// for any other flag; refuses either flag given twice and the two together.
bool parse_ban_words_flag(FlagReader& reader, BanWordsFlags& flags);

// Help lines for the flags above.
std::string ban_words_help();

// Where the shipped list is: banned_words/en.txt in the data folders
// (util/paths.h); empty when no data folder holds it.
std::filesystem::path shipped_banned_words_path();

// The list the session uses: null for --no-ban-words, the user's file for
// --ban-words FILE, and otherwise the shipped list when on_by_default (the
// bundled model, presentation mode), null when not. The list is tokenized with
// `tokenizer`. Throws ts::Error naming the file (and line) for a list that
// cannot be read or is malformed or empty, and when the shipped list is
// needed but missing.
std::shared_ptr<const BannedTokens> load_banned_words(const BanWordsFlags& flags,
                                                      const Tokenizer& tokenizer,
                                                      bool on_by_default);

// One line about the stage: "banned words: on, 403 entries (2119 token
// sequences) from FILE" or "banned words: off".
std::string describe_banned_words(const BannedTokens* banned);

}  // namespace ts
