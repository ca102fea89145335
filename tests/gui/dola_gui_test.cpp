// GUI test of DoLa lanes: the Choosing panel's DoLa section shows the
// record's candidate layers with their divergences and the premature layer
// marked, and the kept tokens with their final / premature log-probs and
// contrast; the panel's stages run on the contrast scores.
// Run:  xvfb-run -a -s "-screen 0 1920x1080x24 -noreset" build-gui/ts_gui_tests
#include <gtest/gtest.h>

#include "app/app.h"
#include "app/panels/dola_view.h"
#include "app/panels/lanes.h"
#include "app/panels/lens.h"
#include "app/panels/sampling.h"
#include "app/render/window.h"
#include "app/view_model.h"
#include "gui_test_support.h"

namespace ts::app {
namespace {

void step(App& app) {
  app.frame();
  app.advance();
  app.settle(2, 100);
}

TEST(GuiDola, ChoosingPanelShowsTheLayerContrastOfTheRecord) {
  REQUIRE_DISPLAY();
  AppOptions o = test::fixture_options("classroom");
  o.compare = {"greedy", "dola=0,1"};  // the fixture model has 2 layers: both candidates
  App app(o);
  app.load_model_blocking();
  app.settle();
  for (int i = 0; i < 4; ++i) step(app);  // prefill + 3 decode steps
  select_lane(app.state(), app.controller().snapshot().get(), 1);
  app.settle(2, 50);
  const SnapshotPtr s = app.controller().snapshot();
  ASSERT_EQ(s->lanes.size(), 2u);
  const LaneStep* rec = lane_record(*s, static_cast<int>(s->history.size()) - 1, 1);
  ASSERT_TRUE(rec && rec->dola);
  ASSERT_TRUE(app.last_frame().was_drawn(PanelId::kSampling));
  const DolaStep& d = *rec->dola;

  const DolaViewModel& m = last_dola_view();
  EXPECT_EQ(m.headline, "DoLa: layer " + std::to_string(d.premature_layer) +
                            " contrasted with the final layer \u2192 \u201C" +
                            token_piece(*s, rec->chosen_token) + "\u201D");
  ASSERT_EQ(m.layers.size(), 2u);
  int marked = 0;
  for (size_t i = 0; i < m.layers.size(); ++i) {
    EXPECT_EQ(m.layers[i].layer, d.candidate_layers[i]);
    EXPECT_EQ(m.layers[i].divergence, d.divergence[i]);
    EXPECT_GT(m.layers[i].divergence, 0.0f);
    if (m.layers[i].premature) {
      ++marked;
      EXPECT_EQ(m.layers[i].layer, d.premature_layer);
    }
  }
  EXPECT_EQ(marked, 1);
  EXPECT_EQ(m.kept, d.kept);
  ASSERT_EQ(m.rows.size(), d.top.size());
  int chosen = 0;
  for (size_t i = 0; i < m.rows.size(); ++i) {
    EXPECT_EQ(m.rows[i].token, d.top[i].token);
    EXPECT_EQ(m.rows[i].contrast, d.top[i].contrast);
    EXPECT_EQ(m.rows[i].final_logp, d.top[i].final_logp);
    EXPECT_EQ(m.rows[i].premature_logp, d.top[i].premature_logp);
    EXPECT_EQ(m.rows[i].promoted, static_cast<int>(i) < d.top[i].final_rank);
    if (m.rows[i].chosen) {
      ++chosen;
      EXPECT_EQ(m.rows[i].token, rec->chosen_token);
    }
  }
  EXPECT_EQ(chosen, 1);

  // The panel's stages start from the contrast scores, not the raw logits,
  // and end at the lane's choice.
  const auto& panel_rec = app.sampling_panel().record();
  ASSERT_TRUE(panel_rec.has_value());
  EXPECT_EQ(panel_rec->stages.front().logits, d.contrast);
  EXPECT_EQ(panel_rec->draw.chosen_token, rec->chosen_token);
  EXPECT_EQ(panel_rec->stages.front().kept, d.kept);
  // The logit lens column: each candidate layer's divergence as the record
  // holds it, the premature layer marked once, nothing on other rows.
  int premature_cells = 0;
  for (size_t i = 0; i < d.candidate_layers.size(); ++i) {
    const std::string cell = dola_lens_cell(d, d.candidate_layers[i]);
    char js[32];
    std::snprintf(js, sizeof js, "JS %.3f", d.divergence[i]);
    EXPECT_EQ(cell.rfind(js, 0), 0u) << cell;
    if (cell.find("premature") != std::string::npos) {
      ++premature_cells;
      EXPECT_EQ(d.candidate_layers[i], d.premature_layer);
    }
  }
  EXPECT_EQ(premature_cells, 1);
  EXPECT_EQ(dola_lens_cell(d, 99), "");

  // ... and say so: the first column, the headline and the Lanes column's
  // line name the contrast, not "raw".
  EXPECT_EQ(stage_label(panel_rec->stages.front(), rec->params), "DoLa contrast");
  EXPECT_NE(app.sampling_panel().headline().find("greedy argmax of the DoLa contrast"),
            std::string::npos)
      << app.sampling_panel().headline();
  EXPECT_EQ(stage_line(*s, *rec), "argmax of the contrast with layer " +
                                      std::to_string(d.premature_layer) + ", " +
                                      format_count(d.kept) + " kept");

  // The greedy lane's panel is unchanged: its stages start from the logits.
  select_lane(app.state(), app.controller().snapshot().get(), 0);
  app.settle(2, 50);
  const LaneStep* greedy = lane_record(*s, static_cast<int>(s->history.size()) - 1, 0);
  ASSERT_TRUE(greedy && !greedy->dola);
  ASSERT_TRUE(app.sampling_panel().record().has_value());
  EXPECT_EQ(app.sampling_panel().record()->stages.front().logits, greedy->logits);
  EXPECT_EQ(stage_label(app.sampling_panel().record()->stages.front(), greedy->params), "raw");
  EXPECT_EQ(stage_line(*s, *greedy).rfind("argmax of ", 0), 0u);
  // The Logit lens panel with the DoLa lane viewed draws its extra column.
  select_lane(app.state(), app.controller().snapshot().get(), 1);
  app.state().layout_request = "layers";
  app.settle(4, 200);
  EXPECT_TRUE(app.last_frame().was_drawn(PanelId::kLogitLens));
  EXPECT_EQ(app.last_frame().gl_errors, 0);
}

}  // namespace
}  // namespace ts::app
