// The pre-tokenizer regex engine: "<pattern>\0<text>". A pattern that
// compiles must split the text into non-empty pieces that cover it in order,
// its matches among them.
#include <cstdint>
#include <string_view>

#include "fuzz_check.h"
#include "model/split_regex.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ts;
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t nul = in.find('\0');
  const std::string_view pattern = in.substr(0, nul);
  const std::string_view text =
      nul == std::string_view::npos ? std::string_view() : in.substr(nul + 1);
  try {
    const SplitRegex re(pattern);
    size_t at = 0;
    for (const auto& [begin, end] : re.find_all(text)) {
      FUZZ_CHECK(begin >= at && end > begin && end <= text.size());
      at = end;
    }
    at = 0;
    for (const std::string_view piece : re.split(text)) {
      FUZZ_CHECK(!piece.empty() && piece.data() == text.data() + at);
      at += piece.size();
    }
    FUZZ_CHECK(at == text.size());
  } catch (const Error&) {
  }
  return 0;
}
