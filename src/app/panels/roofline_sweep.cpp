#include "app/panels/roofline_sweep.h"

#include <algorithm>

#include "engine/backend_factory.h"

namespace ts::app {

BatchSweepJob::BatchSweepJob(BatchSweepOptions options, double peak_flops, double bandwidth,
                             int cpu_threads)
    : options_(std::move(options)),
      peak_flops_(peak_flops),
      bandwidth_(bandwidth),
      cpu_threads_(cpu_threads) {}

void BatchSweepJob::pump(SessionWorker& worker) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (in_flight_ || done_ || cancelled_) return;
  in_flight_ = true;
  measuring_ = options_.batches[next_];
  worker.post(
      [self = shared_from_this(), index = next_](Session& s) { self->measure_next(s, index); });
}

void BatchSweepJob::cancel() {
  std::unique_ptr<Engine> drop;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;
    cancelled_ = true;
    stop_ = true;
    if (!in_flight_) drop = std::move(engine_);  // else the batch in flight drops it
  }
}

BatchSweepJob::Status BatchSweepJob::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  Status s;
  s.points = points_;
  s.result = result_;
  s.total = options_.batches.size();
  s.measuring = in_flight_ ? measuring_ : 0;
  s.done = done_;
  s.cancelled = cancelled_;
  s.error = error_;
  s.device = device_;
  return s;
}

bool BatchSweepJob::holds_engine() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return engine_ != nullptr;
}

void BatchSweepJob::measure_next(Session& s, size_t index) {
  std::unique_ptr<Engine> engine;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (cancelled_) {
      in_flight_ = false;
      engine = std::move(engine_);
      return;
    }
    engine = std::move(engine_);
  }
  BatchSweepPoint point;
  std::string error;
  try {
    const Engine& session = s.engine();
    if (!engine) {
      // The first batch: the sweep's context fits the model, and its engine
      // is a fresh backend of the session's kind on the same weights.
      options_.context = std::min(options_.context, session.config().n_ctx / 2);
      check_batch_sweep(options_, session.config().n_ctx);
      const WeightFormat kv = session.cache().shape().format;
      BackendSelection sel =
          make_backend(session.backend().name(), session.shared_weights(), cpu_threads_, kv);
      engine =
          make_batch_sweep_engine(session.shared_weights(), std::move(sel.backend), options_, kv);
    }
    point =
        measure_batch(*engine, options_.batches[index], options_, peak_flops_, bandwidth_, &stop_);
  } catch (const std::exception& e) {
    error = std::string("batch sweep: ") + e.what();
  }
  const std::string device = engine ? engine->backend().device_name() : std::string();
  std::lock_guard<std::mutex> lock(mutex_);
  in_flight_ = false;
  if (!device.empty()) device_ = device;
  if (cancelled_) return;  // `engine` goes with this batch
  if (!error.empty()) {
    error_ = error;
    done_ = true;
    return;
  }
  points_.push_back(point);
  next_ = index + 1;
  if (next_ < options_.batches.size()) {
    engine_ = std::move(engine);
    return;
  }
  result_.peak_flops = peak_flops_;
  result_.bandwidth = bandwidth_;
  result_.context = options_.context;
  result_.points = points_;
  summarize_batch_sweep(result_, engine->config(), engine->weights().format,
                        engine->cache().shape().format);
  done_ = true;
}

}  // namespace ts::app
