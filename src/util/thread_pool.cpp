#include "util/thread_pool.h"

#include <chrono>
#include <string>
#include <system_error>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "util/error.h"

namespace ts {

int ThreadPool::max_threads() {
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  return 4 * (hw > 0 ? hw : 1);
}

ThreadPool::ThreadPool(int threads) {
  if (threads <= 0) threads = static_cast<int>(std::thread::hardware_concurrency());
  if (threads <= 0) threads = 1;
  if (threads > max_threads())
    throw Error("threads: " + std::to_string(threads) + " is out of range, at most " +
                std::to_string(max_threads()) + " (4 x the hardware threads)");
  try {
    workers_.reserve(static_cast<size_t>(threads - 1));
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { worker_loop(); });
  } catch (const std::system_error& e) {
    // Without this the members would be destroyed while workers still wait
    // on them (a hang in the condition variable's destructor, or terminate).
    const size_t started = workers_.size();
    stop_workers();
    throw Error("threads: the system refused to start thread " + std::to_string(started + 2) +
                " of " + std::to_string(threads) + " (" + e.what() +
                "); ask for fewer with --threads");
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

template <class Pred>
bool ThreadPool::spin_until(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(kSpinMicros);
  for (int i = 1;; ++i) {
    if (pred()) return true;
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
    if (i % 64 == 0 && std::chrono::steady_clock::now() >= until) return pred();
  }
}

void ThreadPool::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
  workers_.clear();
}

bool ThreadPool::claim(const Job& job, int& index) {
  uint64_t v = next_.load(std::memory_order_acquire);
  for (;;) {
    if (static_cast<uint32_t>(v >> 32) != job.generation) return false;
    const int i = static_cast<int>(v & 0xffffffffu);
    if (i >= job.size) return false;
    if (next_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel)) {
      index = i;
      return true;
    }
  }
}

void ThreadPool::run_tasks(const Job& job) {
  int i = 0;
  while (claim(job, i)) (*job.fn)(i);
}

void ThreadPool::worker_loop() {
  uint32_t seen = 0;
  for (;;) {
    spin_until([&] {
      return published_.load(std::memory_order_acquire) != seen ||
             stop_.load(std::memory_order_relaxed);
    });
    Job job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || job_.generation != seen; });
      if (stop_) return;
      job = job_;
      seen = job.generation;
      ++active_;
    }
    run_tasks(job);
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
  Job job;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job.fn = &fn;
    job.size = n;
    job.generation = job_.generation + 1;
    job_ = job;
    next_.store(static_cast<uint64_t>(job.generation) << 32, std::memory_order_release);
  }
  // Published after the lock is released: a spinning worker that saw the
  // new generation while the lock was still held would block on the mutex
  // and be woken by the kernel, tens of microseconds late.
  published_.store(job.generation, std::memory_order_release);
  wake_.notify_all();
  run_tasks(job);
  // Every task is claimed now; wait for the workers still running one. A
  // worker that wakes after this finds nothing to claim and never calls fn
  // (its copy of the job names this generation, whose tasks are all taken),
  // so fn may go out of scope once active_ is 0. That is seen by spinning,
  // without the lock, which a worker may still hold right after its
  // decrement; only a wait longer than the spin sleeps on done_.
  if (spin_until([&] { return active_.load(std::memory_order_acquire) == 0; })) return;
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return active_ == 0; });
}

}  // namespace ts
