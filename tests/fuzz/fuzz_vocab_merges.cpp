// Hugging Face tokenizer files: vocab.json + merges.txt, then a text.
#include "fuzz_tokenizer_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz_tokenizer_files(data, size, "vocab.json", "merges.txt");
  return 0;
}
