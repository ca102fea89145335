// Multi-branch passes (BatchEntry::positions / mask): a causal mask takes
// the causal path's sums bit for bit, a pass holding two branches gives each
// branch what running it alone gives, and keep_rows leaves the cache as if
// only the kept branch had ever been fed.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "engine/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "model/model_loader.h"
#include "test_paths.h"
#include "util/error.h"

namespace ts {
namespace {

std::shared_ptr<Engine> tiny_engine() {
  auto w = std::make_shared<const ModelWeights>(load_model_dir(test::tiny_model_dir()));
  return std::make_shared<Engine>(w, make_cpu_backend(w, 2), 64 * 8);
}

const std::vector<int> kPrompt = {5, 17, 42, 99, 3, 7, 250, 11, 31, 8, 2, 1, 60, 70};

std::vector<uint8_t> causal_mask(int n) {
  std::vector<uint8_t> m(static_cast<size_t>(n) * n, 0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j <= i; ++j) m[static_cast<size_t>(i) * n + j] = 1;
  return m;
}

// The logits row of new token `row` in a forward run with all_logits.
std::vector<float> logits_row(const EntryOutput& out, int row, int vocab) {
  return {out.logits.begin() + static_cast<long>(row) * vocab,
          out.logits.begin() + static_cast<long>(row + 1) * vocab};
}

ForwardOptions every_row() {
  ForwardOptions o;
  o.all_logits = true;
  o.record_attention = true;
  return o;
}

TEST(PassMask, ExplicitCausalMaskGivesTheCausalBits) {
  auto engine = tiny_engine();
  const SeqId a = engine->cache().create(), b = engine->cache().create();
  engine->forward({{a, kPrompt}}, {});
  engine->forward({{b, kPrompt}}, {});
  const std::vector<int> fed = {9, 33, 4, 120, 6};
  const int start = static_cast<int>(kPrompt.size());
  ForwardRequest plain{a, fed};
  ForwardRequest masked{b, fed};
  for (int i = 0; i < 5; ++i) masked.positions.push_back(start + i);
  masked.mask = causal_mask(5);
  const ForwardResult r1 = engine->forward({plain}, every_row());
  const ForwardResult r2 = engine->forward({masked}, every_row());
  EXPECT_EQ(r1.outputs[0].logits, r2.outputs[0].logits);
  ASSERT_EQ(r1.outputs[0].attention.size(), r2.outputs[0].attention.size());
  for (size_t l = 0; l < r1.outputs[0].attention.size(); ++l)
    EXPECT_EQ(r1.outputs[0].attention[l], r2.outputs[0].attention[l]) << "layer " << l;
  // And the cached rows are the same: the next step agrees bit for bit.
  const ForwardResult n1 = engine->forward({{a, {77}}}, {});
  const ForwardResult n2 = engine->forward({{b, {77}}}, {});
  EXPECT_EQ(n1.outputs[0].logits, n2.outputs[0].logits);
}

// One pass: the last token x, then branch A (a1 a2) and branch B (b1 b2 b3),
// both continuing x at the same positions.
struct TwoBranches {
  std::vector<int> a = {21, 22}, b = {31, 32, 33};
  int x = 12;
  ForwardRequest request(SeqId seq, int start) const {
    ForwardRequest r{seq, {x}};
    r.positions = {start};
    for (int t : a) r.tokens.push_back(t);
    for (int i = 0; i < static_cast<int>(a.size()); ++i) r.positions.push_back(start + 1 + i);
    for (int t : b) r.tokens.push_back(t);
    for (int i = 0; i < static_cast<int>(b.size()); ++i) r.positions.push_back(start + 1 + i);
    const int n = static_cast<int>(r.tokens.size());
    r.mask.assign(static_cast<size_t>(n) * n, 0);
    const auto see = [&](int i, int j) { r.mask[static_cast<size_t>(i) * n + j] = 1; };
    see(0, 0);
    const int a0 = 1, b0 = 1 + static_cast<int>(a.size());
    for (int i = 0; i < static_cast<int>(a.size()); ++i) {
      see(a0 + i, 0);
      for (int j = 0; j <= i; ++j) see(a0 + i, a0 + j);
    }
    for (int i = 0; i < static_cast<int>(b.size()); ++i) {
      see(b0 + i, 0);
      for (int j = 0; j <= i; ++j) see(b0 + i, b0 + j);
    }
    return r;
  }
};

TEST(PassMask, EachBranchOfOnePassEqualsThatBranchRunAlone) {
  auto engine = tiny_engine();
  const int vocab = engine->config().vocab_size;
  const int start = static_cast<int>(kPrompt.size());
  const TwoBranches two;
  const SeqId both = engine->cache().create();
  engine->forward({{both, kPrompt}}, {});
  const ForwardResult pass = engine->forward({two.request(both, start)}, every_row());

  const auto alone = [&](const std::vector<int>& branch) {
    const SeqId s = engine->cache().create();
    engine->forward({{s, kPrompt}}, {});
    std::vector<int> fed = {two.x};
    fed.insert(fed.end(), branch.begin(), branch.end());
    ForwardResult r = engine->forward({{s, fed}}, every_row());
    engine->cache().release(s);
    return r;
  };
  const ForwardResult ra = alone(two.a), rb = alone(two.b);
  // Row 0 (x) is the same in all three.
  EXPECT_EQ(logits_row(pass.outputs[0], 0, vocab), logits_row(ra.outputs[0], 0, vocab));
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(logits_row(pass.outputs[0], 1 + i, vocab), logits_row(ra.outputs[0], 1 + i, vocab))
        << "branch A row " << i;
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(logits_row(pass.outputs[0], 3 + i, vocab), logits_row(rb.outputs[0], 1 + i, vocab))
        << "branch B row " << i;
  // The recorded attention of a branch row: the cache and its own branch,
  // with every other new key at 0 (layer 0, head 0, row b2 = new token 4).
  const int ctx = start + 6;
  const std::vector<float>& att = pass.outputs[0].attention[0];
  const float* row = att.data() + static_cast<size_t>(4) * ctx;
  for (int j : {start + 1, start + 2, start + 5}) EXPECT_EQ(row[j], 0.0f) << "key " << j;
  float sum = 0;
  for (int j = 0; j < ctx; ++j) sum += row[j];
  EXPECT_NEAR(sum, 1.0f, 1e-5f);
  const float* alone_row = rb.outputs[0].attention[0].data() + static_cast<size_t>(2) * (start + 4);
  for (int j = 0; j <= start; ++j) EXPECT_EQ(row[j], alone_row[j]);
  EXPECT_EQ(row[start + 3], alone_row[start + 1]);
  EXPECT_EQ(row[start + 4], alone_row[start + 2]);
}

TEST(PassMask, KeepRowsLeavesTheCacheOfTheKeptBranch) {
  auto engine = tiny_engine();
  const int start = static_cast<int>(kPrompt.size());
  const TwoBranches two;
  const SeqId seq = engine->cache().create();
  engine->forward({{seq, kPrompt}}, {});
  engine->forward({two.request(seq, start)}, every_row());
  // Keep x, b1, b2 (new tokens 0, 3, 4): b3 and branch A go back.
  const int free_before = engine->cache().free_blocks();
  engine->keep_rows(seq, start, {0, 3, 4});
  EXPECT_EQ(engine->cache().length(seq), start + 3);
  EXPECT_GE(engine->cache().free_blocks(), free_before);
  engine->cache().check_invariants();
  const ForwardResult next = engine->forward({{seq, {99}}}, every_row());

  const SeqId ref = engine->cache().create();
  std::vector<int> fed = kPrompt;
  fed.insert(fed.end(), {two.x, two.b[0], two.b[1]});
  engine->forward({{ref, fed}}, {});
  const ForwardResult expect = engine->forward({{ref, {99}}}, every_row());
  EXPECT_EQ(next.outputs[0].logits, expect.outputs[0].logits);
  EXPECT_EQ(next.outputs[0].attention, expect.outputs[0].attention);
}

TEST(PassMask, BadLayoutsAreRefusedAndChangeNothing) {
  auto engine = tiny_engine();
  const SeqId seq = engine->cache().create();
  engine->forward({{seq, kPrompt}}, {});
  const int start = static_cast<int>(kPrompt.size());
  const int n_ctx = engine->config().n_ctx;
  const auto refused = [&](ForwardRequest r, const char* what) {
    const int free_before = engine->cache().free_blocks();
    EXPECT_THROW(engine->forward({r}, {}), Error) << what;
    EXPECT_EQ(engine->cache().length(seq), start) << what;
    EXPECT_EQ(engine->cache().free_blocks(), free_before) << what;
  };
  ForwardRequest r{seq, {1, 2, 3}};
  r.mask = causal_mask(3);
  ForwardRequest upper = r;
  upper.mask[1] = 1;  // row 0 sees token 1, fed after it
  refused(upper, "a row attending to a later token");
  ForwardRequest no_self = r;
  no_self.mask[4] = 0;  // row 1 does not see itself
  refused(no_self, "a row not attending to itself");
  ForwardRequest short_mask = r;
  short_mask.mask.pop_back();
  refused(short_mask, "a mask of the wrong size");
  ForwardRequest far = r;
  far.positions = {start, start + 1, n_ctx};
  refused(far, "a position beyond the context");
  ForwardRequest few = r;
  few.positions = {start, start + 1};
  refused(few, "fewer positions than tokens");

  EXPECT_THROW(engine->keep_rows(seq, start - 2, {1, 0}), Error);
  EXPECT_THROW(engine->keep_rows(seq, start - 2, {0, 2}), Error);
  EXPECT_EQ(engine->cache().length(seq), start);
  engine->keep_rows(seq, start - 2, {0});  // a plain truncation
  EXPECT_EQ(engine->cache().length(seq), start - 1);
}

}  // namespace
}  // namespace ts
