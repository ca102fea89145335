#pragma once
// A small persistent pool: parallel_for hands out task indices to the
// workers and the calling thread, and returns when all are done.
#include <atomic>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ts {

class ThreadPool {
 public:
  explicit ThreadPool(int threads = 0);  // 0 = hardware concurrency
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls fn(i) for i in [0, n); blocks until every call returned.
  void parallel_for(int n, const std::function<void(int)>& fn);

 private:
  void worker_loop();
  void run_tasks();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int)>* job_ = nullptr;
  int job_size_ = 0;
  std::atomic<int> next_{0};
  int active_ = 0;
  unsigned generation_ = 0;
  bool stop_ = false;
  std::mutex call_mutex_;  // one parallel_for at a time
};

}  // namespace ts
