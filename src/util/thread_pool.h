#pragma once
// A small persistent pool: parallel_for hands out task indices to the
// workers and the calling thread, and returns when all are done.
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
  int active_ = 0;
  bool stop_ = false;
  std::mutex call_mutex_;  // one parallel_for at a time
};

}  // namespace ts
