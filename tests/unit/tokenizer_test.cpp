// Byte-level BPE with a small hand-made vocabulary written to a temp dir:
// pre-tokenization branches, merge order, byte spans, round trips, special
// token, and every malformed-file case naming its file.
#include "model/tokenizer.h"

#include <gtest/gtest.h>

#include <unistd.h>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "model/token_display.h"
#include "model/unicode_categories.h"
#include "util/error.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
using Pieces = std::vector<std::string>;

// Written independently of the library so the two can check each other.
std::string gpt2_char(uint8_t b) {
  int cp = b;
  if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
    int n = 0;
    for (int x = 0; x < b; ++x) {
      if (!((x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) ++n;
    }
    cp = 256 + n;
  }
  std::string out;
  if (cp < 0x80) {
    out += char(cp);
  } else {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  }
  return out;
}

std::string gpt2_text(std::string_view raw) {
  std::string out;
  for (char c : raw) out += gpt2_char(static_cast<uint8_t>(c));
  return out;
}

class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("ts_tokenizer_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& contents) const {
    std::ofstream(path_ / name, std::ios::binary) << contents;
    return path_ / name;
  }

 private:
  fs::path path_;
};

// Merges of the test vocabulary, in rank order, as raw bytes.
const std::vector<std::pair<std::string, std::string>> kMerges = {
    {"t", "h"},   {"th", "e"}, {" ", "the"}, {"b", "c"},   {"a", "b"},       {"a", "a"},
    {"aa", "aa"}, {"h", "e"},  {"l", "l"},   {"he", "ll"}, {"hell", "o"},    {" ", "w"},
    {"1", "2"},   {"'", "s"},  {"\n", "\n"}, {" ", " "},   {"\xE2", "\x82"}, {"\xE2\x82", "\xAC"},
};

// Raw tokens by id: the 256 bytes (id = byte value), merge results, and
// optionally <|endoftext|> last.
std::vector<std::string> test_tokens(bool with_eot) {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(std::string(1, char(b)));
  for (const auto& [l, r] : kMerges) tokens.push_back(l + r);
  if (with_eot) tokens.push_back("<|endoftext|>");
  return tokens;
}

std::string vocab_json(const std::vector<std::string>& tokens) {
  nlohmann::json j = nlohmann::json::object();
  for (size_t i = 0; i < tokens.size(); ++i) j[gpt2_text(tokens[i])] = i;
  return j.dump();
}

std::string merges_txt() {
  std::string text = "#version: 0.2\n";
  for (const auto& [l, r] : kMerges) text += gpt2_text(l) + " " + gpt2_text(r) + "\n";
  return text;
}

class TokenizerTest : public ::testing::Test {
 protected:
  TokenizerTest()
      : tokens_(test_tokens(true)), tok_([this] {
          dir_.write("vocab.json", vocab_json(tokens_));
          dir_.write("merges.txt", merges_txt());
          return Tokenizer::load(dir_.path());
        }()) {}

  int id(const std::string& raw) const {
    for (size_t i = 0; i < tokens_.size(); ++i) {
      if (tokens_[i] == raw) return int(i);
    }
    ADD_FAILURE() << "no test token " << raw;
    return -1;
  }
  std::vector<int> ids(std::initializer_list<std::string> raws) const {
    std::vector<int> out;
    for (const auto& r : raws) out.push_back(id(r));
    return out;
  }

  TempDir dir_;
  std::vector<std::string> tokens_;
  Tokenizer tok_;
};

Pieces split(std::string_view text) {
  Pieces out;
  for (std::string_view p : pretokenize(text)) out.emplace_back(p);
  return out;
}

// ---------------------------------------------------------------- alphabet

TEST(ByteAlphabet, MatchesGpt2Table) {
  for (int b = 0; b < 256; ++b) {
    EXPECT_EQ(bytes_to_gpt2_unicode(std::string(1, char(b))), gpt2_char(uint8_t(b))) << b;
  }
  EXPECT_EQ(bytes_to_gpt2_unicode(" "), "\u0120");     // Ġ
  EXPECT_EQ(bytes_to_gpt2_unicode("\n"), "\u010A");    // Ċ
  EXPECT_EQ(bytes_to_gpt2_unicode("\xAD"), "\u0143");  // Ń (soft hyphen byte)
  EXPECT_EQ(bytes_to_gpt2_unicode("\x7F"), "\u0121");  // first byte after the printable ASCII
  EXPECT_EQ(bytes_to_gpt2_unicode("Az~!"), "Az~!");
}

