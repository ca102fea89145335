#include "app/exports/export_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "app/panels/logits.h"
#include "app/panels/sampling.h"
#include "app/ui_util.h"
#include "sampling/distribution.h"
#include "util/error.h"
#include "util/svg_writer.h"

namespace ts::app {

namespace {

using Anchor = SvgWriter::Anchor;
using TextStyle = SvgWriter::TextStyle;

// The light theme's colours (the palette the window uses on white).
std::string hex(ImU32 c) {
  return svg_color(static_cast<uint8_t>(c & 0xFF), static_cast<uint8_t>((c >> 8) & 0xFF),
                   static_cast<uint8_t>((c >> 16) & 0xFF));
}
const Palette& pal() { return palette(true); }

constexpr double kFont = 14;   // labels
constexpr double kTitle = 18;  // the first line
constexpr const char* kText = "#1a1a1a";
constexpr const char* kDim = "#5a5c64";

// Characters (not bytes) of UTF-8 text: the width estimate below counts them.
int utf8_chars(const std::string& s) {
  int n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}
// DejaVu Sans averages about 0.6 em per character.
// (a little more, so that a wide glyph such as "<0x8A>" or a bold line fits).
double text_width(const std::string& s, double size) { return utf8_chars(s) * size * 0.66; }

// s cut to at most max_chars characters, ending in an ellipsis when cut.
std::string cut(const std::string& s, int max_chars) {
  if (utf8_chars(s) <= max_chars) return s;
  std::string out;
  int n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) != 0x80 && ++n > max_chars - 1) break;
    out += s[i];
  }
  return out + "\u2026";
}

std::string quoted(const std::string& piece) { return "\u201C" + piece + "\u201D"; }

std::string fmt(const char* f, double v) {
  char b[48];
  std::snprintf(b, sizeof(b), f, v);
  return b;
}

void header(SvgWriter& svg, const std::string& title, const std::string& subtitle) {
  TextStyle t;
  t.size = kTitle;
  t.bold = true;
  t.fill = kText;
  svg.text(20, 28, title, t);
  if (!subtitle.empty()) {
    TextStyle s;
    s.size = kFont - 1;
    s.fill = kDim;
    svg.text(20, 48, subtitle, s);
  }
}

// Hatching like the window's (masked cells, removed tokens).
std::string hatch_pattern(const char* id, const std::string& bg, const std::string& line) {
  return std::string("<pattern id=\"") + id +
         "\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"" +
         bg + "\"/><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"" + line +
         "\" stroke-width=\"2.5\"/></pattern>";
}

}  // namespace

