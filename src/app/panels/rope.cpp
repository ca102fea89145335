#include "app/panels/rope.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "app/panels/attention.h"

namespace ts::app {

const char* const RopePanel::kHelp =
    "Rotary position embedding (RoPE): a Llama-family model adds no position vector to its "
    "input. Instead, in every layer, each head's query and key are cut into pairs of "
    "dimensions (i, i + d/2) and each pair is turned by an angle that grows with the "
    "position: theta_i = position \u00D7 base^(-2i/d), with the model's rope_theta as the "
    "base. The first pairs spin fast, the last ones barely move.\n\nBecause the query at "
    "position p and the key at position j are both turned, their dot product only depends on "
    "the difference p - j: the bars show the score q\u00B7k/\u221Ad of this step's query "
    "against every cached key by that distance (0 = the query's own token). These are the "
    "numbers the softmax of the Attention panel turns into weights.\n\nGPT-2 has no rotary "
    "positions: it adds a learned position vector (wpe) to the input instead.";

std::vector<double> rope_angles(int pos, int head_dim, double base) {
  std::vector<double> out;
  for (int i = 0; i < head_dim / 2; ++i) out.push_back(pos * std::pow(base, -2.0 * i / head_dim));
  return out;
}

std::vector<float> rope_scores(const ModelConfig& cfg, const std::vector<float>& qk, int positions,
                               int head) {
  const int d = cfg.head_dim(), ld = cfg.q_dim() + cfg.kv_dim();
  const int kv_head = head / std::max(1, cfg.n_head / cfg.kv_heads());
  std::vector<float> out;
  if (positions <= 0 || qk.size() < static_cast<size_t>(positions) * ld) return out;
  const float* q = qk.data() + static_cast<size_t>(positions - 1) * ld + head * d;
  for (int dist = 0; dist < positions; ++dist) {
    const float* k =
        qk.data() + static_cast<size_t>(positions - 1 - dist) * ld + cfg.q_dim() + kv_head * d;
    double dot = 0;
    for (int i = 0; i < d; ++i) dot += double(q[i]) * k[i];
    out.push_back(static_cast<float>(dot / std::sqrt(double(d))));
  }
  return out;
}

std::string rope_unavailable_reason(const ModelConfig& cfg) {
  if (cfg.is_gpt2())
    return "GPT-2 has no rotary positions: it adds a learned position vector (wpe) to the input.";
  return {};
}

void RopePanel::request(PanelContext& ctx, int layer) {
  const LaneStep* rec = ctx.view.record;
  if (rec == data_record_ && layer == data_layer_ && data_) return;
  data_ = std::make_shared<Vectors>();
  data_record_ = rec;
  data_layer_ = layer;
  data_trace_ = ctx.snap->history[ctx.view.step];
  std::shared_ptr<Vectors> out = data_;
  const std::vector<int> ids = rec->context_ids;
  // One forward over the step's context, on the worker (which owns the
  // engine), keeping this layer's q and k after RoPE.
  ctx.ctl.worker()->post([out, ids, layer](Session& s) {
    std::vector<float> qk;
    std::string error;
    try {
      ForwardOptions f;
      f.record_qk_layer = layer;
      qk = std::move(s.engine().forward_scratch(ids, f).outputs.at(0).qk);
      if (qk.empty())
        error = "this backend does not record q and k: run the window with --device cpu";
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::lock_guard<std::mutex> lock(out->mutex);
    out->qk = std::move(qk);
    out->error = std::move(error);
    out->done = true;
  });
}

void RopePanel::draw(PanelContext& ctx) {
  if (!begin_panel(ctx, PanelId::kRope)) return;
  query_pos_ = -1;
  angles_.clear();
  scores_.clear();
  reason_.clear();
  if (!ctx.snap || !ctx.ctl.worker()) {
    reason_ = ctx.ctl.needs_model_line();
    empty_hint(ctx, reason_.c_str());
    panel_help_button(PanelId::kRope);
    end_panel();
    return;
  }
  const ModelConfig& cfg = ctx.snap->config;
  reason_ = rope_unavailable_reason(cfg);
  if (!reason_.empty()) {
    ImGui::TextDisabled("%s", reason_.c_str());
    panel_help_button(PanelId::kRope);
    end_panel();
    return;
  }
  const float font = ImGui::GetFontSize();
  // The Attention panel's layer and head (its average shows as its head).
  AttentionSelection& sel = ctx.state.attention;
  sel.layer = std::clamp(sel.layer, 0, cfg.n_layer - 1);
  sel.head = std::clamp(sel.head, 0, cfg.n_head - 1);
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Layer");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(font * 5.5f);
  ImGui::SliderInt("##rope_layer", &sel.layer, 0, cfg.n_layer - 1);
  ImGui::SameLine();
  ImGui::TextUnformatted("Head");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(font * 5.5f);
  ImGui::SliderInt("##rope_head", &sel.head, 0, cfg.n_head - 1);
  const int layer = sel.layer, head = sel.head;
  const std::string group = kv_group_label(cfg, head);
  if (!group.empty()) {
    ImGui::SameLine();
    ImGui::TextDisabled("(%s)", group.c_str());
  }
  panel_help_button(PanelId::kRope);
  const LaneStep* rec = ctx.view.record;
  if (!rec || rec->context_ids.empty()) {
    empty_hint(ctx, "Press Space: after prefill, the newest position's rotation appears here.");
    end_panel();
    return;
  }
  query_pos_ = static_cast<int>(rec->context_ids.size()) - 1;
  angles_ = rope_angles(query_pos_, cfg.head_dim(), cfg.rope_theta);
  const std::string tok = context_piece(*ctx.snap, rec->context_ids.back());
  ImGui::Text("Query \u201C%s\u201D at position %d: pair i turns by %d \u00D7 %g^(-2i/%d)",
              tok.c_str(), query_pos_, query_pos_, static_cast<double>(cfg.rope_theta),
              cfg.head_dim());
  dim_text_wrapped(
      "The orange hand: how far each pair of q and k is turned here (one turn = 2\u03C0 "
      "rad).");
  draw_dials(ctx, ImGui::GetContentRegionAvail().y * 0.45f);
  if (ctx.ctl.replaying()) {
    empty_hint(ctx, "The scores need the model: this session was opened from a file.");
    end_panel();
    return;
  }
  request(ctx, layer);
  std::string error;
  {
    std::lock_guard<std::mutex> lock(data_->mutex);
    if (data_->done) {
      error = data_->error;
      if (error.empty())
        scores_ = rope_scores(cfg, data_->qk, static_cast<int>(rec->context_ids.size()), head);
    }
  }
  if (!error.empty())
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.warning), "%s", error.c_str());
  else if (scores_.empty())
    empty_hint(ctx, "Computing this layer's rotated q and k...");
  else
    draw_scores(ctx);
  end_panel();
}

