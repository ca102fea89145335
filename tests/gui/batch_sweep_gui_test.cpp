// The Roofline panel's batch sweep: it runs one batch size per frame on the
// session's worker (the window keeps drawing, a user's step runs in
// between), never touches the session's KV cache, can be cancelled, and
// draws its series, the first compute-bound batch and its table inside the
// panel at a projector's sizes.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "app/app.h"
#include "app/panels/roofline.h"
#include "engine/batch_sweep.h"
#include "gui_test_support.h"
#include "session/model_setup.h"

namespace ts::app {
namespace {

bool overlap(const RooflineBox& a, const RooflineBox& b) {
  return a.min.x < b.max.x && a.max.x > b.min.x && a.min.y < b.max.y && a.max.y > b.min.y;
}

// Roofs whose ridge lies between the intensities of B = 4 and B = 8 on the
// loaded model, and every point at half its roof: where the points go and
// which batch is marked depend on no timing.
RooflineMeasurements ridge_between_4_and_8(const ModelConfig& config, int context) {
  auto intensity = [&](int b) {
    return batch_step_cost(config, b, context, WeightFormat::kF32, WeightFormat::kF32).intensity();
  };
  RooflineMeasurements m;
  m.roofs.bandwidth = 10e9;
  m.roofs.peak_flops = m.roofs.bandwidth * (intensity(4) + intensity(8)) / 2;
  m.roofs.how = "fixed by the test";
  m.flops_per_s = [roofs = m.roofs](const RooflinePoint& p) {
    return 0.5 * std::min(roofs.peak_flops, roofs.bandwidth * p.intensity);
  };
  return m;
}

std::vector<SequenceOccupancy> session_sequences(App& app) {
  return app.controller().worker()->snapshot()->kv.sequences;
}

bool same(const std::vector<SequenceOccupancy>& a, const std::vector<SequenceOccupancy>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].id != b[i].id || a[i].tokens != b[i].tokens || a[i].block_table != b[i].block_table)
      return false;
  return true;
}

TEST(BatchSweepGui, RunsBetweenFramesAndStepsAndLeavesTheSessionAlone) {
  REQUIRE_DISPLAY();
  AppOptions o = test::fixture_options("roofline");
  o.presentation = true;
  o.setup.cpu_threads = 1;  // the sweep's engine runs on the window's --threads
  App app(o);
  app.load_model_blocking();
  app.settle();
  app.advance();
  app.settle(2, 100);
  const SnapshotPtr snap = app.controller().worker()->snapshot();
  const int context = std::min(BatchSweepOptions{}.context, snap->config.n_ctx / 2);
  RooflinePanel& panel = app.roofline_panel();
  panel.use_measurements(ridge_between_4_and_8(snap->config, context));
  app.settle();
  const std::vector<int> batches = {1, 2, 4, 8, 16};
  panel.request_batch_sweep(batches);
  size_t history = snap->history.size();
  int partial_frames = 0;
  bool stepped = false;
  std::vector<SequenceOccupancy> after_step;
  for (int f = 0; f < 3000; ++f) {
    app.frame();
    const auto job = panel.batch_sweep();
    ASSERT_NE(job, nullptr);
    const BatchSweepJob::Status st = job->status();
    if (!st.points.empty() && st.points.size() < batches.size()) ++partial_frames;
    // A user's step posted while the sweep runs: it runs between two batch sizes.
    if (!stepped && st.points.size() == 2) {
      app.advance();
      stepped = true;
    }
    if (stepped && after_step.empty()) {
      // Every job publishes a snapshot when it ends, so the first one with
      // the new step holds the cache just after it. Not "and not busy": the
      // sweep's next batch is usually queued by then, and its last batch can
      // report done before the worker publishes the idle snapshot.
      const SnapshotPtr now = app.controller().worker()->snapshot();
      if (now->history.size() > history) {
        after_step = now->kv.sequences;
        history = now->history.size();
      }
    }
    if (st.done) break;
  }
  const BatchSweepJob::Status st = panel.batch_sweep()->status();
  ASSERT_TRUE(st.done) << "the sweep did not finish";
  ASSERT_TRUE(st.error.empty()) << st.error;
  EXPECT_NE(st.device.find("(1 thread)"), std::string::npos) << st.device;
  EXPECT_GT(partial_frames, 0) << "no frame was drawn while the sweep ran";
  ASSERT_TRUE(stepped);
  app.settle(2, 100);
  EXPECT_EQ(app.controller().worker()->snapshot()->history.size(), history)
      << "the step posted during the sweep did not run";
  ASSERT_FALSE(after_step.empty());
  EXPECT_TRUE(same(session_sequences(app), after_step))
      << "the sweep changed the session's KV cache";
  EXPECT_FALSE(panel.batch_sweep()->holds_engine()) << "the sweep's engine outlived it";
  ASSERT_EQ(st.result.points.size(), batches.size());
  for (size_t i = 0; i < batches.size(); ++i) {
    EXPECT_EQ(st.result.points[i].batch, batches[i]);
    if (i > 0) {
      EXPECT_GT(st.result.points[i].intensity, st.result.points[i - 1].intensity);
    }
  }
  EXPECT_EQ(st.result.first_compute_bound, 8);
  // Drawn at a projector's sizes: every point, the mark on B = 8 and a row
  // per batch, inside the panel; no label over a point or another label.
  for (const auto& [w, h] : {std::pair{1280, 720}, std::pair{1920, 1080}}) {
    test::resize_window(app, w, h);
    app.settle(2, 50);
    SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h));
    ASSERT_EQ(panel.sweep_point_boxes().size(), batches.size());
    EXPECT_EQ(panel.sweep_marked_batch(), 8);
    EXPECT_EQ(panel.sweep_table_rows(), static_cast<int>(batches.size()));
    for (const RooflineBox& p : panel.sweep_point_boxes()) {
      EXPECT_GE(p.min.x, 0);
      EXPECT_GE(p.min.y, 0);
      EXPECT_LE(p.max.x, w);
      EXPECT_LE(p.max.y, h);
    }
    const auto& labels = panel.label_boxes();
    for (size_t i = 0; i < labels.size(); ++i) {
      for (size_t j = i + 1; j < labels.size(); ++j)
        EXPECT_FALSE(overlap(labels[i], labels[j])) << "labels " << i << " and " << j;
      for (const RooflineBox& p : panel.point_boxes())
        EXPECT_FALSE(overlap(labels[i], p)) << "label " << i << " on a point";
    }
  }
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