std::string attention_svg(const AttentionSvgInput& in) {
  if (!in.matrix || in.matrix->n == 0) throw Error("no attention to export: run prefill first");
  const AttentionMatrix& m = *in.matrix;
  const int n = m.n;
  auto label = [&](int pos) {
    return pos < static_cast<int>(in.labels.size()) ? in.labels[pos] : std::to_string(pos);
  };
  // Cells as large as a slide allows: the map is about 640 units across
  // (32 per cell at most, so a short prompt stays readable).
  const double cell = std::clamp(640.0 / n, 1.0, 32.0);
  const double side = cell * n;
  const bool pieces = cell >= 10;  // token labels fit beside every row
  const double label_font = pieces ? std::min(kFont, cell * 0.8) : kFont - 2;
  const int every = pieces ? 1 : std::max(1, static_cast<int>(std::ceil(label_font * 1.3 / cell)));
  std::vector<std::string> shown(n);
  double label_w = 0;
  for (int p = 0; p < n; p += every) {
    shown[p] = pieces ? cut(label(p), 18) : std::to_string(p);
    label_w = std::max(label_w, text_width(shown[p], label_font));
  }
  const double left = std::max(30 + label_w + 8, 90.0);  // room for "query ↓" above the rows
  const double col_label_h = pieces ? label_w * 0.72 + label_font : label_font + 4;
  const double top = 70 + col_label_h + 8;
  const double legend_h = 90;
  const std::string masked_words = "masked (a later token)";
  const double legend_w = std::clamp(side, 240.0, 420.0);
  const double width = std::max(left + side + label_w * 0.72 + 30,
                                130 + legend_w + 44 + text_width(masked_words, kFont - 1) + 20);
  const double height = top + side + legend_h;

  SvgWriter svg(width, height);
  svg.title(in.title);
  svg.defs(hatch_pattern("masked", "#dcdce0", "#bfbfc6"));
  header(svg, in.title, in.subtitle);

  // Axis names.
  TextStyle axis;
  axis.size = kFont - 2;
  axis.fill = kDim;
  svg.text(20, 70 + kFont, "key \u2192", axis);
  svg.text(20, top - 6, "query \u2193", axis);

  // Column labels (keys), rotated, and row labels (queries).
  TextStyle col;
  col.size = label_font;
  col.fill = kText;
  TextStyle row = col;
  row.anchor = Anchor::kEnd;
  const std::string accent = hex(pal().accent);
  for (int p = 0; p < n; p += every) {
    const double c = (p + 0.5) * cell;
    const bool generated = pieces && p >= m.prompt_len;
    if (pieces) {
      col.rotate = -45;
      col.fill = generated ? accent : kText;
      svg.text(left + c - label_font * 0.25, top - 6, shown[p], col);
    } else {
      TextStyle num = col;
      num.anchor = Anchor::kMiddle;
      num.fill = kDim;
      svg.text(left + c, top - 6, shown[p], num);
    }
    row.fill = generated ? accent : (pieces ? kText : kDim);
    svg.text(left - 6, top + c + label_font * 0.35, shown[p], row);
  }

  // The cells: one rectangle each, row-major.
  svg.begin_group("id=\"cells\"");
  const bool tooltips = n <= 48;
  for (int q = 0; q < n; ++q)
    for (int k = 0; k < n; ++k) {
      const float v = m.at(q, k);
      const bool masked = v < 0;
      std::string tip;
      if (tooltips)
        tip = "query " + std::to_string(q) + " " + quoted(label(q)) + " \u2192 key " +
              std::to_string(k) + " " + quoted(label(k)) + ": " +
              (masked ? std::string("masked") : fmt("%.4f", v));
      std::string fill = "url(#masked)";
      if (!masked) {
        const Rgb8 c = colorize(v, in.colormap, in.range);
        fill = svg_color(c.r, c.g, c.b);
      }
      svg.rect(left + k * cell, top + q * cell, cell, cell, fill, "none", 0, tip);
    }
  svg.end_group();
  // Thin white grid lines when cells are large (as on screen).
  if (cell >= 8) {
    svg.begin_group("id=\"grid\" stroke=\"#ffffff\" stroke-width=\"1\"");
    for (int i = 1; i < n; ++i) {
      svg.line(left + i * cell, top, left + i * cell, top + side, "#ffffff", 1);
      svg.line(left, top + i * cell, left + side, top + i * cell, "#ffffff", 1);
    }
    svg.end_group();
  }
  // Where the prompt ends, and the rows the viewed step added.
  if (m.prompt_len > 0 && m.prompt_len < n) {
    const double at = m.prompt_len * cell;
    svg.line(left + at, top + at, left + at, top + side, "#1a1a1a", 1.5);
    svg.line(left, top + at, left + at, top + at, "#1a1a1a", 1.5);
  }
  if (m.first_new_row > 0 && m.first_new_row < n)
    svg.rect(left - 1, top + m.first_new_row * cell - 1, side + 2, (n - m.first_new_row) * cell + 2,
             "none", accent, 2.5);
  svg.rect(left, top, side, side, "none", "#8a8c94", 1);

  // Legend: the colour scale as a gradient (33 stops from the same table),
  // its ticks, and the masked swatch.
  const double ly = top + side + 24;
  const double lw = legend_w;
  std::string grad = "<linearGradient id=\"scale\" x1=\"0\" y1=\"0\" x2=\"1\" y2=\"0\">";
  for (int i = 0; i <= 32; ++i) {
    const double t = i / 32.0;
    const Rgb8 c = colormap_at(in.colormap, static_cast<float>(t));
    grad +=
        "<stop offset=\"" + fmt("%.4f", t) + "\" stop-color=\"" + svg_color(c.r, c.g, c.b) + "\"/>";
  }
  grad += "</linearGradient>";
  svg.defs(grad);
  TextStyle lt;
  lt.size = kFont - 1;
  lt.fill = kText;
  svg.text(20, ly + 12, in.range.scale == HeatScale::kLog ? "weight (log)" : "weight", lt);
  const double lx = 20 + 110;
  svg.begin_group("id=\"legend\"");
  svg.rect(lx, ly, lw, 14, "url(#scale)", "#8a8c94", 0.5);
  TextStyle tick;
  tick.size = kFont - 3;
  tick.fill = kDim;
  tick.anchor = Anchor::kMiddle;
  for (const LegendTick& t : legend_ticks(in.range)) {
    const double x = lx + t.position * lw;
    svg.line(x, ly + 14, x, ly + 19, kDim, 1);
    svg.text(x, ly + 31, t.label, tick);
  }
  svg.end_group();
  svg.rect(lx + lw + 24, ly, 14, 14, "url(#masked)", "#8a8c94", 0.5);
  TextStyle ml = lt;
  ml.fill = kDim;
  svg.text(lx + lw + 44, ly + 12, masked_words, ml);
  TextStyle note = ml;
  note.size = kFont - 3;
  svg.text(20, ly + 56,
           "Row = the token attending (query); column = the token it looks at (key); "
           "each row sums to 1.",
           note);
  return svg.finish();
}

