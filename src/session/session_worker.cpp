#include "session/session_worker.h"

#include <algorithm>
#include <chrono>

#include "util/error.h"

namespace ts {

SessionWorker::SessionWorker(std::unique_ptr<Session> session, std::string model_name,
                             std::string notice)
    : session_(std::move(session)), model_name_(std::move(model_name)), notice_(std::move(notice)) {
  if (!session_) throw Error("session worker: no session");
  publish_locked_session();
  thread_ = std::thread([this] { loop(); });
}

SessionWorker::~SessionWorker() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

SnapshotPtr SessionWorker::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return snapshot_;
}

void SessionWorker::post(std::function<void(Session&)> fn) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(fn));
  }
  wake_.notify_all();
}

// Called on the worker thread (or in the constructor before it starts): the
// session is only ever touched by that one thread.
void SessionWorker::publish_locked_session() {
  auto s = std::make_shared<SessionSnapshot>();
  const Session& ses = *session_;
  s->state = ses.state();
  s->next_action = ses.next_action();
  s->prompt_text = ses.prompt_text();
  s->prompt_tokens = ses.prompt_tokens();
  s->lanes = ses.lanes();
  s->history = ses.history();
  s->kv = ses.engine().cache().occupancy();
  if (ses.draft_engine()) {
    s->has_draft = true;
    s->draft_kv = ses.draft_engine()->cache().occupancy();
    s->draft_config = ses.draft_engine()->config();
  }
  s->config = ses.engine().config();
  s->model_name = model_name_;
  s->backend = ses.engine().backend().name();
  s->device = ses.engine().backend().device_name();
  s->notice = notice_;
  s->kv_cache = ses.options().kv_cache;
  s->max_new_tokens = ses.options().max_new_tokens;
  s->tokenizer = ses.shared_tokenizer();
  s->banned_words = ses.banned_words();
  s->memory = memory_report(ses);
  std::lock_guard<std::mutex> lock(mutex_);
  // The job is over only once its snapshot is out: clearing busy_ in the same
  // critical section keeps wait_idle() from returning before the snapshot.
  busy_ = false;
  s->version = ++version_;
  s->busy = !queue_.empty();
  s->running = running_;
  s->last_error = last_error_;
  s->error_serial = error_serial_;
  snapshot_ = std::move(s);
}

void SessionWorker::loop() {
  using clock = std::chrono::steady_clock;
  auto next_run_step = clock::now();
  for (;;) {
    std::function<void(Session&)> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      auto ready = [&] { return stop_ || !queue_.empty(); };
      if (running_) {
        wake_.wait_until(lock, next_run_step, ready);
      } else {
        wake_.wait(lock, ready);
      }
      if (stop_) return;
      if (!queue_.empty()) {
        job = std::move(queue_.front());
        queue_.pop_front();
      } else if (running_ && clock::now() >= next_run_step) {
        job = [this](Session& s) {
          if (!s.can_step()) {
            std::lock_guard<std::mutex> l(mutex_);
            running_ = false;
            return;
          }
          s.step();
        };
        next_run_step = clock::now() + std::chrono::duration_cast<clock::duration>(
                                           std::chrono::duration<double>(1.0 / run_rate_));
      } else {
        continue;
      }
      busy_ = true;
    }
    const std::vector<StepTracePtr> history_before = session_->history();
    // Nothing may escape the worker thread (an exception leaving it would
    // end the program): a refused command (ts::Error) reports its own line;
    // anything else is a bug, reported as such rather than as bad input.
    std::string error;
    try {
      job(*session_);
    } catch (const Error& e) {
      error = e.what();
    } catch (const std::exception& e) {
      error = std::string("internal error: ") + e.what();
    } catch (...) {
      error = "internal error: unknown exception";
    }
    if (!error.empty()) {
      std::lock_guard<std::mutex> lock(mutex_);
      last_error_ = std::move(error);
      ++error_serial_;
      running_ = false;  // an error stops auto-stepping
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // Any rewrite of the past (back, reset, rechoose, back_lane) invalidates
      // attention computed on demand; a plain new step does not.
      const auto& h = session_->history();
      const bool appended_only =
          h.size() >= history_before.size() &&
          std::equal(history_before.begin(), history_before.end(), h.begin());
      if (!appended_only) {
        ++history_version_;
        attention_cache_.clear();
      }
    }
    publish_locked_session();
    idle_.notify_all();
  }
}

