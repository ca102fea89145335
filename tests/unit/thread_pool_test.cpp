// The pool runs every index exactly once per call, across many back-to-back
// calls: a worker that wakes late for one call must not run tasks of the next.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "util/thread_pool.h"

namespace ts {
namespace {

TEST(ThreadPool, EveryIndexRunsExactlyOncePerCall) {
  ThreadPool pool(4);
  for (int call = 0; call < 3000; ++call) {
    const int n = 1 + call % 9;  // many small jobs: workers often wake late
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, [&](int i) { hits[i].fetch_add(1); });
    for (int i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "call " << call << " index " << i;
  }
}

TEST(ThreadPool, ResultsAreCompleteWhenTheCallReturns) {
  ThreadPool pool(3);
  std::vector<long> out(1000);
  for (int round = 1; round <= 50; ++round) {
    pool.parallel_for(static_cast<int>(out.size()), [&](int i) { out[i] = long{i} * round; });
    long sum = 0;
    for (long v : out) sum += v;
    ASSERT_EQ(sum, 999L * 1000 / 2 * round) << "round " << round;
  }
}

TEST(ThreadPool, OneThreadAndEmptyJobs) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.size(), 1);
  int calls = 0;
  pool.parallel_for(0, [&](int) { ++calls; });
  pool.parallel_for(5, [&](int) { ++calls; });
  EXPECT_EQ(calls, 5);
}

}  // namespace
}  // namespace ts