TEST(BatchSweepGui, CancelStopsItAndDropsItsEngine) {
  REQUIRE_DISPLAY();
  App app(test::fixture_options("roofline"));
  app.load_model_blocking();
  app.settle();
  RooflinePanel& panel = app.roofline_panel();
  const ModelConfig config = app.controller().worker()->snapshot()->config;
  panel.use_measurements(ridge_between_4_and_8(config, std::min(32, config.n_ctx / 2)));
  const std::vector<int> batches = {1, 2, 4, 8, 16, 32, 64};
  panel.request_batch_sweep(batches);
  for (int f = 0; f < 3000; ++f) {
    app.frame();
    const auto job = panel.batch_sweep();
    if (job && !job->status().points.empty()) break;
  }
  ASSERT_NE(panel.batch_sweep(), nullptr);
  ASSERT_FALSE(panel.batch_sweep()->status().points.empty()) << "no batch size was measured";
  panel.cancel_batch_sweep();
  const size_t measured = panel.batch_sweep()->status().points.size();
  app.controller().worker()->wait_idle();
  app.settle(3, 50);
  const BatchSweepJob::Status st = panel.batch_sweep()->status();
  EXPECT_TRUE(st.cancelled);
  EXPECT_FALSE(st.done);
  EXPECT_LE(st.points.size(), measured + 1);  // at most the batch that was in flight
  EXPECT_LT(st.points.size(), batches.size());
  EXPECT_FALSE(panel.batch_sweep()->holds_engine());
  // The session steps as before.
  const size_t history = app.controller().worker()->snapshot()->history.size();
  app.advance();
  app.settle(2, 100);
  EXPECT_GT(app.controller().worker()->snapshot()->history.size(), history);
}

// docs/screenshots/batch-sweep.png: the bundled model, measured roofs and
// times, written where TS_BATCH_SWEEP_SCREENSHOT says (make_screenshots.sh).
TEST(BatchSweepGui, Screenshot) {
  REQUIRE_DISPLAY();
  const char* out = std::getenv("TS_BATCH_SWEEP_SCREENSHOT");
  if (!out || !*out) GTEST_SKIP() << "TS_BATCH_SWEEP_SCREENSHOT is not set";
  AppOptions o = test::fixture_options("roofline");
  o.setup.model = default_model_path();
  o.setup.cpu_threads = 0;
  o.width = 1600;
  o.height = 1000;
  App app(o);
  app.load_model_blocking();
  app.settle();
  for (int i = 0; i < 4; ++i) {
    app.advance();
    app.settle(2, 100);
  }
  RooflinePanel& panel = app.roofline_panel();
  panel.request_batch_sweep();
  for (int f = 0; f < 20000; ++f) {
    app.frame();
    const auto job = panel.batch_sweep();
    if (job && job->status().done) break;
  }
  ASSERT_TRUE(panel.batch_sweep() && panel.batch_sweep()->status().done);
  app.settle(3, 50);
  app.write_screenshot(out);
}

}  // namespace
}  // namespace ts::app
