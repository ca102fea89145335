#include "app/attention_data.h"

#include <algorithm>
#include <cmath>

#include "app/render/colormap.h"
#include "app/view_model.h"

namespace ts::app {

AttentionLayer WorkerAttentionSource::get(const SessionSnapshot& snap, int step, int lane,
                                          int layer) {
  if (step < 0 || step >= static_cast<int>(snap.history.size())) return nullptr;
  const StepTrace& trace = *snap.history[step];
  const int wanted = trace.phase == Phase::kPrefill ? 0 : lane;
  // A branched lane's early steps are its parent's records (and the branch
  // record at the step it replaced): ask the session's rule, not the trace.
  const LaneStep* ls = lane_record(snap, step, wanted);
  if (ls && layer >= 0 && layer < static_cast<int>(ls->attention.size()) && ls->attention[layer])
    return ls->attention[layer];
  const auto key = std::make_tuple(&trace, wanted, layer);
  if (auto it = recomputed_.find(key); it != recomputed_.end()) return it->second.data;
  if (!worker_) return nullptr;
  std::vector<float> out;
  if (!worker_->attention(step, wanted, layer, out)) return nullptr;
  // Keep the cache small: recomputed layers of old traces are dropped.
  if (recomputed_.size() > 64) recomputed_.clear();
  auto layer_data = std::make_shared<const std::vector<float>>(std::move(out));
  recomputed_[key] = Entry{snap.history[step], layer_data};
  return layer_data;
}

namespace {

// Row pointers of one layer for positions 0..n-1: rows[h][r] points at r+1
// weights (keys 0..r). Holds the shared buffers alive.
struct LayerRows {
  std::vector<AttentionLayer> keep;
  std::vector<std::vector<const float*>> rows;  // [head][position]
  int n = 0;
};

// The steps that computed the rows of `lane` up to `step`: prefill (all
// prompt rows), then one row per decode step. A speculative round's verify
// pass computed γ + 1 rows; an earlier round keeps only the rows of the
// positions its lane kept (its committed count: the pending token and the
// accepted drafts), so that row r is position r. The viewed round keeps all
// of its rows (the rejected drafts' too: what the pass computed). An earlier
// lookahead or prompt-lookup pass keeps the rows of x and its accepted
// candidate tokens (its verdict's kept rows, not contiguous); the viewed
// pass keeps all of its fed rows.
bool collect_rows(const SessionSnapshot& snap, int step, int lane, int layer, int n_head,
                  AttentionSource& source, LayerRows& out) {
  out = LayerRows{};
  out.rows.assign(n_head, {});
  bool complete = true;
  const int last = std::min(step, static_cast<int>(snap.history.size()) - 1);
  for (int s = 0; s <= last; ++s) {
    const StepTrace& trace = *snap.history[s];
    const LaneStep* ls = lane_record(snap, s, trace.phase == Phase::kPrefill ? 0 : lane);
    if (!ls) break;  // the lane had stopped
    AttentionLayer data = source.get(snap, s, lane, layer);
    const int rows = ls->rows(), ctx = ls->context();
    std::vector<int> kept;  // the record's rows that stay, in position order
    if (ls->lookahead && s < last) {
      const LookaheadPass& p = *ls->lookahead;
      for (int r : p.verdict.kept_rows)
        if (kept.size() < p.committed.size() && r < rows) kept.push_back(r);
    } else {
      const int n_kept = ls->spec && s < last
                             ? std::min(rows, static_cast<int>(ls->spec->committed.size()))
                             : rows;
      for (int r = 0; r < n_kept; ++r) kept.push_back(r);
    }
    if (!data || static_cast<int64_t>(data->size()) < static_cast<int64_t>(n_head) * rows * ctx) {
      complete = false;
      for (int h = 0; h < n_head; ++h)
        for (size_t r = 0; r < kept.size(); ++r) out.rows[h].push_back(nullptr);
      continue;
    }
    for (int h = 0; h < n_head; ++h)
      for (int r : kept)
        out.rows[h].push_back(data->data() + (static_cast<size_t>(h) * rows + r) * ctx);
    out.keep.push_back(std::move(data));
  }
  out.n = out.rows.empty() ? 0 : static_cast<int>(out.rows[0].size());
  return complete;
}

}  // namespace

AttentionMatrix build_attention_matrix(const SessionSnapshot& snap, int step, int lane, int layer,
                                       int head, AttentionSource& source) {
  AttentionMatrix m;
  const StepView view = make_step_view(snap, step, lane);
  if (view.step < 0 || !view.record) return m;
  const int n_head = snap.config.n_head;
  if (layer < 0 || layer >= snap.config.n_layer || n_head <= 0) return m;
  LayerRows lr;
  m.complete = collect_rows(snap, view.step, lane, layer, n_head, source, lr);
  const int n = lr.n;
  m.n = n;
  m.prompt_len = view.prompt_len;
  // The rows' tokens are the ones fed through the model: for a speculative
  // round that includes its drafts, rejected ones too (the verify pass's rows).
  const std::vector<int>& fed = view.record->context_ids;
  m.tokens.assign(fed.begin(), fed.begin() + std::min<size_t>(n, fed.size()));
  m.first_new_row = view.record->start_pos;
  if (const SpecRound* sr = view.record->spec.get()) {
    // The verify pass: the pending token's row, then one row per draft.
    m.verify_rows = view.record->rows();
    m.row_roles.assign(static_cast<size_t>(m.verify_rows), VerifyRowRole::kPending);
    for (int i = 0; i < static_cast<int>(sr->drafts.size()) && i + 1 < m.verify_rows; ++i) {
      const SpecDraftToken& d = sr->drafts[i];
      m.row_roles[i + 1] = d.accepted  ? VerifyRowRole::kAccepted
                           : d.checked ? VerifyRowRole::kRejected
                                       : VerifyRowRole::kUnchecked;
    }
    m.kept_rows = std::min(m.verify_rows, static_cast<int>(sr->committed.size()));
  }
  if (const LookaheadPass* p = view.record->lookahead.get()) {
    // The rows are the pass's fed tokens (its context holds the committed ones).
    const LookaheadPassLayout& l = p->layout;
    m.tokens.resize(std::min<size_t>(m.tokens.size(), static_cast<size_t>(m.first_new_row)));
    m.tokens.insert(m.tokens.end(), l.tokens.begin(), l.tokens.end());
    m.tokens.resize(std::min<size_t>(m.tokens.size(), static_cast<size_t>(n)));
    m.pass_rows = std::min(p->fed(), std::max(0, n - m.first_new_row));
    if (m.pass_rows == p->fed() && l.mask.size() == static_cast<size_t>(p->fed()) * p->fed())
      m.pass_mask = l.mask;
    else
      m.pass_rows = 0;
  }
  m.values.assign(static_cast<size_t>(n) * n, kMaskedValue);
  for (int r = 0; r < n; ++r) {
    float* dst = m.values.data() + static_cast<size_t>(r) * n;
    if (head >= 0 && head < n_head) {
      const float* src = lr.rows[head][r];
      if (!src) {
        std::fill(dst, dst + r + 1, 0.0f);
        continue;
      }
      std::copy(src, src + r + 1, dst);
    } else {
      std::fill(dst, dst + r + 1, 0.0f);
      for (int h = 0; h < n_head; ++h) {
        const float* src = lr.rows[h][r];
        if (!src) continue;
        for (int c = 0; c <= r; ++c) dst[c] += src[c];
      }
      const float inv = 1.0f / static_cast<float>(n_head);
      for (int c = 0; c <= r; ++c) dst[c] *= inv;
    }
  }
  return m;
}

ThumbnailAtlas build_thumbnail_atlas(const SessionSnapshot& snap, int step, int lane,
                                     AttentionSource& source, int max_tile) {
  ThumbnailAtlas a;
  const StepView view = make_step_view(snap, step, lane);
  const int n_layer = snap.config.n_layer, n_head = snap.config.n_head;
  if (view.step < 0 || !view.record || n_layer <= 0 || n_head <= 0) return a;
  a.layers = n_layer;
  a.heads = n_head;
  a.complete = true;
  std::vector<LayerRows> layers(n_layer);
  int n = 0;
  for (int l = 0; l < n_layer; ++l) {
    a.complete &= collect_rows(snap, view.step, lane, l, n_head, source, layers[l]);
    n = std::max(n, layers[l].n);
  }
  if (n == 0) return a;
  a.tile = std::min(n, std::max(1, max_tile));
  a.gap = std::max(1, a.tile / 8);
  a.cols = (n_head + 1) * (a.tile + a.gap) - a.gap;
  a.rows = n_layer * (a.tile + a.gap) - a.gap;
  a.values.assign(static_cast<size_t>(a.cols) * a.rows, kBackgroundValue);
  const int t = a.tile;
  std::vector<float> tile(static_cast<size_t>(t) * t), avg(static_cast<size_t>(t) * t);
  auto cell_of = [&](int pos) { return static_cast<int>(static_cast<int64_t>(pos) * t / n); };
  for (int l = 0; l < n_layer; ++l) {
    const LayerRows& lr = layers[l];
    std::fill(avg.begin(), avg.end(), kMaskedValue);
    std::vector<float> avg_row(static_cast<size_t>(n));
    for (int h = 0; h <= n_head; ++h) {
      if (h < n_head) std::fill(tile.begin(), tile.end(), kMaskedValue);
      std::vector<float>& dst = h < n_head ? tile : avg;
      if (h < n_head) {
        for (int r = 0; r < lr.n; ++r) {
          const float* src = lr.rows[h][r];
          float* row = dst.data() + static_cast<size_t>(cell_of(r)) * t;
          for (int c = 0; c <= r; ++c) {
            const float v = src ? src[c] : 0.0f;
            float& cell = row[cell_of(c)];
            cell = std::max(cell, v);
          }
        }
      } else {
        for (int r = 0; r < lr.n; ++r) {
          std::fill(avg_row.begin(), avg_row.begin() + r + 1, 0.0f);
          for (int hh = 0; hh < n_head; ++hh) {
            const float* src = lr.rows[hh][r];
            if (!src) continue;
            for (int c = 0; c <= r; ++c) avg_row[c] += src[c];
          }
          float* row = dst.data() + static_cast<size_t>(cell_of(r)) * t;
          for (int c = 0; c <= r; ++c) {
            float& cell = row[cell_of(c)];
            cell = std::max(cell, avg_row[c] / static_cast<float>(n_head));
          }
        }
      }
      const int x0 = a.tile_x(h), y0 = a.tile_y(l);
      for (int y = 0; y < t; ++y)
        std::copy(dst.begin() + static_cast<size_t>(y) * t,
                  dst.begin() + static_cast<size_t>(y + 1) * t,
                  a.values.begin() + static_cast<size_t>(y0 + y) * a.cols + x0);
    }
  }
  return a;
}

AttentionMatrix synthetic_attention(int n) {
  AttentionMatrix m;
  m.n = n;
  m.complete = true;
  m.prompt_len = n;
  m.first_new_row = n - 1;
  m.tokens.assign(n, 0);
  m.values.assign(static_cast<size_t>(n) * n, kMaskedValue);
  std::vector<float> logits(n);
  for (int r = 0; r < n; ++r) {
    float mx = -1e30f;
    for (int c = 0; c <= r; ++c) {
      // Attention sinks at the first position, a local diagonal band and a
      // periodic "previous sentence" pattern: what real heads tend to show.
      const float d = static_cast<float>(r - c);
      float z = -0.15f * d;
      if (c == 0) z += 4.0f;
      if ((r - c) % 37 == 0) z += 2.0f;
      z += 0.5f * std::sin(0.1f * c + 0.03f * r);
      logits[c] = z;
      mx = std::max(mx, z);
    }
    double sum = 0;
    for (int c = 0; c <= r; ++c) sum += std::exp(logits[c] - mx);
    float* row = m.values.data() + static_cast<size_t>(r) * n;
    for (int c = 0; c <= r; ++c) row[c] = static_cast<float>(std::exp(logits[c] - mx) / sum);
  }
  return m;
}

}  // namespace ts::app
