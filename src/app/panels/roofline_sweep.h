#pragma once
// The Roofline panel's batch sweep (engine/batch_sweep.h) run from the
// window without freezing it or touching the session: one batch size at a
// time is posted to the session's worker, the next only when the frame
// after it sees the previous one done, so the user's own steps run in
// between. The sweep's engine (a fresh backend on the loaded weights, a KV
// cache of its own for up to 64 sequences) lives only while the sweep runs.
// No ImGui here.
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/batch_sweep.h"
#include "session/session_worker.h"

namespace ts::app {

class BatchSweepJob : public std::enable_shared_from_this<BatchSweepJob> {
 public:
  // Roofs the points are placed under: the panel's (peak FLOP/s, the
  // bandwidth its slope is drawn with). cpu_threads: the CPU backend's
  // threads, as the window's --threads gives them (0: every hardware thread).
  BatchSweepJob(BatchSweepOptions options, double peak_flops, double bandwidth,
                int cpu_threads = 0);

  // UI thread, once a frame: posts the next batch size to `worker` when none
  // is in flight. Does nothing once done or cancelled.
  void pump(SessionWorker& worker);
  // Stops after the batch size in flight (its point is dropped); the
  // sweep's engine goes with it.
  void cancel();

  struct Status {
    std::vector<BatchSweepPoint> points;  // measured so far, in the options' order
    BatchSweepResult result;              // complete once done
    size_t total = 0;                     // batch sizes asked for
    int measuring = 0;                    // the batch in flight (0: none)
    bool done = false;                    // every batch measured (or an error)
    bool cancelled = false;
    std::string error;
    std::string device;  // what the sweep's engine runs on, e.g. "AMD EPYC (2 threads)"
  };
  Status status() const;
  // Whether the sweep still holds its engine (tests: gone once finished or cancelled).
  bool holds_engine() const;

 private:
  void measure_next(Session& session, size_t index);  // worker thread

  mutable std::mutex mutex_;
  BatchSweepOptions options_;
  double peak_flops_, bandwidth_;
  int cpu_threads_;
  std::string device_;
  std::vector<BatchSweepPoint> points_;
  BatchSweepResult result_;
  size_t next_ = 0;
  bool in_flight_ = false;
  bool done_ = false, cancelled_ = false;
  std::atomic<bool> stop_{false};  // cancelled_, read by the batch in flight between its steps
  std::string error_;
  int measuring_ = 0;
  // Taken by the batch in flight while it runs, put back after; dropped
  // when the sweep ends. Touched only with the mutex held or by the one batch
  // in flight.
  std::unique_ptr<Engine> engine_;
};

}  // namespace ts::app
