// The bundled draft model (assets/models/tokenscope-tiny-draft): it shares
// the bundled model's tokenizer files byte for byte, matches PyTorch, its
// card holds the engine's own figures (validation loss, and the acceptance
// rate it reaches drafting for tokenscope-tiny), and as a speculative lane's
// draft it leaves greedy decoding of the bundled model unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
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

namespace fs = std::filesystem;

fs::path target_dir() { return fs::path(TS_SOURCE_DIR) / "assets/models/tokenscope-tiny"; }
fs::path draft_dir() { return fs::path(TS_SOURCE_DIR) / "assets/models/tokenscope-tiny-draft"; }

nlohmann::json read_json(const fs::path& p) { return test::read_json_file(p); }
std::string read_text(const fs::path& p) { return test::read_text_file(p); }

struct Pair {
  LoadedModel target, draft;
};

Pair& pair() {
  static Pair p = [] {
    Pair q;
    ModelSetupOptions o;
    o.model = target_dir();
    o.device = "cpu";
    o.cpu_threads = 2;
    q.target = load_model_setup(o);
    q.draft = load_draft_model(o, draft_dir(), 4);
    return q;
  }();
  return p;
}

TEST(DraftModel, SharesTheBundledTokenizerAndFitsItsBudget) {
  for (const char* f : {"vocab.json", "merges.txt"})
    EXPECT_EQ(read_text(draft_dir() / f), read_text(target_dir() / f)) << f;
  EXPECT_LE(fs::file_size(draft_dir() / "model.safetensors"), 6u * 1000 * 1000);
  const auto card = read_json(draft_dir() / "card_data.json");
  EXPECT_LE(card["config"]["n_layer"].get<int>(), 2);
  EXPECT_EQ(pair().draft.engine->config().vocab_size, pair().target.engine->config().vocab_size);
}

TEST(DraftModel, MatchesPyTorchLogits) {
  test::expect_pytorch_logits(pair().draft, test::fixture_dir() / "bundled-draft/reference.json");
}

TEST(DraftModel, ValidationLossAgreesWithPyTorchAndTheModelCard) {
  test::expect_validation_loss(pair().draft, test::fixture_dir() / "bundled-draft/reference.json",
                               test::fixture_dir() / "bundled/val.txt", draft_dir());
}

std::unique_ptr<Session> make_session(const SamplingParams& params, int max_new,
                                      const std::string& prompt, bool with_draft) {
  SessionOptions o;
  o.max_new_tokens = max_new;
  o.record_attention = false;
  o.record_residuals = false;
  auto s = std::make_unique<Session>(pair().target.tokenizer, pair().target.engine, o);
  if (with_draft) s->set_draft_engine(pair().draft.engine);
  s->set_prompt(prompt);
  s->set_strategies({params});
  return s;
}

struct Acceptance {
  long long drafted = 0, accepted = 0, rounds = 0, committed = 0;
};

Acceptance run_lane(Session& s) {
  while (s.can_step()) s.step();
  Acceptance a;
  for (int step = 0; step < static_cast<int>(s.history().size()); ++step) {
    const LaneStep* r = s.record(step, 0);
    if (!r || !r->spec) continue;
    ++a.rounds;
    a.drafted += r->spec->gamma;
    a.accepted += r->spec->accepted;
    a.committed += static_cast<long long>(r->spec->committed.size());
  }
  return a;
}

// The card's greedy acceptance rate, recomputed here through the session:
// the same prompts, spec=4, the same number of new tokens.
TEST(DraftModel, TheCardsGreedyAcceptanceRateIsTheEngines) {
  const auto card = read_json(draft_dir() / "card_data.json");
  const auto& greedy = card["engine"]["acceptance"]["greedy"];
  const int gamma = card["engine"]["gamma"].get<int>();
  const int new_tokens = card["engine"]["new_tokens"].get<int>();
  Acceptance total;
  int runs = 0;
  for (const auto& prompt : card["export"]["prompts"]) {
    SamplingParams p;
    p.spec_gamma = gamma;
    auto s = make_session(p, new_tokens, prompt.get<std::string>(), true);
    const Acceptance a = run_lane(*s);
    total.drafted += a.drafted;
    total.accepted += a.accepted;
    total.rounds += a.rounds;
    total.committed += a.committed;
    ++runs;
  }
  EXPECT_EQ(runs, greedy["runs"].get<int>());
  EXPECT_EQ(total.drafted, greedy["drafted"].get<long long>());
  EXPECT_EQ(total.accepted, greedy["accepted"].get<long long>());
  EXPECT_EQ(total.rounds, greedy["rounds"].get<long long>());
  EXPECT_EQ(total.committed, greedy["committed"].get<long long>());
  EXPECT_GT(total.accepted, 0);
  EXPECT_LT(total.accepted, total.drafted) << "a 2-layer draft disagrees with its target somewhere";
}

// Speculative greedy decoding with the bundled pair is plain greedy decoding
// of the bundled model, token for token, for every draft length and spec=auto.
TEST(DraftModel, BundledPairGreedyOutputIsPlainGreedy) {
  const std::string prompt = "The old man walked into the";
  const int max_new = 200;
  auto plain = make_session(SamplingParams{}, max_new, prompt, false);
  run_lane(*plain);
  const std::vector<int> expected = plain->lanes()[0].generated;
  ASSERT_EQ(expected.size(), static_cast<size_t>(max_new));
  for (int gamma : {1, 2, 3, 4, 5, 6, kSpecGammaAuto}) {
    SamplingParams p;
    p.spec_gamma = gamma;
    auto s = make_session(p, max_new, prompt, true);
    const Acceptance a = run_lane(*s);
    EXPECT_EQ(s->lanes()[0].generated, expected) << "gamma " << gamma;
    EXPECT_LT(a.rounds, max_new) << "gamma " << gamma << ": fewer target passes than tokens";
  }
}

}  // namespace
}  // namespace ts
