#pragma once
// Hugging Face tokenizer.json files with byte-level BPE (GPT-2, Llama 3,
// Qwen2, SmolLM, ...), read into the same Tokenizer as vocab.json +
// merges.txt. What is supported, field by field:
//   model            type "BPE"; vocab; merges as "a b" strings or [a, b]
//                    pairs; ignore_merges. byte_fallback, dropout, subword
//                    prefixes/suffixes are refused.
//   pre_tokenizer    ByteLevel, alone or last in a Sequence after Split
//                    (Regex, "Isolated") and Digits stages, each splitting
//                    the pieces of the one before; ByteLevel's use_regex
//                    adds GPT-2's pattern as the last stage (Llama 3 and
//                    Qwen2: [Split, ByteLevel(use_regex=false)]; SmolLM:
//                    [Digits, ByteLevel]). add_prefix_space must be false.
//   added_tokens     special or not, matched literally before pre-tokenizing,
//                    longest first; lstrip/rstrip/single_word are refused.
//   normalizer       null, or NFC: text that NFC would change is refused by
//                    encode() in one line (TokenScope does not normalize);
//                    other normalizers are refused.
//   post_processor   null, ByteLevel, TemplateProcessing whose "single" is
//                    "$A" or "<bos> $A", or a Sequence of those: sets BOS.
//   decoder          null or ByteLevel.
//   tokenizer_config.json (optional, beside it): add_bos_token overrides the
//                    post-processor; bos_token / eos_token name the tokens.
//                    Without eos_token, the end-of-text token is the first of
//                    <|endoftext|>, <|end_of_text|>, </s> that exists.
// Anything else is refused with one line naming the field.
#include <filesystem>
#include <string>
#include <string_view>

#include "model/tokenizer.h"

namespace ts {

// The pattern ByteLevel(use_regex=true) splits with.
inline constexpr std::string_view kGpt2SplitPattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// Reads `tokenizer_json`, and `tokenizer_config` when given (else a
// tokenizer_config.json in the same directory, when there is one).
Tokenizer load_tokenizer_json(const std::filesystem::path& tokenizer_json,
                              const std::filesystem::path& tokenizer_config = {});

// The same from the files' text; an empty config_json means none. The names
// start error messages.
Tokenizer tokenizer_json_from_text(std::string_view json, std::string_view config_json,
                                   const std::string& name,
                                   const std::string& config_name = "tokenizer_config.json");

}  // namespace ts
