// OpenAI's GPT-2 tokenizer files: encoder.json + vocab.bpe ("#version" line
// first), then a text.
#include "fuzz_tokenizer_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz_tokenizer_files(data, size, "encoder.json", "vocab.bpe");
  return 0;
}
