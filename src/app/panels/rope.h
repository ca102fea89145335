#pragma once
// RoPE: where position went in a Llama-family model. For a chosen layer and
// query head at the viewed step's newest position p: the angle each
// dimension pair (i, i + d/2) is turned by, theta_i = p * base^(-2i/d), as
// dials; and the score q.k / sqrt(d) of that query against every cached key
// by relative distance, from the step's own q and k after the rotation
// (recomputed on the worker by one forward over the step's context). GPT-2
// has no rotary positions: the panel says so in one line.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "app/panels/panel.h"

namespace ts::app {

// theta_i = pos * base^(-2i/head_dim) for i < head_dim / 2, in radians.
std::vector<double> rope_angles(int pos, int head_dim, double base);

// q.k / sqrt(head_dim) of query head `head` at the last of `positions` rows
// against the key of each row, indexed by distance (0 = the query's own
// position). qk: [positions][q_dim + kv_dim], q then k after RoPE.
std::vector<float> rope_scores(const ModelConfig& cfg, const std::vector<float>& qk, int positions,
                               int head);

// Why the panel has nothing to show for this model (GPT-2), or empty.
std::string rope_unavailable_reason(const ModelConfig& cfg);

class RopePanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text

  // The layer and head are the Attention panel's (AppState::attention), so
  // both panels show the same head. What the last frame drew, for tests: the query's position (-1:
  // none), the angles of its pairs, the scores by distance, the q and k they came from
  // ([positions][q_dim + kv_dim]) and the one-line reason shown instead (empty when the view was
  // drawn).
  int query_pos() const { return query_pos_; }
  const std::vector<double>& angles_drawn() const { return angles_; }
  const std::vector<float>& scores_drawn() const { return scores_; }
  const std::vector<float>& qk() const { return data_ ? data_->qk : empty_; }
  const std::string& reason_drawn() const { return reason_; }

 private:
  // One layer's rotated q and k over a step's context, filled on the worker.
  struct Vectors {
    std::mutex mutex;
    bool done = false;
    std::string error;
    std::vector<float> qk;
  };
  void request(PanelContext& ctx, int layer);
  void draw_dials(PanelContext& ctx, float height);
  void draw_scores(PanelContext& ctx);

  int query_pos_ = -1;
  std::vector<double> angles_;
  std::vector<float> scores_;
  std::string reason_;
  std::shared_ptr<Vectors> data_;
  const void* data_record_ = nullptr;  // the record data_ was computed for
  int data_layer_ = -1;
  std::shared_ptr<const StepTrace> data_trace_;  // keeps the record alive
  const std::vector<float> empty_;
};

}  // namespace ts::app
