#include "app/analysis.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "app/view_model.h"
#include "session/session_export.h"
#include "util/error.h"

namespace ts::app {

HardwareRoofs combine_roof_probes(const std::vector<HardwareRoofs>& probes, std::string& warning) {
  warning.clear();
  if (probes.empty()) return {};
  HardwareRoofs best = probes.front();
  double flops_lo = best.peak_flops, bw_lo = best.bandwidth;
  for (const HardwareRoofs& p : probes) {
    best.peak_flops = std::max(best.peak_flops, p.peak_flops);
    best.bandwidth = std::max(best.bandwidth, p.bandwidth);
    best.working_set_bandwidth = std::max(best.working_set_bandwidth, p.working_set_bandwidth);
    flops_lo = std::min(flops_lo, p.peak_flops);
    bw_lo = std::min(bw_lo, p.bandwidth);
  }
  auto range = [](double lo, double hi, double unit, const char* name) {
    char b[96];
    std::snprintf(b, sizeof(b), "%.3g\u2013%.3g %s", lo / unit, hi / unit, name);
    return std::string(b);
  };
  std::string spread;
  if (flops_lo < 0.75 * best.peak_flops) spread = range(flops_lo, best.peak_flops, 1e9, "GFLOP/s");
  if (bw_lo < 0.75 * best.bandwidth)
    spread += (spread.empty() ? "" : ", ") + range(bw_lo, best.bandwidth, 1e9, "GB/s");
  if (!spread.empty())
    warning = std::to_string(probes.size()) + " probes disagreed (" + spread +
              "): the machine is busy, so the roofs (the best seen) are rough";
  return best;
}

std::shared_ptr<const HardwareRoofs> AnalysisStore::roofs(SessionWorker& worker) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!roofs_queued_) {
    roofs_queued_ = true;
    worker.post([self = shared_from_this()](Session& s) {
      try {
        const double weight_bytes =
            4.0 * static_cast<double>(s.engine().config().parameter_count());
        // Two probes: one alone cannot tell a busy machine from a slow one.
        std::vector<HardwareRoofs> probes;
        for (int i = 0; i < 2; ++i)
          probes.push_back(measure_roofs(s.engine().backend(), 0, weight_bytes));
        std::string warning;
        auto r = std::make_shared<const HardwareRoofs>(combine_roof_probes(probes, warning));
        std::lock_guard<std::mutex> l(self->mutex_);
        self->roofs_ = std::move(r);
        self->roofs_warning_ = warning;
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> l(self->mutex_);
        self->roofs_error_ = std::string("roofs not measured: ") + e.what();
      }
    });
  }
  return roofs_;
}

std::string AnalysisStore::roofs_warning() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return roofs_warning_;
}

std::string AnalysisStore::roofs_error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return roofs_error_;
}

void AnalysisStore::compare_cache(SessionWorker& worker, int new_tokens,
                                  const SamplingParams& params) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (comparing_) return;
    comparing_ = true;
    comparison_error_.clear();
  }
  worker.post([self = shared_from_this(), new_tokens, params](Session& s) {
    std::shared_ptr<const CacheComparison> result;
    std::string error;
    try {
      if (s.prompt_tokens().empty()) throw Error("enter a prompt first");
      result = std::make_shared<const CacheComparison>(
          compare_kv_cache(s.engine(), s.prompt_ids(), params, new_tokens));
    } catch (const std::exception& e) {
      error = std::string("cache comparison: ") + e.what();
    }
    std::lock_guard<std::mutex> l(self->mutex_);
    self->comparing_ = false;
    if (result) self->comparison_ = std::move(result);
    self->comparison_error_ = error;
  });
}

std::shared_ptr<const CacheComparison> AnalysisStore::cache_comparison() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return comparison_;
}

bool AnalysisStore::comparing() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return comparing_;
}

std::string AnalysisStore::comparison_error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return comparison_error_;
}

std::shared_ptr<const std::vector<LensRow>> AnalysisStore::logit_lens(SessionWorker& worker,
                                                                      const StepTracePtr& step,
                                                                      const LaneStep& record) {
  if (!step || record.residuals.empty()) return nullptr;
  const int lane = record.lane;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const LensEntry& e : lens_)
    if (e.step == step && e.lane == lane) return e.rows;
  // Old steps' entries go first: a lens costs (layers + 1) x vocabulary dot products.
  constexpr size_t kKept = 64;
  if (lens_.size() >= kKept) lens_.erase(lens_.begin());
  lens_.push_back({step, lane, nullptr});
  worker.post([self = shared_from_this(), step, lane, residuals = record.residuals](Session& s) {
    auto rows = std::make_shared<const std::vector<LensRow>>(
        ts::logit_lens(s.engine().weights(), residuals));
    std::lock_guard<std::mutex> l(self->mutex_);
    for (LensEntry& e : self->lens_)
      if (e.step == step && e.lane == lane) e.rows = rows;
  });
  return nullptr;
}