TEST(UnicodeClasses, CoverWhatThePatternNeeds) {
  EXPECT_EQ(char_class('a'), CharClass::kLetter);
  EXPECT_EQ(char_class(U'\u00E9'), CharClass::kLetter);  // é
  EXPECT_EQ(char_class(U'\u65E5'), CharClass::kLetter);  // 日
  EXPECT_EQ(char_class(U'\u02B0'), CharClass::kLetter);  // modifier letter (Lm)
  EXPECT_EQ(char_class(U'\u0301'), CharClass::kOther);   // combining accent is Mn, not L
  EXPECT_EQ(char_class('7'), CharClass::kNumber);
  EXPECT_EQ(char_class(U'\u00BD'), CharClass::kNumber);  // ½ (No)
  EXPECT_EQ(char_class(U'\u2167'), CharClass::kNumber);  // Ⅷ (Nl)
  EXPECT_EQ(char_class(U'\u0663'), CharClass::kNumber);  // Arabic-Indic 3
  for (char32_t ws :
       {U'\t', U'\n', U'\v', U'\f', U'\r', U' ', U'\u0085', U'\u00A0', U'\u1680', U'\u2000',
        U'\u200A', U'\u2028', U'\u2029', U'\u202F', U'\u205F', U'\u3000'}) {
    EXPECT_EQ(char_class(ws), CharClass::kSpace) << std::hex << uint32_t(ws);
  }
  // Python's str.isspace() says yes to these; Unicode White_Space (\s) says no.
  for (char32_t c : {U'\x1C', U'\x1F', U'\u200B', U'\uFEFF', U'\u180E'}) {
    EXPECT_EQ(char_class(c), CharClass::kOther) << std::hex << uint32_t(c);
  }
  EXPECT_EQ(char_class(U'\U0001F44B'), CharClass::kOther);  // 👋
  EXPECT_EQ(char_class(0x10FFFF), CharClass::kOther);
  EXPECT_STRNE(unicode_tables_version(), "");
}

TEST(Utf8, DecodesAndRejectsBadSequences) {
  const auto one = [](std::string_view s) { return decode_utf8(s, 0); };
  EXPECT_EQ(one("\xE2\x82\xAC").cp, U'\u20AC');
  EXPECT_EQ(one("\xE2\x82\xAC").len, 3);
  EXPECT_EQ(one("\xF0\x9F\x91\x8B").cp, U'\U0001F44B');
  for (std::string_view bad :
       {"\x80", "\xC0\xAF", "\xC1\xBF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
        "\xF5\x80\x80\x80", "\xFF", "\xE2\x82", "\xE2\x28\xA1", "\xF0\x9F\x91"}) {
    const Utf8Char c = one(bad);
    EXPECT_FALSE(c.valid) << testing::PrintToString(bad);
    EXPECT_EQ(c.len, 1);
  }
}

// ---------------------------------------------------------- pre-tokenizing

TEST(Pretokenize, WordsAndOptionalLeadingSpace) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split(""), Pieces{});
  EXPECT_EQ(split("x"), Pieces{"x"});
}

TEST(Pretokenize, ContractionsAreLowerCaseOnly) {
  EXPECT_EQ(split("it's we're they've I'm you'll he'd don't"),
            (Pieces{"it", "'s", " we", "'re", " they", "'ve", " I", "'m", " you", "'ll", " he",
                    "'d", " don", "'t"}));
  // GPT-2's pattern has no (?i): upper-case forms are punctuation + letters.
  EXPECT_EQ(split("IT'S WE'RE"), (Pieces{"IT", "'", "S", " WE", "'", "RE"}));
  // A contraction only starts where the apostrophe starts a match.
  EXPECT_EQ(split("'sa"), (Pieces{"'s", "a"}));
  EXPECT_EQ(split(" 's"), (Pieces{" '", "s"}));
  EXPECT_EQ(split("''s"), (Pieces{"''", "s"}));
  EXPECT_EQ(split("'x 'lx"), (Pieces{"'", "x", " '", "lx"}));
  EXPECT_EQ(split("'"), (Pieces{"'"}));
}

