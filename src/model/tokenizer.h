#pragma once
// GPT-2's byte-level BPE tokenizer. Tokens are raw byte strings (a token may
// be part of a UTF-8 character); every encoded token carries the byte span it
// covers in the input, so the front ends can show exactly what each id means.
#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace ts {

class SplitRegex;

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

// What a loader hands the BPE core besides vocab.json + merges.txt (the
// tokenizer.json reader fills it; see tokenizer_json.h). Token strings are in
// GPT-2's byte alphabet; `where` labels name each entry in error messages.
struct TokenizerSpec {
  struct Entry {
    std::string token;
    int64_t id;
  };
  struct MergeRule {
    std::string left, right, where;
  };
  struct AddedToken {
    std::string content;  // raw text, matched literally before pre-tokenization
    int64_t id;
    std::string where;
  };
  std::vector<Entry> vocab;
  std::vector<MergeRule> merges;
  std::vector<AddedToken> added;
  // The pre-tokenizer's regexes (Isolated splits), each splitting the pieces
  // of the one before; none: GPT-2's built-in pretokenize().
  std::vector<std::string> split_patterns;
  bool ignore_merges = false;  // a word that is a whole token skips BPE
  int64_t bos_id = -1;
  bool add_bos = false;  // model_input_ids() starts with bos_id
  int64_t eot_id = -1;
  // The file's normalizer is NFC: TokenScope does not normalize, so encode()
  // refuses text that NFC would change (model/tokenizer_nfc.h).
  bool nfc_normalizer = false;
};

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

  // The same BPE core from a tokenizer.json's parts; `name` starts messages.
  static Tokenizer from_spec(const TokenizerSpec& spec, const std::string& name);

  // Added tokens written literally in the text ("<|endoftext|>" for GPT-2's
  // files; tokenizer.json's added_tokens) become their token, the longest
  // one where several start at the same place. No BOS here: spans cover text.
  std::vector<TokenSpan> encode(std::string_view text) const;
  std::vector<int> encode_ids(std::string_view text) const;
  // encode_ids with the BOS token in front when the tokenizer's files ask
  // for it (adds_bos()): the ids a model is fed.
  std::vector<int> model_input_ids(std::string_view text) const;
  // What every prompt path feeds the model and shows: encode() with the BOS
  // token first when adds_bos(), as a span of no bytes at 0 (it is input the
  // text does not spell).
  std::vector<TokenSpan> encode_prompt(std::string_view text) const;

  std::string token_bytes(int id) const;  // raw bytes, may be partial UTF-8
  std::string decode(const std::vector<int>& ids) const;
  std::optional<int> find(std::string_view raw_bytes) const;

  int vocab_size() const { return static_cast<int>(id_to_bytes_.size()); }
  int eot_id() const { return eot_id_; }  // -1 when the vocabulary has none
  int bos_id() const { return bos_id_; }  // -1 when none
  bool adds_bos() const { return add_bos_; }
  bool nfc_normalizer() const { return nfc_; }
  // Ids of the added tokens (matched literally before pre-tokenizing).
  std::vector<int> added_token_ids() const;
  // Ids from token_count() to vocab_size() are padding: rows of a model's
  // embedding no token maps to (Qwen2 rounds vocab_size up). They have no
  // bytes and encode() never yields them.
  int token_count() const { return token_count_ > 0 ? token_count_ : vocab_size(); }
  // Extends the ids with padding up to `model_vocab_size` (no-op when not larger).
  void pad_to(int model_vocab_size);
  // Sets what a tokenizer rebuilt from a session file's vocabulary needs to
  // pre-tokenize and feed prompts as the original did.
  // Added tokens are matched by their bytes.
  void set_prompt_rules(const std::vector<std::string>& split_patterns,
                        const std::vector<int>& added_ids, int bos_id, bool add_bos,
                        bool nfc_normalizer);
  // The pre-tokenizer's patterns; none for GPT-2's built-in pretokenize().
  std::vector<std::string> split_patterns() const;

 private:
  Tokenizer() = default;
  void check_id(int id) const;
  void set_token(std::string_view key, int64_t id, std::vector<bool>& seen,
                 const std::string& name);
  void finish_vocab(const std::string& name);
  void add_added_token(std::string content, int id);
  void add_merge(std::string_view left, std::string_view right, const std::string& where,
                 const std::string& label, const std::string& vocab_file,
                 std::unordered_map<uint64_t, std::string>& seen);
  std::vector<std::string_view> split_words(std::string_view segment) const;
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
  int bos_id_ = -1;
  bool add_bos_ = false;
  bool nfc_ = false;
  int token_count_ = 0;  // 0: no padding
  bool ignore_merges_ = false;
  int model_size_ = 0;  // ids below it are the BPE model's, above: added tokens only
  std::vector<std::shared_ptr<const SplitRegex>> splits_;  // none: pretokenize()
  // Added tokens by first byte, longest first.
  std::array<std::vector<std::pair<std::string, int>>, 256> added_;

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
