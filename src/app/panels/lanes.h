#pragma once
// Lanes: decoding strategies side by side over one shared prefill. Before
// prefill it edits the list of lanes (up to 8, each a strategy string); after,
// it shows the lanes as columns stepping together: the text so far, each
// step's token with the model's probability of it, the first step where the
// lanes diverge, per-lane summary (log-probability, perplexity, repetition,
// speed) and, for a beam-search lane, the beam tree with kept and pruned
// beams and their cumulative log-probabilities.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "app/panels/panel.h"
#include "session/lane_summary.h"

namespace ts::app {

class LanesPanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text
  // Where the last frame drew the "Add a lane" button `label` (w 0: not drawn).
  PanelBox preset_box(const std::string& label) const;

 private:
  void draw_setup(PanelContext& ctx);
  // diverge: the first step where the lanes chose differently (-1: none yet).
  void draw_columns(PanelContext& ctx, float height, int diverge);
  void draw_beam_tree(PanelContext& ctx, int lane, float height);
  std::vector<std::string> edits_;  // strategy strings being typed, one per lane
  std::string edit_error_;
  int editing_ = -1;  // the lane whose strategy is being typed
  bool show_tree_ = true;
  // A reopened session has no worker to compute the summaries on: they are
  // computed here from its records, once per snapshot.
  uint64_t replay_summaries_version_ = 0;
  std::shared_ptr<const std::vector<LaneSummary>> replay_summaries_;
  std::vector<PanelBox> preset_boxes_;  // one per lane_presets() entry
};

// How a lane chose its token at a step, in a few words for its column
// ("argmax of 8,192", "branched: you chose ...").
std::string stage_line(const SessionSnapshot& snap, const LaneStep& r);

// The "Add a lane" buttons: label and strategy string of each.
std::vector<std::pair<std::string, std::string>> lane_presets();

// Selects lane `lane` for the other panels; before prefill the Sampling
// panel's controls switch to that lane's strategy.
void select_lane(AppState& state, const SessionSnapshot* snap, int lane);

}  // namespace ts::app