TEST(Pretokenize, Numbers) {
  EXPECT_EQ(split("abc123def 456"), (Pieces{"abc", "123", "def", " 456"}));
  EXPECT_EQ(split("3.14"), (Pieces{"3", ".", "14"}));
  EXPECT_EQ(split("x\u00B2\u00BD \u2167\u0663"), (Pieces{"x", "\u00B2\u00BD", " \u2167\u0663"}));
}

TEST(Pretokenize, PunctuationRuns) {
  EXPECT_EQ(split("Hi!!! ...?"), (Pieces{"Hi", "!!!", " ...?"}));
  EXPECT_EQ(split("a+=b"), (Pieces{"a", "+=", "b"}));
  EXPECT_EQ(split("f(x);"), (Pieces{"f", "(", "x", ");"}));
}

TEST(Pretokenize, WhitespaceBeforeTextKeepsOneCharacterForTheWord) {
  // \s+(?!\S): a run followed by text gives up its last character.
  EXPECT_EQ(split("a  b"), (Pieces{"a", " ", " b"}));
  EXPECT_EQ(split("a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(split("a \n b"), (Pieces{"a", " \n", " b"}));
  // A single non-space whitespace before text falls through to \s+.
  EXPECT_EQ(split("a\tb"), (Pieces{"a", "\t", "b"}));
  EXPECT_EQ(split("  a"), (Pieces{" ", " a"}));
  EXPECT_EQ(split("a  !"), (Pieces{"a", " ", " !"}));
  EXPECT_EQ(split("a  1"), (Pieces{"a", " ", " 1"}));
}

TEST(Pretokenize, TrailingWhitespaceStaysWhole) {
  EXPECT_EQ(split("a  "), (Pieces{"a", "  "}));
  EXPECT_EQ(split(" "), (Pieces{" "}));
  EXPECT_EQ(split("\t"), (Pieces{"\t"}));
  EXPECT_EQ(split("a \t\n"), (Pieces{"a", " \t\n"}));
}

TEST(Pretokenize, Newlines) {
  EXPECT_EQ(split("a\nb"), (Pieces{"a", "\n", "b"}));
  EXPECT_EQ(split("a\n\nb"), (Pieces{"a", "\n", "\n", "b"}));
  EXPECT_EQ(split("a\n\n b"), (Pieces{"a", "\n\n", " b"}));
  EXPECT_EQ(split("line\r\nnext"), (Pieces{"line", "\r", "\n", "next"}));
  EXPECT_EQ(split("end\n\n"), (Pieces{"end", "\n\n"}));
}

TEST(Pretokenize, UnicodeLettersAndMarks) {
  EXPECT_EQ(split("h\u00E9llo w\u00F6rld \u03A9\u03BC\u03AD\u03B3\u03B1 \u65E5\u672C\u8A9E"),
            (Pieces{"h\u00E9llo", " w\u00F6rld", " \u03A9\u03BC\u03AD\u03B3\u03B1",
                    " \u65E5\u672C\u8A9E"}));
  // Decomposed é: the combining mark is not \p{L}, so the word splits there.
  EXPECT_EQ(split("cafe\u0301s"), (Pieces{"cafe", "\u0301", "s"}));
}

TEST(Pretokenize, UnicodeWhitespace) {
  EXPECT_EQ(split("a\u00A0b"), (Pieces{"a", "\u00A0", "b"}));
  EXPECT_EQ(split("a\u3000\u3000b"), (Pieces{"a", "\u3000", "\u3000", "b"}));
  // Only U+0020 can be the optional leading space of a word.
  EXPECT_EQ(split("a\u2009b"), (Pieces{"a", "\u2009", "b"}));
  // U+001C is not \s: it is "other" and glues to punctuation.
  EXPECT_EQ(split("a\x1C!b"), (Pieces{"a", "\x1C!", "b"}));
}

TEST(Pretokenize, Emoji) {
  EXPECT_EQ(split("hi \U0001F44B\U0001F3FD!"), (Pieces{"hi", " \U0001F44B\U0001F3FD!"}));
  EXPECT_EQ(split("hello \U0001F44B world \U0001F30D"),
            (Pieces{"hello", " \U0001F44B", " world", " \U0001F30D"}));
}

TEST(Pretokenize, InvalidUtf8BytesAreOtherCharacters) {
  EXPECT_EQ(split("ab\xFF"
                  "cd"),
            (Pieces{"ab", "\xFF", "cd"}));
  EXPECT_EQ(split("x\xE2\x82"), (Pieces{"x", "\xE2\x82"}));  // truncated at the end
  EXPECT_EQ(split("\xE2\x82q"), (Pieces{"\xE2\x82", "q"}));
  EXPECT_EQ(split(" \x80\x80x"), (Pieces{" \x80\x80", "x"}));
  EXPECT_EQ(split("\xC2\xA0"), (Pieces{"\xC2\xA0"}));  // valid NBSP: whitespace
  EXPECT_EQ(split("a\xA0"), (Pieces{"a", "\xA0"}));    // stray 0xA0 byte: not whitespace
}

TEST(Pretokenize, PiecesCoverRandomBytesExactly) {
  std::mt19937 rng(12345);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string text(rng() % 40, '\0');
    for (char& c : text) c = char(rng() % 256);
    const std::vector<std::string_view> pieces = pretokenize(text);
    size_t pos = 0;
    for (std::string_view p : pieces) {
      ASSERT_FALSE(p.empty());
      ASSERT_EQ(size_t(p.data() - text.data()), pos);
      pos += p.size();
    }
    ASSERT_EQ(pos, text.size());
  }
}

// ------------------------------------------------------------------ encode

TEST_F(TokenizerTest, Basics) {
  EXPECT_EQ(tok_.vocab_size(), int(tokens_.size()));
  EXPECT_EQ(tok_.eot_id(), int(tokens_.size()) - 1);
  EXPECT_EQ(tok_.find("the"), id("the"));
  EXPECT_EQ(tok_.find("\xE2\x82"), id("\xE2\x82"));
  EXPECT_EQ(tok_.find("zebra"), std::nullopt);
  EXPECT_EQ(tok_.token_bytes(id(" the")), " the");
  EXPECT_TRUE(tok_.encode("").empty());
}

TEST_F(TokenizerTest, UnmergedBytesFallBackToByteTokens) {
  EXPECT_EQ(tok_.encode_ids("xyz"), (std::vector<int>{'x', 'y', 'z'}));
  EXPECT_EQ(tok_.encode_ids("\xFF\xFE"), (std::vector<int>{0xFF, 0xFE}));
  // 日 = E6 97 A5: no merges, three byte tokens.
  EXPECT_EQ(tok_.encode_ids("\u65E5"), (std::vector<int>{0xE6, 0x97, 0xA5}));
}

TEST_F(TokenizerTest, MergesApplyInRankOrderNotLeftToRight) {
  // "b c" outranks "a b": a left-to-right greedy merge would give ab + c.
  EXPECT_EQ(tok_.encode_ids("abc"), ids({"a", "bc"}));
  EXPECT_EQ(tok_.encode_ids("ab"), ids({"ab"}));
  EXPECT_EQ(tok_.encode_ids("the"), ids({"the"}));
  EXPECT_EQ(tok_.encode_ids(" the"), ids({" the"}));
  EXPECT_EQ(tok_.encode_ids("hello"), ids({"hello"}));
  // One round merges every non-overlapping occurrence, left to right.
  EXPECT_EQ(tok_.encode_ids("aaa"), ids({"aa", "a"}));
  EXPECT_EQ(tok_.encode_ids("aaaa"), ids({"aaaa"}));
  EXPECT_EQ(tok_.encode_ids("aaaaa"), ids({"aaaa", "a"}));
  EXPECT_EQ(tok_.encode_ids("aaaaaa"), ids({"aaaa", "aa"}));
}

TEST_F(TokenizerTest, MergesStayInsideWords) {
  // " " + "the" would merge, but "  the" splits into " " and " the" first.
  EXPECT_EQ(tok_.encode_ids("  the"), ids({" ", " the"}));
  EXPECT_EQ(tok_.encode_ids("   "), ids({"  ", " "}));
  EXPECT_EQ(tok_.encode_ids("it's"), ids({"i", "t", "'s"}));
  EXPECT_EQ(tok_.encode_ids("12 12"), ids({"12", " ", "12"}));
  EXPECT_EQ(tok_.encode_ids("a\n\nb"), ids({"a", "\n", "\n", "b"}));
  EXPECT_EQ(tok_.encode_ids("a\n\n"), ids({"a", "\n\n"}));
}

TEST_F(TokenizerTest, PartialUtf8Tokens) {
  EXPECT_EQ(tok_.encode_ids("\u20AC"), ids({"\xE2\x82\xAC"}));  // €
  // "\xE2\x82" alone is a token that is not a whole character.
  const std::vector<TokenSpan> spans = tok_.encode("x\xE2\x82");
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[1].id, id("\xE2\x82"));
  EXPECT_FALSE(is_complete_utf8(tok_.token_bytes(spans[1].id)));
  EXPECT_TRUE(is_complete_utf8(display_piece(tok_.token_bytes(spans[1].id))));
}

