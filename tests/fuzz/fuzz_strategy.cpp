// Strategy strings (--strategy, --compare, the GUI's field).
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_check.h"
#include "sampling/sampling_params.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ts;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  SamplingParams p;
  try {
    p = parse_strategy(text);
  } catch (const Error&) {
    return 0;
  }
  // Whatever parses is valid, and its canonical string parses back to it.
  p.validate();
  const std::string canonical = format_strategy(p);
  const SamplingParams again = parse_strategy(canonical);
  FUZZ_CHECK(again == p);
  FUZZ_CHECK(format_strategy(again) == canonical);
  FUZZ_CHECK(!describe(p).empty());
  return 0;
}
