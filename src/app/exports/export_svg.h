#pragma once
// Panels as SVG for slides, drawn from the data the panels draw (the
// attention matrix, the step's record, the KV occupancy), never from the
// screen's pixels: every rectangle's colour and length and every number is
// the recorded value. Light background, text as <text> (util/svg_writer.h
// says why the writer is our own). No GL, no ImGui calls.
#include <functional>
#include <string>
#include <vector>

#include "app/app_state.h"
#include "app/attention_data.h"
#include "app/render/colormap.h"
#include "app/view_model.h"
#include "sampling/sampling_pipeline.h"

namespace ts::app {

// The visible piece of a token id (token_piece for a snapshot).
using TokenPieceFn = std::function<std::string(int id)>;

struct AttentionSvgInput {
  const AttentionMatrix* matrix = nullptr;
  std::vector<std::string> labels;  // one per position: the token as shown (any bytes)
  std::string title;                // "Attention, layer 0, head 1"
  std::string subtitle;             // what step, which model
  Colormap colormap = Colormap::kViridis;
  HeatRange range;
};
// Every cell of the matrix is one <rect> inside <g id="cells">, row-major
// (query rows, key columns): fill = colorize(weight) of the project's
// colour map, or url(#masked) for a masked cell. Rows and columns carry the
// token labels; the legend shows the colour scale with its ticks. Throws
// ts::Error when the matrix is empty.
std::string attention_svg(const AttentionSvgInput& in);

// The Logits panel's bars: the top_n candidates of `record` in the chosen
// view (probability, logit or log-probability), the chosen token marked.
std::string logits_svg(const LaneStep& record, const TokenPieceFn& piece, LogitView view, int top_n,
                       const std::string& title, const std::string& subtitle);

// The Choosing panel's stage view: the candidates (the 8 most likely before
// and after the strategy, and the chosen token) as rows, the stages the
// strategy runs as columns, each cell a bar of the token's probability after
// that stage (relative to the column's largest, the percentage written
// beside it), removed tokens hatched. `branched`: the record's token was
// chosen by the user. Throws ts::Error for a beam-search or contrastive
// step (the panel shows those another way) or a record the pipeline refuses.
std::string sampling_svg(const LaneStep& record, bool branched, const TokenPieceFn& piece,
                         const std::string& title, const std::string& subtitle);

// The KV cache panel's block diagram at the viewed step: each sequence's
// block table as blocks of slots (cached, written by the step, free), the
// blocks every sequence shares drawn once, reference counts, the legend.
// Throws ts::Error when the cache is off or holds nothing.
std::string kv_blocks_svg(const SessionSnapshot& snap, const StepView& view,
                          const std::string& title);

// The candidates the stage view lists (the Choosing panel's rule): the 8
// most likely raw tokens and the 8 most likely after the strategy, the
// strategy's choice and (branched) the user's, ordered by raw probability.
std::vector<int> stage_candidates(const SamplingRecord& r, int record_token, bool branched);

}  // namespace ts::app
