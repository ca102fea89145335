#pragma once
// GPT-2's byte-level BPE tokenizer. Tokens are raw byte strings (a token may
// be part of a UTF-8 character); every encoded token carries the byte span it
// covers in the input, so the front ends can show exactly what each id means.
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ts {

struct TokenSpan {
  int id;
  size_t byte_begin;  // [byte_begin, byte_end) in the encoded text
  size_t byte_end;
};

// GPT-2's pre-tokenization: splits text the way the pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// does. The pieces are views into `text`, in order, and cover it exactly;
// invalid UTF-8 bytes count as single [^\s\p{L}\p{N}] characters.
std::vector<std::string_view> pretokenize(std::string_view text);

// GPT-2's printable stand-in for raw bytes (the alphabet vocab.json and
// merges.txt are written in: ' ' -> "Ġ", '\n' -> "Ċ", 0xAD -> "Ń", ...).
std::string bytes_to_gpt2_unicode(std::string_view raw_bytes);

class Tokenizer {
 public:
  // Reads vocab.json + merges.txt (Hugging Face names) or, failing those,
  // encoder.json + vocab.bpe (OpenAI names) from a model directory.
  static Tokenizer load(const std::filesystem::path& model_dir);
  static Tokenizer from_files(const std::filesystem::path& vocab_path,
                              const std::filesystem::path& merges_path);
  // The same from the files' text (what from_files reads); the names are
  // used in error messages only.
  static Tokenizer from_text(std::string_view vocab_json, std::string_view merges_txt,
                             const std::string& vocab_name, const std::string& merges_name);

  // "<|endoftext|>" written literally in the text becomes the special token.
  std::vector<TokenSpan> encode(std::string_view text) const;
  std::vector<int> encode_ids(std::string_view text) const;

  std::string token_bytes(int id) const;  // raw bytes, may be partial UTF-8
  std::string decode(const std::vector<int>& ids) const;
  std::optional<int> find(std::string_view raw_bytes) const;

  int vocab_size() const { return static_cast<int>(id_to_bytes_.size()); }
  int eot_id() const { return eot_id_; }  // -1 when the vocabulary has none

 private:
  Tokenizer() = default;
  void check_id(int id) const;
  std::vector<int> word_ids(std::string_view word) const;    // cached merge_word
  std::vector<int> merge_word(std::string_view word) const;  // BPE of one word

  struct Merge {
    int rank;
    int result;
  };
  static uint64_t pair_key(int left, int right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }

  std::vector<std::string> id_to_bytes_;
  std::unordered_map<std::string, int> bytes_to_id_;
  std::array<int, 256> byte_id_{};  // token of each single byte
  std::unordered_map<uint64_t, Merge> merges_;
  int eot_id_ = -1;

  // Words repeat a lot in real text and BPE is the expensive part. Shared by
  // threads encoding at once; a copied Tokenizer starts with an empty cache.
  struct WordCache {
    WordCache() = default;
    WordCache(const WordCache&) {}
    WordCache& operator=(const WordCache&) {
      std::lock_guard<std::mutex> lock(mutex);
      words.clear();
      return *this;
    }
    std::mutex mutex;
    std::unordered_map<std::string, std::vector<int>> words;
  };
  mutable WordCache cache_;
};

}  // namespace ts