TEST_F(TokenizerTest, SpansCoverTheInput) {
  const std::string text = "hello  the\n\nworld's \u20AC12!\xFF";
  const std::vector<TokenSpan> spans = tok_.encode(text);
  size_t pos = 0;
  for (const TokenSpan& s : spans) {
    EXPECT_EQ(s.byte_begin, pos);
    EXPECT_EQ(text.substr(s.byte_begin, s.byte_end - s.byte_begin), tok_.token_bytes(s.id));
    pos = s.byte_end;
  }
  EXPECT_EQ(pos, text.size());
}

TEST_F(TokenizerTest, EndOfTextInTheMiddle) {
  const std::vector<TokenSpan> spans = tok_.encode("the<|endoftext|> the");
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].id, id("the"));
  EXPECT_EQ(spans[1].id, tok_.eot_id());
  EXPECT_EQ(spans[1].byte_begin, 3u);
  EXPECT_EQ(spans[1].byte_end, 16u);
  EXPECT_EQ(spans[2].id, id(" the"));
  EXPECT_EQ(spans[2].byte_begin, 16u);
  EXPECT_EQ(spans[2].byte_end, 20u);
  // Text on each side is split on its own: the space before stays trailing.
  EXPECT_EQ(tok_.encode_ids("a <|endoftext|>"), (std::vector<int>{'a', ' ', tok_.eot_id()}));
  EXPECT_EQ(tok_.encode_ids("<|endoftext|><|endoftext|>"),
            (std::vector<int>{tok_.eot_id(), tok_.eot_id()}));
  // Anything short of the literal is ordinary text.
  const std::vector<int> partial = tok_.encode_ids("<|endoftext|");
  EXPECT_EQ(partial.size(), std::string("<|endoftext|").size());
  EXPECT_EQ(tok_.decode(tok_.encode_ids("x<|endoftext|>y")), "x<|endoftext|>y");
}