std::string logits_svg(const LaneStep& record, const TokenPieceFn& piece, LogitView view, int top_n,
                       const std::string& title, const std::string& subtitle) {
  if (record.logits.empty()) throw Error("no logits to export: run prefill first");
  LogitsView lv;
  compute_logits_view(record, lv);
  const int n = std::clamp(top_n, 1, static_cast<int>(lv.ranked.size()));
  auto value = [&](int id) -> double {
    switch (view) {
      case LogitView::kLogit:
        return record.logits[id];
      case LogitView::kLogProb:
        return lv.logprobs[id];
      case LogitView::kProbability:
        break;
    }
    return lv.probs[id];
  };
  const char* what = view == LogitView::kLogit     ? "logit"
                     : view == LogitView::kLogProb ? "log-probability"
                                                   : "probability";
  // Bars measured as the panel measures them: probabilities from 0, logits
  // and log-probabilities from a little below the smallest value shown.
  const double vmax = value(lv.ranked[0]);
  const double vmin = value(lv.ranked[n - 1]);
  double lo = view == LogitView::kProbability ? 0.0 : vmin - 0.15 * std::max(vmax - vmin, 1.0);
  if (view == LogitView::kLogProb) lo = std::min(lo, vmin - 1.0);

  const double row_h = 26, bar_h = 16;
  std::vector<std::string> labels(n);
  double label_w = 0;
  for (int i = 0; i < n; ++i) {
    labels[i] = cut(piece(lv.ranked[i]), 20);
    label_w = std::max(label_w, text_width(labels[i], kFont));
  }
  const double left = 20 + 40 + label_w + 16;  // rank, token
  const double bar_w = 420;
  const double top = 92;
  const double width = left + bar_w + 110;
  const int chosen = record.chosen_token;
  const bool chosen_listed = chosen < 0 || std::find(lv.ranked.begin(), lv.ranked.begin() + n,
                                                     chosen) != lv.ranked.begin() + n;
  const double height = top + n * row_h + (chosen_listed ? 20 : 46);
  SvgWriter svg(width, height);
  svg.title(title);
  header(svg, title, subtitle);
  TextStyle info;
  info.size = kFont - 1;
  info.fill = kDim;
  svg.text(20, 70,
           std::string("Top ") + std::to_string(n) + " by " + what + "  \u00B7  entropy " +
               fmt("%.2f", lv.entropy) + " nats (like " + fmt("%.1f", std::exp(lv.entropy)) +
               " equally likely tokens)",
           info);
  TextStyle rank_t;
  rank_t.size = kFont - 2;
  rank_t.fill = kDim;
  rank_t.anchor = Anchor::kEnd;
  TextStyle tok;
  tok.size = kFont;
  tok.anchor = Anchor::kEnd;
  TextStyle val;
  val.size = kFont - 1;
  const std::string accent = hex(pal().accent), accent2 = hex(pal().accent2);
  svg.begin_group("id=\"bars\"");
  for (int i = 0; i < n; ++i) {
    const int id = lv.ranked[i];
    const double y = top + i * row_h;
    const bool is_chosen = id == chosen;
    svg.text(20 + 26, y + bar_h - 3, std::to_string(i + 1), rank_t);
    tok.fill = is_chosen ? accent : kText;
    tok.bold = is_chosen;
    svg.text(left - 10, y + bar_h - 3, labels[i], tok);
    const double frac = std::clamp((value(id) - lo) / std::max(vmax - lo, 1e-12), 0.0, 1.0);
    svg.rect(left, y, bar_w, bar_h, hex(pal().frame));
    const std::string tip = "rank " + std::to_string(i + 1) + ", id " + std::to_string(id) +
                            ": logit " + fmt("%.3f", record.logits[id]) + ", probability " +
                            fmt("%.4f", lv.probs[id]);
    svg.rect(left, y, bar_w * frac, bar_h, is_chosen ? accent : accent2, "none", 0, tip);
    const std::string v =
        view == LogitView::kProbability ? format_percent(value(id)) : fmt("%.2f", value(id));
    val.fill = is_chosen ? accent : kText;
    val.bold = is_chosen;
    svg.text(left + bar_w + 8, y + bar_h - 3, v, val);
  }
  svg.end_group();
  if (!chosen_listed) {
    const int rank =
        static_cast<int>(std::find(lv.ranked.begin(), lv.ranked.end(), chosen) - lv.ranked.begin());
    TextStyle c;
    c.size = kFont;
    c.fill = accent;
    svg.text(20, top + n * row_h + 16,
             "chosen: " + quoted(piece(chosen)) + " at rank " + std::to_string(rank + 1) + " (" +
                 format_percent(lv.probs[chosen]) + ")",
             c);
  }
  return svg.finish();
}

