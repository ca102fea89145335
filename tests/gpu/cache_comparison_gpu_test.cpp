// The KV cache on/off comparison on CUDA (a GPU test: skipped without a
// device, and so a failure on a GPU machine): the same tokens and logits with
// the cache on and off, on the tiny fixture and the bundled model.
#include <gtest/gtest.h>

#include "cache_comparison_check.h"
#include "test_paths.h"

namespace ts {
namespace {

TEST(CacheComparison, SameTokensAndLogitsOnTheGpuWhenThereIsOne) {
  test::expect_cache_on_equals_off(test::tiny_model_dir(), 32, "cuda");
  test::expect_cache_on_equals_off(test::bundled_model_dir(), 32, "cuda");
}

}  // namespace
}  // namespace ts