TEST(TokenizerNoEot, EndOfTextIsOrdinaryTextWithoutTheToken) {
  TempDir dir;
  dir.write("vocab.json", vocab_json(test_tokens(false)));
  dir.write("merges.txt", merges_txt());
  const Tokenizer tok = Tokenizer::load(dir.path());
  EXPECT_EQ(tok.eot_id(), -1);
  const std::vector<int> ids = tok.encode_ids("a<|endoftext|>");
  EXPECT_EQ(ids.size(), 14u);
  EXPECT_EQ(tok.decode(ids), "a<|endoftext|>");
}

TEST_F(TokenizerTest, RoundTripsStrings) {
  for (const std::string& s : std::vector<std::string>{
           "", "hello world", "the  the   the", "it's I'LL 12345 3.14!!", "\n\n\n", " \t \n ",
           "h\u00E9llo \u65E5\u672C\u8A9E \U0001F44B\U0001F3FD", "cafe\u0301", "<|endoftext|>",
           "a<|endoftext|>b<|endoftext|", "\xE2\x82", "\x80\xFF\xC0\xAF", std::string(1, '\0'),
           std::string(3000, 'a'), std::string(1000, ' ') + "x"}) {
    EXPECT_EQ(tok_.decode(tok_.encode_ids(s)), s) << testing::PrintToString(s);
  }
}

