// The bundled default model: it loads through the same code path as a real
// GPT-2 download, matches PyTorch, and its model card holds the engine's own
// figures.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "exported_model_checks.h"
#include "session/evaluate.h"
#include "session/model_setup.h"
#include "session/session.h"
#include "test_paths.h"

namespace ts {
namespace {

std::filesystem::path bundled_dir() {
  return std::filesystem::path(TS_SOURCE_DIR) / "assets/models/tokenscope-tiny";
}

nlohmann::json read_json(const std::filesystem::path& p) { return test::read_json_file(p); }
std::string read_text(const std::filesystem::path& p) { return test::read_text_file(p); }

LoadedModel bundled() {
  ModelSetupOptions o;  // no --model: the default must be the bundled model
  o.device = "cpu";
  return load_model_setup(o);
}

TEST(BundledModel, IsTheDefaultAndMatchesPyTorchLogits) {
  LoadedModel m = bundled();
  EXPECT_EQ(std::filesystem::canonical(m.path), std::filesystem::canonical(bundled_dir()));
  test::expect_pytorch_logits(m, test::fixture_dir() / "bundled/reference.json");
}

TEST(BundledModel, GreedyContinuationsEqualPyTorchs) {
  LoadedModel m = bundled();
  const auto ref = read_json(test::fixture_dir() / "bundled/reference.json");
  for (const auto& c : ref["cases"]) {
    const std::vector<int> want = c["greedy_continuation_ids"].get<std::vector<int>>();
    SessionOptions o;
    o.max_new_tokens = static_cast<int>(want.size());
    o.record_attention = false;
    Session s(m.tokenizer, m.engine, o);
    s.set_prompt(c["prompt"].get<std::string>());
    s.run(1000);
    std::vector<int> got = s.lanes()[0].generated;
    got.resize(std::min(got.size(), want.size()));
    EXPECT_EQ(got, std::vector<int>(want.begin(), want.begin() + static_cast<long>(got.size())))
        << c["prompt"];
  }
}

TEST(BundledModel, TokenizerRoundTripsTheValidationTextByteExactly) {
  LoadedModel m = bundled();
  const std::string text = read_text(test::fixture_dir() / "bundled/val.txt");
  ASSERT_GT(text.size(), 100000u);
  const std::vector<int> ids = m.tokenizer->encode_ids(text);
  const auto ref = read_json(test::fixture_dir() / "bundled/reference.json");
  EXPECT_EQ(static_cast<long long>(ids.size()), ref["validation"]["tokens"].get<long long>());
  EXPECT_EQ(m.tokenizer->decode(ids), text);
}

TEST(BundledModel, ValidationLossAgreesWithPyTorchAndTheModelCard) {
  test::expect_validation_loss(bundled(), test::fixture_dir() / "bundled/reference.json",
                               test::fixture_dir() / "bundled/val.txt", bundled_dir());
}

}  // namespace
}  // namespace ts
