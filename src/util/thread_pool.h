#pragma once
// A small persistent pool: parallel_for hands out task indices to the
// workers and the calling thread, and returns when all are done.
//
// A forward pass calls parallel_for some sixty times per decode step, each
// job a fraction of a millisecond. Workers therefore spin for a short while
// (kSpinMicros) before they sleep on the condition variable, and so does the
// caller waiting for them: a worker woken from sleep arrives tens of
// microseconds late, by which time the caller has often run its share of
// the tasks alone, at half the memory bandwidth. Between steps (a paused
// session) every thread sleeps.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ts {

class ThreadPool {
 public:
  // 0 = hardware concurrency. Throws ts::Error (one line) for more than
  // max_threads() or when the system refuses to start a thread; the threads
  // already started are stopped and joined first.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // 4 x the hardware threads: more only adds switching, and an unbounded
  // count can exhaust the machine's process ids.
  static int max_threads();

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls fn(i) for i in [0, n) exactly once each; blocks until every call returned.
  void parallel_for(int n, const std::function<void(int)>& fn);

 private:
  struct Job {
    const std::function<void(int)>* fn = nullptr;
    int size = 0;
    uint32_t generation = 0;
  };
  void stop_workers();
  void worker_loop();
  void run_tasks(const Job& job);
  // Busy-waits until pred() holds, at most kSpinMicros; returns pred().
  template <class Pred>
  static bool spin_until(Pred pred);
  static constexpr int kSpinMicros = 200;
  bool claim(const Job& job, int& index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  Job job_;  // guarded by mutex_; workers copy it when they wake
  // The next task index in the low 32 bits, the generation it belongs to in
  // the high 32: a worker that wakes late for an old generation can never
  // claim (and so run) a task of a newer one.
  std::atomic<uint64_t> next_{0};
  // The generation of the newest job (job_.generation, readable without the
  // lock), for workers spinning before they sleep.
  std::atomic<uint32_t> published_{0};
  std::atomic<int> active_{0};     // workers running a job; changed under mutex_
  std::atomic<bool> stop_{false};  // set under mutex_
  std::mutex call_mutex_;          // one parallel_for at a time
};

}  // namespace ts