TEST_F(TokenizerTest, RoundTripsRandomBytes) {
  std::mt19937 rng(2024);
  const std::string alphabet = "ab the'sl12\n \t<|endoftext|>\xE2\x82\xAC";
  for (int trial = 0; trial < 1000; ++trial) {
    std::string text(rng() % 64, '\0');
    for (char& c : text) {
      c = trial % 2 ? char(rng() % 256) : alphabet[rng() % alphabet.size()];
    }
    const std::vector<TokenSpan> spans = tok_.encode(text);
    std::vector<int> ids;
    size_t pos = 0;
    for (const TokenSpan& s : spans) {
      ASSERT_EQ(s.byte_begin, pos);
      pos = s.byte_end;
      ids.push_back(s.id);
    }
    ASSERT_EQ(pos, text.size());
    ASSERT_EQ(tok_.decode(ids), text) << testing::PrintToString(text);
  }
}

TEST_F(TokenizerTest, LongWordsAreNotCachedButStillEncode) {
  const std::vector<int> long_ids = tok_.encode_ids(std::string(5000, 'a'));
  EXPECT_EQ(long_ids, std::vector<int>(1250, id("aaaa")));
  // Repeated (cached) words give the same answer as the first time.
  EXPECT_EQ(tok_.encode_ids("hello hello hello"), ids({"hello", " ", "hello", " ", "hello"}));
}

TEST_F(TokenizerTest, CopiesEncodeTheSame) {
  tok_.encode_ids("hello the world");  // fill the cache
  const Tokenizer copy = tok_;
  EXPECT_EQ(copy.encode_ids("hello the world"), tok_.encode_ids("hello the world"));
}

TEST_F(TokenizerTest, InvalidIdsAreErrors) {
  EXPECT_THROW(tok_.token_bytes(-1), Error);
  EXPECT_THROW(tok_.token_bytes(tok_.vocab_size()), Error);
  EXPECT_THROW(tok_.decode({id("a"), 99999}), Error);
}

TEST_F(TokenizerTest, ConcurrentEncodesAgree) {
  const std::string text = "hello the world, it's 12 aaaa abc\n\n the end";
  const std::vector<int> expected = Tokenizer(tok_).encode_ids(text);
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        if (tok_.encode_ids(text) != expected) ++mismatches;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// ------------------------------------------------------------------ display

TEST(TokenDisplay, CompleteUtf8) {
  EXPECT_TRUE(is_complete_utf8(""));
  EXPECT_TRUE(is_complete_utf8("plain ascii"));
  EXPECT_TRUE(is_complete_utf8("\u20AC \U0001F44B"));
  EXPECT_FALSE(is_complete_utf8("\xE2\x82"));      // truncated €
  EXPECT_FALSE(is_complete_utf8("\x82\xAC"));      // continuation bytes only
  EXPECT_FALSE(is_complete_utf8("\xC0\xAF"));      // overlong '/'
  EXPECT_FALSE(is_complete_utf8("\xED\xA0\x80"));  // surrogate
  EXPECT_FALSE(is_complete_utf8("ok\xFF"));
}

TEST(TokenDisplay, MakesEveryByteVisible) {
  EXPECT_EQ(display_piece(" hello"), "\u2423hello");
  EXPECT_EQ(display_piece("a  b"), "a\u2423\u2423b");
  EXPECT_EQ(display_piece("\n\n"), "\u21B5\u21B5");
  EXPECT_EQ(display_piece("\tx"), "\u2192x");
  EXPECT_EQ(display_piece("\r"), "<0x0D>");
  EXPECT_EQ(display_piece(std::string(1, '\0')), "<0x00>");
  EXPECT_EQ(display_piece("\x7F"), "<0x7F>");
  EXPECT_EQ(display_piece("\xE2\x82"), "<0xE2><0x82>");
  EXPECT_EQ(display_piece("\x8B"), "<0x8B>");
  EXPECT_EQ(display_piece("\u20AC"), "\u20AC");
  EXPECT_EQ(display_piece("caf\u00E9 \u65E5"), "caf\u00E9\u2423\u65E5");
  EXPECT_EQ(display_piece("\xC2\x85"), "<U+0085>");  // NEL: valid, but draws nothing
  EXPECT_EQ(display_piece(""), "");
}

TEST(TokenDisplay, AlwaysValidUtf8) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string raw(rng() % 12, '\0');
    for (char& c : raw) c = char(rng() % 256);
    const std::string shown = display_piece(raw);
    ASSERT_TRUE(is_complete_utf8(shown)) << testing::PrintToString(raw);
    ASSERT_EQ(shown.empty(), raw.empty());
  }
}

