#pragma once
// The command-line rules every front end shares (tokenscope-cli, the window,
// tokenscope-bench): how an argument list is read ("--flag value" and
// "--flag=value" mean the same), how numbers are checked (one message for a
// bad number, one for an out-of-range one), and the model / device / thread
// flags, spelt and validated the same way everywhere.
#include <cstdint>
#include <string>
#include <vector>

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

// --model PATH, --tokenizer DIR, --device auto|cpu|cuda, --threads N. Returns
// false (consuming nothing) when reader's flag is none of them.
bool parse_model_flag(FlagReader& reader, ModelSetupOptions& setup);

// Help lines for the flags above, the same text in every front end.
std::string model_flags_help();

}  // namespace ts