std::vector<int> stage_candidates(const SamplingRecord& r, int record_token, bool branched) {
  const std::vector<float> raw = softmax(r.stages.front().logits);
  std::vector<int> out = top_n(raw, 8);
  for (int id : top_n(r.final_probs, 8))
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  for (int chosen : {r.draw.chosen_token, branched ? record_token : -1})
    if (chosen >= 0 && std::find(out.begin(), out.end(), chosen) == out.end())
      out.push_back(chosen);
  std::stable_sort(out.begin(), out.end(), [&](int a, int b) { return raw[a] > raw[b]; });
  return out;
}

std::string sampling_svg(const LaneStep& record, bool branched, const TokenPieceFn& piece,
                         const std::string& title, const std::string& subtitle) {
  if (record.beam)
    throw Error(
        "the Choosing panel shows a beam-search step as beams, not stages: nothing to export");
  if (record.contrastive && !branched)
    throw Error(
        "the Choosing panel shows a contrastive step as candidates, not stages: nothing to export");
  if (record.logits.empty()) throw Error("no step to export: run prefill first");
  const SamplingRecord r = sample_next(record.logits, record.context_ids, record.params,
                                       record.step_index, record.banned_words.get());
  std::vector<std::vector<float>> probs;
  for (const StageRecord& s : r.stages) probs.push_back(softmax(s.logits));
  std::vector<int> shown;
  for (int s = 0; s < static_cast<int>(r.stages.size()); ++s)
    if (s == 0 || s + 1 == static_cast<int>(r.stages.size()) || r.stages[s].active)
      shown.push_back(s);
  const int chosen = branched ? record.chosen_token : r.draw.chosen_token;
  const std::vector<int> cands = stage_candidates(r, record.chosen_token, branched);
  std::vector<float> col_max(r.stages.size(), 1e-12f);
  for (int s : shown)
    for (int id : cands) col_max[s] = std::max(col_max[s], probs[s][id]);

  const double token_w = 130, col_w = 150, row_h = 24, bar_h = 14;
  const double left = 20, top = 104;
  const int vocab = static_cast<int>(r.final_probs.size());
  std::string headline;
  if (branched)
    headline = "branched: you chose " + quoted(piece(chosen)) +
               " (p = " + format_percent(record.chosen_prob) + "); the strategy chose " +
               quoted(piece(r.draw.chosen_token));
  else
    headline = std::string(r.params.do_sample ? "drawn" : "greedy argmax") + " \u2192 " +
               quoted(piece(chosen)) + "   p = " + format_percent(r.draw.chosen_prob) + ", " +
               format_count(r.stages.back().kept) + " of " + format_count(vocab) + " tokens kept";
  const double width =
      std::max({left + token_w + shown.size() * col_w + 10, left + text_width(headline, kFont) + 20,
                left + text_width(title, kTitle) + 20});
  const double height = top + 2 * row_h + cands.size() * row_h + 20;
  SvgWriter svg(width, height);
  svg.title(title);
  svg.defs(hatch_pattern("removed", "#eeeef2", hex(pal().removed)));
  header(svg, title, subtitle);
  const std::string accent = hex(pal().accent), accent2 = hex(pal().accent2);
  TextStyle head;
  head.size = kFont;
  head.fill = kText;
  head.bold = true;
  svg.text(left, 74, headline, head);
  if (!branched && r.params.do_sample) {
    TextStyle d;
    d.size = kFont - 2;
    d.fill = kDim;
    svg.text(left, 92,
             "u = " + fmt("%.4f", r.draw.uniform) + " (seed " +
                 std::to_string(static_cast<unsigned long long>(r.params.seed)) + ", step " +
                 std::to_string(r.step_index) + ")",
             d);
  }
  // Header rows: the stage as this strategy configures it, and what it kept.
  TextStyle th;
  th.size = kFont - 1;
  th.bold = true;
  TextStyle kept;
  kept.size = kFont - 2;
  svg.begin_group("id=\"stages\"");
  svg.text(left, top + 16, "token", th);
  for (size_t c = 0; c < shown.size(); ++c) {
    const StageRecord& st = r.stages[shown[c]];
    const double x = left + token_w + c * col_w;
    svg.text(x, top + 16, stage_label(st, r.params), th);
    kept.fill = st.removed_here > 0 ? accent : kDim;
    svg.text(x, top + row_h + 14,
             st.removed_here > 0
                 ? format_count(st.kept) + " kept (\u2212" + format_count(st.removed_here) + ")"
                 : format_count(st.kept) + " kept",
             kept);
    if (c > 0) svg.line(x - 8, top, x - 8, height - 14, hex(pal().grid), 1);
  }
  TextStyle tok;
  tok.size = kFont;
  TextStyle pct;
  pct.size = kFont - 3;
  pct.anchor = Anchor::kEnd;
  for (size_t i = 0; i < cands.size(); ++i) {
    const int id = cands[i];
    const double y = top + 2 * row_h + i * row_h;
    const bool is_chosen = id == chosen;
    tok.fill = is_chosen ? accent : kText;
    tok.bold = is_chosen;
    svg.text(left, y + bar_h - 2, cut(piece(id), 14), tok);
    for (size_t c = 0; c < shown.size(); ++c) {
      const int s = shown[c];
      const StageRecord& st = r.stages[s];
      const double x = left + token_w + c * col_w;
      const double bw = col_w - 64;
      const bool removed = !std::isfinite(st.logits[id]);
      const bool removed_here =
          removed && std::binary_search(st.removed_ids_here.begin(), st.removed_ids_here.end(), id);
      if (removed) {
        if (removed_here) svg.rect(x, y, bw, bar_h, "url(#removed)");
        pct.fill = hex(pal().removed);
        pct.bold = false;
        if (removed_here) svg.text(x + col_w - 14, y + bar_h - 2, "removed", pct);
        continue;
      }
      const float p = probs[s][id];
      svg.rect(x, y, bw, bar_h, hex(pal().frame));
      svg.rect(x, y, bw * p / col_max[s], bar_h, is_chosen ? accent : accent2, "none", 0,
               quoted(piece(id)) + " after " + stage_label(st, r.params) + ": logit " +
                   fmt("%.3f", st.logits[id]) + ", probability " + fmt("%.4f", p));
      pct.fill = is_chosen ? accent : kText;
      pct.bold = is_chosen;
      svg.text(x + col_w - 14, y + bar_h - 2, format_percent(p), pct);
    }
  }
  svg.end_group();
  return svg.finish();
}