// ------------------------------------------------------------------ loading

TEST(TokenizerLoad, AcceptsOpenAiFileNames) {
  TempDir dir;
  dir.write("encoder.json", vocab_json(test_tokens(true)));
  dir.write("vocab.bpe", merges_txt());
  const Tokenizer tok = Tokenizer::load(dir.path());
  EXPECT_EQ(tok.encode_ids(" the").size(), 1u);
}

TEST(TokenizerLoad, AcceptsCrLfAndNoVersionLine) {
  TempDir dir;
  std::string merges;
  for (const auto& [l, r] : kMerges) merges += gpt2_text(l) + " " + gpt2_text(r) + "\r\n";
  const Tokenizer tok = Tokenizer::from_files(dir.write("v.json", vocab_json(test_tokens(true))),
                                              dir.write("m.txt", merges + "\r\n\n"));
  EXPECT_EQ(tok.encode_ids("hello").size(), 1u);
}

// Expects loading to fail with a one-line message containing every `parts`.
void expect_load_error(const fs::path& vocab, const fs::path& merges,
                       std::initializer_list<std::string> parts) {
  try {
    Tokenizer::from_files(vocab, merges);
    ADD_FAILURE() << "no error for " << vocab << " + " << merges;
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    for (const std::string& part : parts) {
      EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' not in: " << message;
    }
  }
}

TEST(TokenizerLoad, MissingFiles) {
  TempDir dir;
  try {
    Tokenizer::load(dir.path());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(dir.path().string()), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("vocab.json"), std::string::npos);
  }
  EXPECT_THROW(Tokenizer::load(dir.path() / "nope"), Error);
  dir.write("vocab.json", vocab_json(test_tokens(true)));
  expect_load_error(dir.path() / "vocab.json", dir.path() / "merges.txt",
                    {"merges.txt", "cannot open"});
  EXPECT_THROW(Tokenizer::load(dir.path()), Error);
}

TEST(TokenizerLoad, MalformedVocabNamesTheFile) {
  TempDir dir;
  const fs::path merges = dir.write("merges.txt", merges_txt());
  const auto vocab = [&](const std::string& text) { return dir.write("vocab.json", text); };
  std::string good = vocab_json(test_tokens(true));

  expect_load_error(vocab("{\"a\": 0,"), merges, {"vocab.json", "invalid JSON"});
  expect_load_error(vocab("[1, 2]"), merges, {"vocab.json", "JSON object"});
  expect_load_error(vocab("{}"), merges, {"vocab.json", "empty"});
  expect_load_error(vocab("{\"a\": \"0\"}"), merges, {"vocab.json", "\"a\"", "integer"});
  expect_load_error(vocab("{\"a\": 0.5}"), merges, {"vocab.json", "integer"});

  // Ids must be exactly 0..n-1: a gap shows up as an id out of range.
  nlohmann::json j = nlohmann::json::parse(good);
  j["the"] = 5000;
  expect_load_error(vocab(j.dump()), merges, {"vocab.json", "5000", "dense"});
  j = nlohmann::json::parse(good);
  j["the"] = 0;
  j["x"] = 0;  // leaves one id missing and one used twice
  expect_load_error(vocab(j.dump()), merges, {"vocab.json", "id 0"});
  // Same key twice: nlohmann would keep one silently.
  expect_load_error(vocab("{\"a\": 0, \"a\": 1}"), merges, {"vocab.json", "duplicate", "\"a\""});
  // A raw space is not in GPT-2's alphabet (it is written "Ġ").
  j = nlohmann::json::parse(good);
  const int the_id = j["\u0120the"];
  j.erase("\u0120the");
  j[" the"] = the_id;
  expect_load_error(vocab(j.dump()), merges, {"vocab.json", "\" the\"", "alphabet"});
  // Every single byte needs a token.
  std::vector<std::string> tokens = test_tokens(true);
  tokens.erase(tokens.begin() + 'q');
  expect_load_error(vocab(vocab_json(tokens)), merges, {"vocab.json", "0x71"});
}

