#pragma once
// The tokenizer targets: the input is "<files...>\0<...>\0<text>" (vocab_merges and
// encoder_bpe: vocabulary JSON, merges, text). A tokenizer that loads must encode the
// text into spans that cover it exactly, token by token, and decode back.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "model/tokenizer.h"
#include "util/error.h"

// The three NUL-separated parts of a fuzz input (missing parts are empty).
struct FuzzParts {
  std::string_view first, second, third;
};
inline FuzzParts split_fuzz_input(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t a = in.find('\0');
  const size_t b = a == std::string_view::npos ? a : in.find('\0', a + 1);
  return {in.substr(0, a),
          a == std::string_view::npos ? std::string_view() : in.substr(a + 1, b - a - 1),
          b == std::string_view::npos ? std::string_view() : in.substr(b + 1)};
}

// Encoding covers `text` token by token and decodes back (byte-level BPE
// round-trips any bytes; valid UTF-8 is the case the front ends rely on).
// Returns the ids.
inline std::vector<int> check_encoding(const ts::Tokenizer& tok, std::string_view text) {
  using namespace ts;
  const std::vector<TokenSpan> spans = tok.encode(text);
  std::vector<int> ids;
  size_t pos = 0;
  for (const TokenSpan& s : spans) {
    FUZZ_CHECK(s.byte_begin == pos && s.byte_end > s.byte_begin && s.byte_end <= text.size());
    FUZZ_CHECK(tok.token_bytes(s.id) == text.substr(s.byte_begin, s.byte_end - s.byte_begin));
    pos = s.byte_end;
    ids.push_back(s.id);
  }
  FUZZ_CHECK(pos == text.size());
  FUZZ_CHECK(tok.decode(ids) == text);
  FUZZ_CHECK(tok.encode_ids(text) == ids);  // the word cache gives the same answer
  return ids;
}

inline void fuzz_tokenizer_files(const uint8_t* data, size_t size, const std::string& vocab_name,
                                 const std::string& merges_name) {
  using namespace ts;
  const auto [vocab, merges, text] = split_fuzz_input(data, size);
  try {
    const Tokenizer tok = Tokenizer::from_text(vocab, merges, vocab_name, merges_name);
    FUZZ_CHECK(tok.vocab_size() >= 256);
    for (int id = 0; id < tok.vocab_size(); id += 1 + tok.vocab_size() / 64) {
      const std::string bytes = tok.token_bytes(id);
      FUZZ_CHECK(tok.find(bytes) == id);
    }
    // Pre-tokenization covers the text exactly, in order.
    size_t at = 0;
    for (const std::string_view piece : pretokenize(text)) {
      FUZZ_CHECK(!piece.empty() && piece.data() == text.data() + at);
      at += piece.size();
    }
    FUZZ_CHECK(at == text.size());
    check_encoding(tok, text);
  } catch (const Error&) {
  }
}
