#pragma once
// Results the analysis panels show that the session's trace does not hold:
// the machine's roofs, the KV cache on/off comparison and the logit lens of
// a step. Each is computed once, on the session's worker thread (drawing
// never waits), and kept here for the frames that follow. One store per
// loaded model: a new model starts with an empty one. No GL, no ImGui.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend_factory.h"
#include "engine/logit_lens.h"
#include "session/cache_comparison.h"
#include "session/lane_summary.h"
#include "session/session_worker.h"

namespace ts::app {

// The roofs from several probes of one machine: the best of each (a busy
// machine only makes a probe slower). `warning` says when they disagree by
// more than a quarter, with the range seen.
HardwareRoofs combine_roof_probes(const std::vector<HardwareRoofs>& probes, std::string& warning);

class AnalysisStore : public std::enable_shared_from_this<AnalysisStore> {
 public:
  // The roofs of the machine the session runs on; queues the probe on the
  // first call. Null until measured (or when the probe failed: see roofs_error()).
  std::shared_ptr<const HardwareRoofs> roofs(SessionWorker& worker);
  std::string roofs_error() const;
  // Non-empty when the roof probes disagreed (a busy machine): the roofs are rough.
  std::string roofs_warning() const;

  // Runs the current prompt for new_tokens steps with and without the cache,
  // with `params`, on the worker. The result replaces the previous one.
  void compare_cache(SessionWorker& worker, int new_tokens, const SamplingParams& params);
  std::shared_ptr<const CacheComparison> cache_comparison() const;
  bool comparing() const;
  std::string comparison_error() const;

  // Logit lens of a lane's record in history step `step` (its residual
  // rows); queued on the first call, null until ready or when the record
  // kept no residuals.
  std::shared_ptr<const std::vector<LensRow>> logit_lens(SessionWorker& worker,
                                                         const StepTracePtr& step,
                                                         const LaneStep& record);

  // Every lane's summary (log-probability, perplexity, repetition, speed)
  // for the snapshot's history; recomputed on the worker when it changes,
  // the previous one returned meanwhile.
  std::shared_ptr<const std::vector<LaneSummary>> lane_summaries(SessionWorker& worker,
                                                                 const SessionSnapshot& snap);

  // Writes one JSON document on the worker: the session (every step) plus
  // what the analysis panels show (roofs and roofline points, the cache
  // comparison, the logit lens of every step and lane). The outcome, in one
  // line, is export_message(): "wrote PATH".
  void export_json(SessionWorker& worker, const std::string& path);
  std::string export_message() const;

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const HardwareRoofs> roofs_;
  bool roofs_queued_ = false;
  std::string roofs_error_;
  std::string roofs_warning_;
  std::shared_ptr<const CacheComparison> comparison_;
  bool comparing_ = false;
  std::string comparison_error_;
  // Keyed by the trace itself (kept alive here, so its address stays unique).
  struct LensEntry {
    StepTracePtr step;
    int lane = 0;
    std::shared_ptr<const std::vector<LensRow>> rows;  // null while queued
  };
  std::vector<LensEntry> lens_;
  std::string export_message_;
  std::shared_ptr<const std::vector<LaneSummary>> summaries_;
  std::string summaries_key_;  // which history they describe (see lane_summaries)
};

}  // namespace ts::app
