#pragma once
// Roofline: every measured step placed by arithmetic intensity (x, FLOPs per
// byte, analytic) and achieved FLOP/s (y, measured), under the roofs of the
// machine that ran it (measured once at start-up). Prefill lands right,
// decode left; cache-off runs from the comparison panel show as rings.
#include <functional>
#include <memory>
#include <optional>

#include "app/panels/panel.h"
#include "app/panels/roofline_sweep.h"

namespace ts::app {

struct RooflinePoint {
  double intensity = 0;  // FLOPs per byte
  double flops_per_s = 0;
  int step = -1;  // history index, or -1 for a comparison run's step
  std::string label;
  ImU32 color = 0;
  bool ring = false;  // drawn hollow (cache-off runs)
};

// The points of a session's history (steps with a measured time only).
std::vector<RooflinePoint> history_points(const SessionSnapshot& snap, const Palette& pal);

// Measurements to draw with instead of this machine's (tests): the roofs,
// and each point's achieved FLOP/s given the point as measured (its
// intensity is analytic and stays). Where the points and the labels go then
// depends on no timing, however busy the machine is.
struct RooflineMeasurements {
  HardwareRoofs roofs;
  std::function<double(const RooflinePoint&)> flops_per_s;
};

// A rectangle on screen, in pixels.
struct RooflineBox {
  ImVec2 min, max;
};

class RooflinePanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text
  // As last drawn (tests): the points' boxes, the labels' boxes (the roofs'
  // and the viewed step's) and the viewed step's label text.
  const std::vector<RooflineBox>& point_boxes() const { return points_; }
  const std::vector<RooflineBox>& label_boxes() const { return labels_; }
  const std::string& step_label() const { return step_label_; }
  // Draws with `m` instead of the measured roofs and FLOP/s (nullopt: the
  // measurements again).
  void use_measurements(std::optional<RooflineMeasurements> m) { injected_ = std::move(m); }

  // The batch sweep, as the "Batch sweep" button starts it: the next frame
  // that draws the panel with roofs starts a sweep of these batch sizes.
  void request_batch_sweep(std::vector<int> batches = BatchSweepOptions{}.batches);
  // The CPU threads a sweep's engine runs on: the window's --threads (0: all).
  void set_cpu_threads(int threads) { cpu_threads_ = threads; }
  // As the "Cancel" button does.
  void cancel_batch_sweep();
  // The sweep started last (null: none since the last Clear or model).
  std::shared_ptr<const BatchSweepJob> batch_sweep() const { return sweep_; }
  // As last drawn (tests): the sweep's points, the batch marked as the
  // first compute-bound one (0: none), and its table's rows.
  const std::vector<RooflineBox>& sweep_point_boxes() const { return sweep_points_; }
  int sweep_marked_batch() const { return sweep_marked_; }
  int sweep_table_rows() const { return sweep_table_rows_; }

 private:
  // The control line, the series and the table of the batch sweep.
  void sweep_controls(PanelContext& ctx, const HardwareRoofs& roofs);
  void sweep_table(PanelContext& ctx, const BatchSweepJob::Status& st, float height);

  std::vector<RooflineBox> points_, labels_;
  std::string step_label_;
  std::optional<RooflineMeasurements> injected_;
  std::shared_ptr<BatchSweepJob> sweep_;
  int cpu_threads_ = 0;
  std::weak_ptr<const BatchSweepJob>
      counted_sweep_;                            // the last one counted in batch_sweeps_finished
  const SessionWorker* sweep_worker_ = nullptr;  // the worker it runs on (a new model: cancelled)
  std::optional<std::vector<int>> sweep_request_;
  std::vector<RooflineBox> sweep_points_;
  int sweep_marked_ = 0;
  int sweep_table_rows_ = 0;
};

}  // namespace ts::app