std::shared_ptr<const std::vector<LaneSummary>> AnalysisStore::lane_summaries(
    SessionWorker& worker, const SessionSnapshot& snap) {
  // The history's identity: its steps (traces are replaced, never edited)
  // and every lane's tokens.
  std::string key = std::to_string(snap.history.size());
  for (const StepTracePtr& t : snap.history)
    key += ":" + std::to_string(reinterpret_cast<uintptr_t>(t.get()));
  for (const Lane& l : snap.lanes)
    key += "/" + std::to_string(l.generated.size()) + (l.closed ? "c" : "");
  std::lock_guard<std::mutex> lock(mutex_);
  if (key != summaries_key_) {
    summaries_key_ = key;
    worker.post([self = shared_from_this(), key](Session& s) {
      auto out = std::make_shared<std::vector<LaneSummary>>();
      for (int i = 0; i < static_cast<int>(s.lanes().size()); ++i)
        out->push_back(summarize_lane(s, i));
      std::lock_guard<std::mutex> l(self->mutex_);
      if (self->summaries_key_ == key) self->summaries_ = std::move(out);
    });
  }
  return summaries_;
}

namespace {

nlohmann::json lens_to_json(const std::vector<LensRow>& rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const LensRow& r : rows) {
    nlohmann::json top = nlohmann::json::array();
    for (const LensPrediction& p : r.top) top.push_back({{"token", p.token}, {"prob", p.prob}});
    out.push_back({{"layer", r.layer}, {"top", top}});
  }
  return out;
}

}  // namespace

void AnalysisStore::export_json(SessionWorker& worker, const std::string& path) {
  worker.post([self = shared_from_this(), path](Session& s) {
    std::string message;
    try {
      // Refused before the work, each with its reason.
      if (path.empty()) throw Error("no file name given");
      std::error_code ec;
      if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory");
      nlohmann::json doc = session_to_json(s);
      nlohmann::json analysis;
      std::shared_ptr<const HardwareRoofs> roofs;
      std::shared_ptr<const CacheComparison> comparison;
      {
        std::lock_guard<std::mutex> l(self->mutex_);
        roofs = self->roofs_;
        comparison = self->comparison_;
      }
      if (roofs)
        analysis["roofs"] = {{"peak_flops", roofs->peak_flops},
                             {"bandwidth_bytes_per_s", roofs->bandwidth},
                             {"ridge_flops_per_byte", roofs->peak_flops / roofs->bandwidth},
                             {"working_set_bytes", roofs->working_set_bytes},
                             {"working_set_bandwidth_bytes_per_s", roofs->working_set_bandwidth},
                             {"how", roofs->how}};
      nlohmann::json points = nlohmann::json::array();
      nlohmann::json lens = nlohmann::json::array();
      for (const StepTracePtr& t : s.history()) {
        if (t->seconds > 0)
          points.push_back({{"step", t->index},
                            {"phase", phase_name(t->phase)},
                            {"lanes", t->lanes.size()},
                            {"flops_per_byte", t->cost.intensity()},
                            {"flops_per_s", t->cost.flops / t->seconds}});
        for (const LaneStep& ls : t->lanes)
          if (!ls.residuals.empty())
            lens.push_back(
                {{"step", t->index},
                 {"lane", ls.lane},
                 {"rows", lens_to_json(ts::logit_lens(s.engine().weights(), ls.residuals))}});
      }
      analysis["roofline"] = points;
      analysis["logit_lens"] = lens;
      if (comparison) analysis["kv_cache_on_vs_off"] = cache_comparison_to_json(*comparison);
      doc["analysis"] = analysis;
      errno = 0;
      std::ofstream out(path);
      if (!out)
        throw Error(path + ": cannot write" +
                    (errno ? std::string(": ") + std::strerror(errno) : ""));
      // Token pieces can be partial UTF-8: replaced rather than failing the export.
      out << doc.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      out.close();
      if (!out)
        throw Error(path + ": cannot write" +
                    (errno ? std::string(": ") + std::strerror(errno) : ""));
      message = "wrote " + path;
    } catch (const std::exception& e) {
      message = std::string("export failed: ") + e.what();
    }
    std::lock_guard<std::mutex> l(self->mutex_);
    self->export_message_ = message;
  });
}

std::string AnalysisStore::export_message() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return export_message_;
}

}  // namespace ts::app
