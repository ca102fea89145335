// The pool runs every index exactly once per call, across many back-to-back
// calls: a worker that wakes late for one call must not run tasks of the next.
#include <gtest/gtest.h>

#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "util/error.h"
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

// The CPU-time clocks of the pool's worker threads (not the caller's): one
// job of size() tasks, each of which waits until every thread of the pool
// holds one, so that each thread runs exactly one task and names its clock.
std::vector<clockid_t> worker_cpu_clocks(ThreadPool& pool) {
  const int n = pool.size();
  const pthread_t caller = ::pthread_self();
  std::atomic<int> arrived{0};
  std::atomic<bool> timed_out{false};
  std::mutex mutex;
  std::vector<clockid_t> clocks;
  pool.parallel_for(n, [&](int) {
    arrived.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (arrived.load() < n && !timed_out.load()) {
      if (std::chrono::steady_clock::now() > deadline) timed_out = true;
      std::this_thread::yield();
    }
    if (::pthread_equal(::pthread_self(), caller)) return;
    clockid_t clock{};
    if (::pthread_getcpuclockid(::pthread_self(), &clock) != 0) return;
    const std::lock_guard<std::mutex> lock(mutex);
    clocks.push_back(clock);
  });
  EXPECT_FALSE(timed_out.load()) << "not every worker took a task within 10 s";
  return clocks;
}

double cpu_seconds(clockid_t clock) {
  timespec t{};
  EXPECT_EQ(::clock_gettime(clock, &t), 0);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Workers spin a little after a job (so that the next call of a forward
// pass finds them awake) and then sleep: an idle pool costs no CPU. Measured
// as the CPU time of the pool's own worker threads over 300 ms of idling
// after a burst of calls, not the process's (other threads and the
// machine's load do not count); a worker that kept spinning would use up to
// 300 ms.
TEST(ThreadPool, IdleWorkersSleep) {
  ThreadPool pool(3);
  std::atomic<long> sum{0};
  for (int call = 0; call < 200; ++call) pool.parallel_for(8, [&](int i) { sum += i; });
  EXPECT_EQ(sum.load(), 200L * 28);
  const std::vector<clockid_t> workers = worker_cpu_clocks(pool);
  ASSERT_EQ(workers.size(), static_cast<size_t>(pool.size() - 1));
  usleep(20000);  // past the spin
  std::vector<double> before;
  for (clockid_t c : workers) before.push_back(cpu_seconds(c));
  usleep(300000);
  for (size_t i = 0; i < workers.size(); ++i)
    EXPECT_LT(cpu_seconds(workers[i]) - before[i], 0.03) << "worker " << i << " kept running";
}

TEST(ThreadPool, OneThreadAndEmptyJobs) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.size(), 1);
  int calls = 0;
  pool.parallel_for(0, [&](int) { ++calls; });
  pool.parallel_for(5, [&](int) { ++calls; });
  EXPECT_EQ(calls, 5);
}

TEST(ThreadPool, RefusesMoreThanFourTimesTheHardwareThreads) {
  EXPECT_EQ(ThreadPool::max_threads() % 4, 0);
  try {
    ThreadPool pool(ThreadPool::max_threads() + 1);
    FAIL() << "a pool above the bound was created";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("at most " + std::to_string(ThreadPool::max_threads())),
              std::string::npos)
        << e.what();
  }
}

// Bytes of address space this process uses now (VmSize in /proc/self/status).
[[maybe_unused]] long long address_space_bytes() {
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::stoll(line.substr(7)) * 1024;
  return -1;
}

// When the system refuses a thread (here: no address space left for its
// stack), the constructor stops the workers it started and throws one
// ts::Error; it used to hang in the cleanup or terminate. Run in a child
// process: the limit must not reach the test runner.
TEST(ThreadPool, AFailedThreadStartIsACleanError) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "sanitizers reserve address space beyond any small RLIMIT_AS";
#else
  const long long used = address_space_bytes();
  ASSERT_GT(used, 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::alarm(30);  // a hang is killed by SIGALRM and reported below
    // Room for about one thread stack (8 MiB by default), not for seven.
    const rlimit lim{static_cast<rlim_t>(used + (12ll << 20)),
                     static_cast<rlim_t>(used + (12ll << 20))};
    if (::setrlimit(RLIMIT_AS, &lim) != 0) ::_exit(10);
    try {
      ThreadPool pool(ThreadPool::max_threads());
      ::_exit(11);  // every thread started: the limit did not bite
    } catch (const Error& e) {
      ::_exit(std::strstr(e.what(), "refused to start thread") != nullptr ? 0 : 12);
    } catch (...) {
      ::_exit(13);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "child died with signal " << WTERMSIG(status);
  if (WEXITSTATUS(status) == 11) GTEST_SKIP() << "threads started within the address-space limit";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: setrlimit failed, 12: wrong message, 13: not ts::Error";
#endif
}

}  // namespace
}  // namespace ts