void SessionWorker::set_prompt(std::string text) {
  post([text = std::move(text)](Session& s) { s.set_prompt(text); });
}
void SessionWorker::prefill() {
  post([](Session& s) { s.prefill(); });
}
void SessionWorker::step() {
  post([](Session& s) { s.step(); });
}
void SessionWorker::back() {
  post([](Session& s) { s.back(); });
}
void SessionWorker::reset() {
  post([](Session& s) { s.reset(); });
}
void SessionWorker::set_strategies(std::vector<SamplingParams> strategies) {
  post([strategies = std::move(strategies)](Session& s) { s.set_strategies(strategies); });
}
void SessionWorker::rechoose(int lane, SamplingParams params) {
  post([lane, params](Session& s) { s.rechoose(lane, params); });
}

void SessionWorker::branch(int step, int lane, int token) {
  post([step, lane, token](Session& s) { s.branch(step, lane, token); });
}
void SessionWorker::back_lane(int lane) {
  post([lane](Session& s) { s.back_lane(lane); });
}
void SessionWorker::close_lane(int lane) {
  post([lane](Session& s) { s.close_lane(lane); });
}

void SessionWorker::run(double steps_per_second) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    run_rate_ = std::clamp(steps_per_second, 0.1, 1000.0);
    running_ = true;
  }
  post([](Session&) {});  // wake the loop and publish the running flag
}

void SessionWorker::pause() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    running_ = false;
  }
  post([](Session&) {});
}

bool SessionWorker::attention(int step, int lane, int layer, std::vector<float>& out) {
  SnapshotPtr snap = snapshot();
  if (step < 0 || step >= static_cast<int>(snap->history.size())) return false;
  // Fast path: the trace kept it.
  const int wanted = snap->history[step]->phase == Phase::kPrefill ? 0 : lane;
  const LaneStep* ls = lane_record(snap->history, snap->lanes, step, wanted);
  if (ls && layer >= 0 && layer < static_cast<int>(ls->attention.size()) && ls->attention[layer]) {
    out = *ls->attention[layer];
    return true;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  const AttentionKey key{step, lane, layer, history_version_};
  for (const auto& [k, v] : attention_cache_)
    if (k == key) {
      out = *v;
      return true;
    }
  if (std::find(attention_pending_.begin(), attention_pending_.end(), key) !=
      attention_pending_.end())
    return false;
  attention_pending_.push_back(key);
  queue_.push_back([this, key](Session& s) {
    std::shared_ptr<const std::vector<float>> result;
    try {
      result =
          std::make_shared<const std::vector<float>>(s.attention(key.step, key.lane, key.layer));
    } catch (...) {
      std::lock_guard<std::mutex> l(mutex_);
      attention_pending_.erase(
          std::remove(attention_pending_.begin(), attention_pending_.end(), key),
          attention_pending_.end());
      throw;
    }
    std::lock_guard<std::mutex> l(mutex_);
    attention_pending_.erase(std::remove(attention_pending_.begin(), attention_pending_.end(), key),
                             attention_pending_.end());
    if (key.history_version != history_version_) return;
    if (attention_cache_.size() >= 16) attention_cache_.erase(attention_cache_.begin());
    attention_cache_.emplace_back(key, std::move(result));
  });
  wake_.notify_all();
  return false;
}

void SessionWorker::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
}

}  // namespace ts