// One dial per dimension pair: the pair's angle at the query's position
// (wrapped to one turn), its number and the angle in radians.
void RopePanel::draw_dials(PanelContext& ctx, float max_height) {
  const float font = ImGui::GetFontSize();
  const int n = static_cast<int>(angles_.size());
  const float width = ImGui::GetContentRegionAvail().x - ImGui::GetStyle().ScrollbarSize;
  const float cell = std::clamp(width / std::max(1, n), font * 3.6f, font * 6.0f);
  const int per_row = std::max(1, static_cast<int>(width / cell));
  const float radius = std::min(cell * 0.4f, font * 2.0f);
  const float row_h = 2 * radius + font * 2.6f;
  const float needed = ((n + per_row - 1) / per_row) * row_h + font * 0.4f;
  // As tall as the dials need, scrolling past max_height (wide heads).
  ImGui::BeginChild("dials", ImVec2(0, std::min(needed, std::max(max_height, row_h))), false);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float line = std::max(1.5f, 2.0f * ctx.scale);
  for (int i = 0; i < n; ++i) {
    const float cx = origin.x + (i % per_row) * cell + cell * 0.5f;
    const float cy = origin.y + (i / per_row) * row_h + radius + 2;
    dl->AddCircle(ImVec2(cx, cy), radius, ctx.pal.text_dim, 0, line * 0.6f);
    dl->AddLine(ImVec2(cx, cy), ImVec2(cx + radius, cy), ctx.pal.text_dim, line * 0.6f);
    const double a = angles_[i];
    // Counter-clockwise from the zero line, as the angle is drawn in class.
    dl->AddLine(ImVec2(cx, cy),
                ImVec2(cx + radius * static_cast<float>(std::cos(a)),
                       cy - radius * static_cast<float>(std::sin(a))),
                ctx.pal.accent, line * 1.5f);
    char b[32];
    std::snprintf(b, sizeof(b), "pair %d", i);
    float tw = ImGui::CalcTextSize(b).x;
    dl->AddText(ImVec2(cx - tw * 0.5f, cy + radius + 2), ctx.pal.text, b);
    std::snprintf(b, sizeof(b), a >= 100 ? "%.0f rad" : "%.2f rad", a);
    tw = ImGui::CalcTextSize(b).x;
    dl->AddText(ImVec2(cx - tw * 0.5f, cy + radius + 2 + font * 1.1f), ctx.pal.text_dim, b);
    ImGui::SetCursorScreenPos(ImVec2(cx - cell * 0.5f, cy - radius));
    ImGui::PushID(i);
    ImGui::InvisibleButton("dial", ImVec2(cell, 2 * radius + font * 2.2f));
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("dimensions %d and %d: %.4f rad = %.1f turns", i, i + n, a,
                        a / (2 * 3.14159265358979));
    ImGui::PopID();
  }
  ImGui::SetCursorScreenPos(
      ImVec2(origin.x, origin.y + ((n + per_row - 1) / per_row) * row_h + font * 0.2f));
  ImGui::Dummy(ImVec2(1, 1));
  ImGui::EndChild();
}