TEST(TokenizerLoad, MalformedMergesNameFileAndLine) {
  TempDir dir;
  const fs::path vocab = dir.write("vocab.json", vocab_json(test_tokens(true)));
  const auto merges = [&](const std::string& text) { return dir.write("merges.txt", text); };
  const std::string v = "#version: 0.2\n";

  expect_load_error(vocab, merges(v + "t h\nthe\n"), {"merges.txt:3:", "two tokens"});
  expect_load_error(vocab, merges(v + "t h e\n"), {"merges.txt:2:", "two tokens"});
  expect_load_error(vocab, merges(v + "t  h\n"), {"merges.txt:2:", "two tokens"});
  expect_load_error(vocab, merges("t h\n th\n"), {"merges.txt:2:", "two tokens"});
  expect_load_error(vocab, merges(v + "t h\nzz q\n"),
                    {"merges.txt:3:", "unknown symbol", "\"zz\"", "vocab.json"});
  expect_load_error(vocab, merges(v + "x y\n"),
                    {"merges.txt:2:", "merge result", "\"xy\"", "vocab.json"});
  expect_load_error(vocab, merges(v + "t h\nt h\n"), {"merges.txt:3:", "duplicate", "line 2"});
  expect_load_error(vocab, merges(v + "t \xE6\x97\xA5\n"), {"merges.txt:2:", "alphabet"});
}

// ------------------------------------------------- fixture from tools/reference

#ifdef TS_FIXTURE_DIR
// tools/reference/make_reference.py writes ids and byte spans computed by an
// independent tokenizer for each case's prompt.
TEST(TokenizerFixture, MatchesReferenceIdsAndSpans) {
  const fs::path dir = fs::path(TS_FIXTURE_DIR) / "tiny";
  const fs::path reference = dir / "reference.json";
  if (!fs::exists(dir / "vocab.json") || !fs::exists(reference)) {
    GTEST_SKIP() << "no tokenizer fixture in " << dir;
  }
  const Tokenizer tok = Tokenizer::load(dir);
  std::ifstream in(reference);
  const nlohmann::json ref = nlohmann::json::parse(in);
  ASSERT_TRUE(ref.contains("cases")) << reference << ": no \"cases\"";
  if (ref.contains("config") && ref["config"].contains("vocab_size")) {
    EXPECT_EQ(tok.vocab_size(), ref["config"]["vocab_size"].get<int>());
  }
  if (ref.contains("config") && ref["config"].contains("eot_token_id")) {
    EXPECT_EQ(tok.eot_id(), ref["config"]["eot_token_id"].get<int>());
  }
  int checked = 0;
  for (const nlohmann::json& c : ref["cases"]) {
    if (!c.contains("prompt") || !c.contains("token_ids")) continue;
    const std::string prompt = c["prompt"];
    const std::vector<int> ids = c["token_ids"];
    const std::vector<TokenSpan> spans = tok.encode(prompt);
    std::vector<int> got;
    for (const TokenSpan& s : spans) got.push_back(s.id);
    EXPECT_EQ(got, ids) << prompt;
    EXPECT_EQ(tok.decode(ids), prompt);
    if (c.contains("token_spans") && got == ids) {
      for (size_t t = 0; t < spans.size(); ++t) {
        EXPECT_EQ(spans[t].byte_begin, c["token_spans"][t][0].get<size_t>()) << prompt << " " << t;
        EXPECT_EQ(spans[t].byte_end, c["token_spans"][t][1].get<size_t>()) << prompt << " " << t;
      }
    }
    ++checked;
  }
  EXPECT_GT(checked, 0) << reference << ": no case has both \"prompt\" and \"token_ids\"";
}
#endif

}  // namespace
}  // namespace ts
