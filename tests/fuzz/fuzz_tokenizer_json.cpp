// Hugging Face tokenizer.json: "<tokenizer.json>\0<tokenizer_config.json>\0<text>".
// A tokenizer that loads must encode the text into spans that cover it
// exactly and decode back to it, and put BOS in front exactly when it says so.
#include "fuzz_tokenizer_common.h"
#include "model/tokenizer_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ts;
  const auto [json, config, text] = split_fuzz_input(data, size);
  try {
    const Tokenizer tok = tokenizer_json_from_text(json, config, "tokenizer.json");
    FUZZ_CHECK(tok.vocab_size() >= 256);
    std::vector<int> ids = check_encoding(tok, text);
    if (tok.adds_bos()) ids.insert(ids.begin(), tok.bos_id());
    FUZZ_CHECK(tok.model_input_ids(text) == ids);
  } catch (const Error&) {
  }
  return 0;
}
