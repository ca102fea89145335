// GUI test of the existing panels with a speculative lane: the Timeline
// stacks each round's draft and verify time (the record's figures), the
// Attention panel outlines the verify pass's γ + 1 rows (rejected drafts
// marked) and keeps earlier rounds' kept rows only, and the KV cache panel
// shows the draft model's own blocks and the slots a round gave back.
// Run:  xvfb-run -a -s "-screen 0 1920x1080x24 -noreset" build-gui/ts_gui_tests
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "app/app.h"
#include "app/panels/attention.h"
#include "app/panels/kv.h"
#include "app/panels/lanes.h"
#include "app/panels/timeline.h"
#include "app/render/window.h"
#include "app/view_model.h"
#include "engine/backend_factory.h"
#include "gui_test_support.h"
#include "model/model_loader.h"
#include "session/model_setup.h"

namespace ts::app {
namespace {

// The bundled model cut to its first layer, in memory (the target's own
// weights, shared): the same vocabulary, a weaker predictor, so that the
// target accepts some of its drafts and rejects others.
std::shared_ptr<Engine> truncated_draft(const std::filesystem::path& model) {
  auto weights = std::make_shared<ModelWeights>(load_model(model));
  weights->config.n_layer = 1;
  weights->layers.resize(1);
  BackendSelection sel = make_backend("cpu", weights, 2);
  const KvCacheSize kv = kv_cache_size_for(weights->config, 4);
  return std::make_shared<Engine>(weights, std::move(sel.backend), kv.tokens);
}

struct SpecApp {
  std::unique_ptr<App> app;
  std::shared_ptr<Engine> draft;
};

// A window on the bundled model with a greedy lane and a spec=4 lane,
// stepped until the newest round rejected a draft (and gave slots back).
SpecApp spec_app(const std::string& layout) {
  AppOptions o = test::fixture_options(layout, "The cat sat on the");
  o.setup.model.clear();  // the bundled model
  o.compare = {"greedy", "spec=4"};
  SpecApp s;
  s.app = std::make_unique<App>(o);
  App& app = *s.app;
  app.load_model_blocking();
  app.settle();
  s.draft = truncated_draft(default_model_path());
  app.controller().worker()->post([d = s.draft](Session& ses) { ses.set_draft_engine(d); });
  app.controller().worker()->wait_idle();
  for (int i = 0; i < 16; ++i) {
    app.frame();
    app.advance();
    app.settle(2, 100);
    const SnapshotPtr snap = app.controller().snapshot();
    EXPECT_TRUE(snap->last_error.empty()) << snap->last_error;
    if (snap->history.size() < 3) continue;
    const LaneStep* rec = lane_record(*snap, static_cast<int>(snap->history.size()) - 1, 1);
    if (rec && rec->spec && rec->spec->accepted < rec->spec->gamma &&
        !rec->spec->target_slots_released.empty())
      break;
  }
  select_lane(app.state(), app.controller().snapshot().get(), 1);
  app.settle(2, 50);
  return s;
}

TEST(GuiSpecViews, TimelineStacksTheRoundsDraftAndVerifyTime) {
  REQUIRE_DISPLAY();
  SpecApp s = spec_app("memory");
  App& app = *s.app;
  const SnapshotPtr snap = app.controller().snapshot();
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kTimeline));
  const std::vector<ChartSeries>& wall = app.timeline_panel().wall_series();
  ASSERT_EQ(wall.size(), 3u) << "a session with rounds stacks rest, draft and verify";
  int rounds = 0;
  for (size_t i = 0; i < snap->history.size(); ++i) {
    const StepTrace& t = *snap->history[i];
    const LaneStep* rec = find_lane_step(t, 1);
    const TimelineBar b = timeline_bar(t);
    ASSERT_LT(i, wall[0].values.size());
    if (!rec || !rec->spec) {
      // Not a round (the prefill): one segment, the step's own time.
      EXPECT_EQ(b.rounds, 0);
      EXPECT_EQ(wall[0].values[i], t.seconds);
      EXPECT_EQ(wall[1].values[i], 0.0);
      EXPECT_EQ(wall[2].values[i], 0.0);
      EXPECT_EQ(timeline_note(b), "");
      continue;
    }
    ++rounds;
    const SpecRound& r = *rec->spec;
    EXPECT_EQ(b.rounds, 1);
    EXPECT_GT(r.draft_seconds, 0.0);
    EXPECT_GT(r.verify_seconds, 0.0);
    EXPECT_EQ(wall[1].values[i], r.draft_seconds);
    EXPECT_EQ(wall[2].values[i], r.verify_seconds);
    // The rest is the greedy lane's forward: the step's total less the round.
    EXPECT_NEAR(wall[0].values[i], t.seconds - r.draft_seconds - r.verify_seconds,
                1e-9 * t.seconds);
    EXPECT_NEAR(wall[0].values[i] + wall[1].values[i] + wall[2].values[i], t.seconds,
                1e-9 * t.seconds);
    EXPECT_EQ(b.draft_cost.flops, r.draft_cost.flops);
    EXPECT_EQ(b.verify_cost.bytes(), r.verify_cost.bytes());
    EXPECT_EQ(b.drafted, r.gamma);
    EXPECT_EQ(b.committed, static_cast<int>(r.committed.size()));
    const std::string note = timeline_note(b);
    EXPECT_NE(note.find("draft " + format_seconds(r.draft_seconds)), std::string::npos) << note;
    EXPECT_NE(note.find("verify " + format_seconds(r.verify_seconds)), std::string::npos) << note;
    EXPECT_NE(note.find(std::to_string(r.committed.size()) + " committed"), std::string::npos)
        << note;
  }
  EXPECT_GE(rounds, 2);
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

TEST(GuiSpecViews, AttentionOutlinesTheVerifyPassRows) {
  REQUIRE_DISPLAY();
  SpecApp s = spec_app("classroom");
  App& app = *s.app;
  app.state().attention.layer = 0;
  app.state().attention.head = 0;
  app.state().attention.average = false;
  app.settle(4, 200);
  const SnapshotPtr snap = app.controller().snapshot();
  const int last = static_cast<int>(snap->history.size()) - 1;
  const LaneStep* rec = lane_record(*snap, last, 1);
  ASSERT_TRUE(rec && rec->spec);
  const SpecRound& r = *rec->spec;
  ASSERT_LT(r.accepted, r.gamma) << "the test wants a round with a rejection";
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kAttention));
  AttentionPanel& panel = app.attention_panel();
  ASSERT_TRUE(panel.settled());
  const AttentionMatrix& m = panel.matrix();
  // The map runs to the end of the verify pass; its rows are the record's.
  EXPECT_EQ(m.n, rec->context());
  EXPECT_EQ(m.first_new_row, rec->start_pos);
  EXPECT_EQ(m.verify_rows, rec->rows());
  EXPECT_EQ(m.verify_rows, r.gamma + 1);
  EXPECT_EQ(m.kept_rows, static_cast<int>(r.committed.size()));
  ASSERT_EQ(m.row_roles.size(), static_cast<size_t>(r.gamma + 1));
  EXPECT_EQ(m.row_roles[0], VerifyRowRole::kPending);
  int rejected = 0;
  for (int i = 0; i < r.gamma; ++i) {
    const VerifyRowRole role = m.row_roles[i + 1];
    EXPECT_EQ(role == VerifyRowRole::kAccepted, r.drafts[i].accepted) << i;
    rejected += !r.drafts[i].accepted;
  }
  EXPECT_EQ(rejected, r.gamma - r.accepted);
  for (int i = 0; i <= r.gamma; ++i)
    EXPECT_EQ(m.tokens[rec->start_pos + i], rec->input_tokens[i]) << i;
  // The frame: exactly the γ + 1 rows.
  const PanelBox& heat = panel.heatmap_box();
  const PanelBox& box = panel.new_rows_box();
  ASSERT_GT(heat.h, 0.0f);
  const float cell = heat.h / static_cast<float>(m.n);
  EXPECT_NEAR(box.y - heat.y, rec->start_pos * cell, 0.5f);
  EXPECT_NEAR(box.h, (r.gamma + 1) * cell, 0.5f);
  EXPECT_EQ(panel.verify_caption_text(), verify_caption(m));
  EXPECT_NE(panel.verify_caption_text().find("\u03B3+1 = " + std::to_string(r.gamma + 1) +
                                             " rows over the " + std::to_string(rec->start_pos) +
                                             " cached positions"),
            std::string::npos)
      << panel.verify_caption_text();
  // Row r is position r: the viewed round's rows, and each earlier round's
  // kept rows only (layer 0, head 0, from the records).
  auto expect_rows = [&](const LaneStep& ls, int rows) {
    ASSERT_TRUE(!ls.attention.empty() && ls.attention[0]);
    const std::vector<float>& a = *ls.attention[0];
    const int ctx = ls.context();
    for (int i = 0; i < rows; ++i) {
      const int q = ls.start_pos + i;
      for (int k = 0; k <= q; ++k)
        ASSERT_EQ(m.at(q, k), a[static_cast<size_t>(i) * ctx + k]) << "row " << q << " key " << k;
    }
  };
  expect_rows(*rec, rec->rows());
  int earlier = 0;
  for (int st = 1; st < last; ++st) {
    const LaneStep* prev = lane_record(*snap, st, 1);
    if (!prev || !prev->spec) continue;
    ++earlier;
    expect_rows(*prev, static_cast<int>(prev->spec->committed.size()));
  }
  EXPECT_GE(earlier, 1);
  // A plain decode lane's view is unchanged: no verify rows, no caption.
  select_lane(app.state(), snap.get(), 0);
  app.settle(4, 200);
  EXPECT_EQ(panel.matrix().verify_rows, 0);
  EXPECT_TRUE(panel.verify_caption_text().empty());
  EXPECT_EQ(panel.matrix().first_new_row, lane_record(*snap, last, 0)->start_pos);
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

