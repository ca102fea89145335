#include "util/thread_pool.h"

namespace ts {

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_tasks() {
  for (;;) {
    const int i = next_.fetch_add(1);
    if (i >= job_size_) return;
    (*job_)(i);
  }
}

void ThreadPool::worker_loop() {
  unsigned seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      ++active_;
    }
    run_tasks();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      --active_;
    }
    done_.notify_all();
  }
}

void ThreadPool::parallel_for(int n, const std::function<void(int)>& fn) {
  if (n <= 0) return;
  if (n == 1 || workers_.empty()) {
    for (int i = 0; i < n; ++i) fn(i);
    return;
  }
  std::lock_guard<std::mutex> call_lock(call_mutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_size_ = n;
    next_.store(0);
    ++generation_;
  }
  wake_.notify_all();
  run_tasks();
  std::unique_lock<std::mutex> lock(mutex_);
  // Workers that woke for this generation finish before we return; late
  // wakers find no task left (next_ >= n) and do nothing harmful.
  done_.wait(lock, [&] { return active_ == 0 && next_.load() >= job_size_; });
  job_ = nullptr;
}

}  // namespace ts