std::string kv_blocks_svg(const SessionSnapshot& snap, const StepView& view,
                          const std::string& title) {
  const KvOccupancy& kv = view.trace ? view.trace->kv_after : snap.kv;
  const bool cache_on = view.trace ? view.trace->kv_cache : snap.kv_cache;
  if (!cache_on) throw Error("the KV cache is off: no blocks to export");
  const KvBlockRows block_rows = kv_block_rows(kv);
  const std::vector<const SequenceOccupancy*>& seqs = block_rows.seqs;
  if (seqs.empty()) throw Error("the KV cache holds nothing yet: run prefill first");
  const std::set<int> written = written_slots(view);
  const int bs = std::max(1, kv.block_size);
  // The blocks every sequence starts with (the prompt's, after a fork) are
  // drawn once, as the panel draws them.
  const size_t shared = block_rows.shared;
  const int slot_cols = bs >= 8 ? (bs + 1) / 2 : bs;
  const int slot_rows = (bs + slot_cols - 1) / slot_cols;
  const double slot = 14, gap = 10, label_h = 14;
  const double block_w = slot_cols * slot + 4, block_h = slot_rows * slot + 4;
  // As wide as the longest row of blocks needs (at most 900 units).
  const size_t most_blocks = block_rows.most_blocks;
  const double content_w =
      std::clamp(static_cast<double>(most_blocks) * (block_w + gap), 640.0, 900.0);
  const int per_row = std::max(1, static_cast<int>((content_w + gap) / (block_w + gap)));
  struct Row {
    std::string name, note;
    const std::vector<int>* table;
    size_t from, to;
    int tokens;
  };
  std::vector<Row> rows;
  if (shared > 0)
    rows.push_back({"shared by all " + std::to_string(seqs.size()) + " sequences",
                    std::to_string(shared) + (shared == 1 ? " block" : " blocks") +
                        ", stored once: the prompt, prefilled once",
                    &seqs[0]->block_table, 0, shared, seqs[0]->tokens});
  for (const SequenceOccupancy* sq : seqs) {
    const size_t own = sq->block_table.size() - shared;
    if (own == 0 && shared > 0) continue;
    const std::string owner = kv_sequence_owner(snap, view.trace, sq->id, false);
    rows.push_back(
        {owner.empty() ? "sequence " + std::to_string(sq->id) : owner,
         std::to_string(sq->tokens) + " tokens" +
             (shared > 0 ? ": the shared blocks + " + std::to_string(own) + " of its own"
                         : " in " + std::to_string(own) + (own == 1 ? " block" : " blocks")),
         &sq->block_table, shared, sq->block_table.size(), sq->tokens});
  }
  double height = 110;
  for (const Row& r : rows) {
    const int lines = static_cast<int>((r.to - r.from + per_row - 1) / per_row);
    height += 24 + lines * (block_h + label_h + 8);
  }
  height += 20;
  const double width = 20 + content_w + 20;
  SvgWriter svg(width, height);
  svg.title(title);
  int tokens = 0;
  for (const SequenceOccupancy& s : kv.sequences) tokens = std::max(tokens, s.tokens);
  header(svg, title,
         std::to_string(tokens) + " tokens cached, " + std::to_string(written.size()) +
             " slots written by this step  \u00B7  blocks of " + std::to_string(kv.block_size) +
             " slots: " + std::to_string(kv.blocks_used) + " used, " +
             std::to_string(kv.blocks_shared) + " shared, " + std::to_string(kv.blocks_free) +
             " free of " + std::to_string(kv.blocks_total));
  const std::string cached = hex(pal().accent2), now = hex(pal().accent), free_c = hex(pal().frame),
                    shared_c = hex(pal().bar), border = hex(pal().frame_border);
  // Legend.
  TextStyle lt;
  lt.size = kFont - 2;
  lt.fill = kDim;
  double lx = 20;
  for (const auto& [c, name] :
       std::vector<std::pair<std::string, const char*>>{{cached, "cached"},
                                                        {now, "written this step"},
                                                        {shared_c, "shared block"},
                                                        {free_c, "free slot"}}) {
    svg.rect(lx, 64, 11, 11, c, border, 0.5);
    svg.text(lx + 16, 74, name, lt);
    lx += 16 + text_width(name, lt.size) + 24;
  }
  double y = 100;
  TextStyle name_t;
  name_t.size = kFont;
  name_t.bold = true;
  TextStyle note_t;
  note_t.size = kFont - 2;
  note_t.fill = kDim;
  TextStyle blk_t;
  blk_t.size = 10;
  svg.begin_group("id=\"blocks\"");
  for (const Row& r : rows) {
    svg.text(20, y + 14, r.name, name_t);
    svg.text(20 + text_width(r.name, kFont) + 20, y + 14, r.note, note_t);
    y += 24;
    for (size_t b = r.from; b < r.to; ++b) {
      const size_t i = b - r.from;
      const double x = 20 + (i % per_row) * (block_w + gap);
      const double by = y + (i / per_row) * (block_h + label_h + 8);
      const int phys = (*r.table)[b];
      const int refs =
          phys >= 0 && phys < static_cast<int>(kv.ref_counts.size()) ? kv.ref_counts[phys] : 1;
      blk_t.fill = refs > 1 ? shared_c : kDim;
      svg.text(x, by + 10,
               "#" + std::to_string(phys) + (refs > 1 ? " \u00D7" + std::to_string(refs) : ""),
               blk_t);
      const double qy = by + label_h;
      for (int s = 0; s < bs; ++s) {
        const int logical = static_cast<int>(b) * bs + s;
        std::string c = free_c;
        if (logical < r.tokens) c = cached;
        if (written.count(phys * bs + s)) c = now;
        svg.rect(x + 2 + (s % slot_cols) * slot + 0.5, qy + 2 + (s / slot_cols) * slot + 0.5,
                 slot - 1, slot - 1, c);
      }
      svg.rect(x, qy, block_w, block_h, "none", refs > 1 ? shared_c : border, refs > 1 ? 2 : 1, {},
               "rx=\"2\"");
    }
    const int lines = static_cast<int>((r.to - r.from + per_row - 1) / per_row);
    y += lines * (block_h + label_h + 8);
  }
  svg.end_group();
  return svg.finish();
}

}  // namespace ts::app