TEST(GuiSpecViews, KvCacheShowsTheDraftsBlocksAndTheGivenBackSlots) {
  REQUIRE_DISPLAY();
  SpecApp s = spec_app("memory");
  App& app = *s.app;
  const SnapshotPtr snap = app.controller().snapshot();
  const int last = static_cast<int>(snap->history.size()) - 1;
  const LaneStep* rec = lane_record(*snap, last, 1);
  ASSERT_TRUE(rec && rec->spec);
  const SpecRound& r = *rec->spec;
  ASSERT_FALSE(r.target_slots_released.empty());
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kKvCache));
  app.controller().worker()->wait_idle();
  const KvOccupancy dkv = s.draft->cache().occupancy();
  ASSERT_GT(dkv.blocks_used, 0);
  // The draft section draws every block the draft's pool has in use.
  EXPECT_EQ(app.kv_cache_panel().draft_blocks_drawn(), dkv.blocks_used);
  const KvSpecView v = kv_spec_view(*snap, make_step_view(*snap, last, 1));
  EXPECT_TRUE(v.has_draft);
  EXPECT_EQ(v.draft_blocks_used, dkv.blocks_used);
  EXPECT_EQ(v.draft_blocks_total, dkv.blocks_total);
  ASSERT_TRUE(v.round);
  EXPECT_EQ(v.target_released, static_cast<int>(r.target_slots_released.size()));
  EXPECT_EQ(v.draft_released, static_cast<int>(r.draft_slots_released.size()));
  EXPECT_EQ(v.target_blocks_freed, r.target_blocks_freed);
  EXPECT_EQ(
      v.round_line.rfind(
          "round gave back " + std::to_string(r.target_slots_released.size()) + " target slot", 0),
      0u)
      << v.round_line;
  EXPECT_NE(v.round_line.find(std::to_string(r.draft_slots_released.size()) + " draft slot"),
            std::string::npos)
      << v.round_line;
  // Every slot the round gave back is shown freed, or was written again in
  // the same step by the greedy lane (and shown written).
  for (int slot : r.target_slots_released)
    EXPECT_NE(v.target_freed_slots.count(slot) + v.written_slots.count(slot), 0u) << slot;
  EXPECT_EQ(v.draft_freed_slots,
            std::set<int>(r.draft_slots_released.begin(), r.draft_slots_released.end()));
  // The grids mark those of them that lie in blocks still held (a block
  // the round emptied is back in the pool, marked there).
  EXPECT_GT(app.kv_cache_panel().freed_slots_drawn(), 0);
  EXPECT_LE(app.kv_cache_panel().freed_slots_drawn(),
            static_cast<int>(v.target_freed_slots.size() + v.draft_freed_slots.size()));
  // The record's kept slots stay "written": the round's slots less the released.
  for (size_t i = 0; i < rec->slots_written.size(); ++i) {
    if (static_cast<int>(i) < static_cast<int>(r.committed.size())) {
      EXPECT_EQ(v.written_slots.count(rec->slots_written[i]), 1u) << i;
    }
  }
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

// Without a draft model: no draft section, and the Timeline's bars are the
// steps' own wall times, one series as before.
TEST(GuiSpecViews, WithoutADraftModelThePanelsAreAsBefore) {
  REQUIRE_DISPLAY();
  AppOptions plain = test::fixture_options("memory");
  App app2(plain);
  app2.load_model_blocking();
  app2.settle();
  for (int i = 0; i < 3; ++i) {
    app2.frame();
    app2.advance();
    app2.settle(2, 100);
  }
  const SnapshotPtr snap = app2.controller().snapshot();
  ASSERT_EQ(snap->history.size(), 3u);
  const std::vector<ChartSeries>& wall = app2.timeline_panel().wall_series();
  ASSERT_EQ(wall.size(), 1u);
  ASSERT_EQ(wall[0].values.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(wall[0].values[i], snap->history[i]->seconds);
  EXPECT_EQ(app2.kv_cache_panel().draft_blocks_drawn(), -1);
  EXPECT_EQ(app2.kv_cache_panel().freed_slots_drawn(), 0);
  EXPECT_FALSE(kv_spec_view(*app2.controller().snapshot(),
                            make_step_view(*app2.controller().snapshot(), -1, 0))
                   .has_draft);
}

}  // namespace
}  // namespace ts::app