// The scores as bars by distance, above or below a zero line.
void RopePanel::draw_scores(PanelContext& ctx) {
  const float font = ImGui::GetFontSize();
  ImGui::TextUnformatted("Score q\u00B7k/\u221Ad against each cached key, by distance");
  ImGui::SameLine();
  ImGui::TextDisabled("(their softmax is this head's row in the Attention panel)");
  const int n = static_cast<int>(scores_.size());
  const auto [lo_it, hi_it] = std::minmax_element(scores_.begin(), scores_.end());
  const float lo = std::min(0.0f, *lo_it), hi = std::max(0.0f, *hi_it);
  const float span = std::max(hi - lo, 1e-6f);
  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float label_w = ImGui::CalcTextSize("-00.00 ").x;
  const float plot_h = std::max(avail.y - font * 3.8f, font * 3);
  const ImVec2 o = ImGui::GetCursorScreenPos();
  const float plot_w = std::max(avail.x - label_w, font * 4);
  const float bar = plot_w / n;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  auto y_of = [&](float v) { return o.y + (hi - v) / span * plot_h; };
  char b[32];
  std::snprintf(b, sizeof(b), "%.2f", hi);
  dl->AddText(ImVec2(o.x, o.y), ctx.pal.text_dim, b);
  std::snprintf(b, sizeof(b), "%.2f", lo);
  dl->AddText(ImVec2(o.x, o.y + plot_h - font), ctx.pal.text_dim, b);
  const float x0 = o.x + label_w;
  dl->AddLine(ImVec2(x0, y_of(0)), ImVec2(x0 + plot_w, y_of(0)), ctx.pal.text_dim);
  for (int d = 0; d < n; ++d) {
    const float x = x0 + d * bar;
    const float y0 = y_of(0), y1 = y_of(scores_[d]);
    dl->AddRectFilled(ImVec2(x + bar * 0.1f, std::min(y0, y1)),
                      ImVec2(x + bar * 0.9f, std::max(y0, y1) + 1),
                      d == 0 ? ctx.pal.accent : ctx.pal.accent2);
  }
  ImGui::SetCursorScreenPos(ImVec2(x0, o.y));
  ImGui::InvisibleButton("scores", ImVec2(plot_w, plot_h));
  if (ImGui::IsItemHovered()) {
    const int d = std::clamp(static_cast<int>((ImGui::GetIO().MousePos.x - x0) / bar), 0, n - 1);
    const int key = query_pos_ - d;
    const LaneStep* rec = ctx.view.record;
    const std::string piece = rec && key >= 0 && key < static_cast<int>(rec->context_ids.size())
                                  ? context_piece(*ctx.snap, rec->context_ids[key])
                                  : std::string();
    ImGui::SetTooltip("distance %d: key \u201C%s\u201D at position %d, score %.4f", d,
                      piece.c_str(), key, scores_[d]);
  }
  // Distance axis: every distance under its bar where they fit, else the
  // first and the last; its name on the line below.
  const float ay = o.y + plot_h + font * 0.2f;
  const int every = std::max(1, static_cast<int>(std::ceil(font * 2.0f / bar)));
  for (int d = 0; d < n; ++d) {
    if (d % every != 0 && d != n - 1) continue;
    if (d != n - 1 && d + every > n - 1 && (n - 1 - d) * bar < font * 2.0f) continue;
    std::snprintf(b, sizeof(b), "%d", d);
    const float tw = ImGui::CalcTextSize(b).x;
    dl->AddText(ImVec2(x0 + (d + 0.5f) * bar - tw * 0.5f, ay), ctx.pal.text_dim, b);
  }
  const char* axis = "distance p - j from the query (0 = itself) \u2192";
  const float aw = ImGui::CalcTextSize(axis).x;
  dl->AddText(ImVec2(x0 + std::max(0.0f, (plot_w - aw) * 0.5f), ay + font * 1.2f), ctx.pal.text_dim,
              axis);
  ImGui::SetCursorScreenPos(ImVec2(o.x, ay + font * 2.4f));
  ImGui::Dummy(ImVec2(1, 1));
}

}  // namespace ts::app
