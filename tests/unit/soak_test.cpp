// 1,000 random commands through the session worker with every invariant
// checked after each (see tests/soak/soak_driver.h). Runs in the release,
// ASan + UBSan and TSan builds; TS_SOAK_SEED picks another sequence.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "../soak/soak_driver.h"
#include "test_models.h"

namespace ts {
namespace {

TEST(Soak, ThousandRandomWorkerCommandsKeepEveryInvariant) {
  uint64_t seed = 20261123;
  if (const char* env = std::getenv("TS_SOAK_SEED")) seed = std::strtoull(env, nullptr, 10);
  SCOPED_TRACE("TS_SOAK_SEED=" + std::to_string(seed));
  const LoadedModel m = test::load_tiny();
  soak::SoakDriver driver(m, seed);
  driver.run(1000);
  const soak::SoakStats& st = driver.stats();
  for (const std::string& f : st.failures) ADD_FAILURE() << f;
  EXPECT_EQ(st.commands, 1000);
  // The mix exercised every command, both accepted and refused.
  for (const char* name : {"set_prompt", "prefill", "step", "back", "run", "branch", "back_lane",
                           "close_lane", "rechoose", "rechoose_invalid", "set_strategies",
                           "toggle_kv_cache", "reset", "attention"}) {
    const auto issued = st.issued.find(name);
    ASSERT_NE(issued, st.issued.end()) << name << " never issued";
    EXPECT_GT(issued->second, 5) << name;
  }
  const auto accepted = [&](const char* name) {
    const auto r = st.refusals.find(name);
    return st.issued.at(name) - (r == st.refusals.end() ? 0 : r->second);
  };
  // Commands that need a particular state (closing needs two open lanes)
  // are accepted a few times per thousand; these ones, many times.
  for (const char* name :
       {"set_prompt", "prefill", "step", "back", "branch", "rechoose", "toggle_kv_cache"})
    EXPECT_GT(accepted(name), 0) << name << " was never accepted";
  EXPECT_EQ(accepted("rechoose_invalid"), 0) << "an invalid strategy was accepted";
  EXPECT_GT(st.refused, 50);
}

}  // namespace
}  // namespace ts
