#include "app/panels/kv.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

namespace ts::app {

const char* const KvCachePanel::kHelp =
    "The KV cache keeps each token's keys and values so that a decode step does not "
    "recompute them. It is paged: memory is handed out in fixed-size blocks, and each "
    "lane has a block table listing its blocks in order.\n\nOrange slots were written "
    "by the step you are looking at: prefill writes the whole prompt at once, a "
    "decode step one slot per lane. Blocks shared by several lanes show their "
    "reference count.\n\nWith a speculative lane, the draft model keeps its own cache (a second "
    "section, its own pool). A round's verify pass writes a slot for each draft; the "
    "slots of the drafts the target rejected are given back at once (marked freed).\n\nOnce "
    "the Compare panel has run two models, the other model's bytes per token follow this "
    "model's line.";

namespace {

std::string plural(int n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// Slots holding a token, a shared block counted once.
double filled_slots(const KvOccupancy& kv) {
  std::vector<int> filled(kv.ref_counts.size(), 0);
  for (const SequenceOccupancy& s : kv.sequences)
    for (size_t i = 0; i < s.block_table.size(); ++i) {
      const int b = s.block_table[i];
      if (b < 0 || b >= static_cast<int>(filled.size())) continue;
      filled[b] = std::max(
          filled[b], std::clamp(s.tokens - static_cast<int>(i) * kv.block_size, 0, kv.block_size));
    }
  double sum = 0;
  for (int f : filled) sum += f;
  return sum;
}

}  // namespace

int64_t kv_layer_token_bytes(const ModelConfig& cfg, const KvOccupancy& kv) {
  const int64_t values = int64_t(2) * cfg.kv_heads() * cfg.head_dim();
  const int64_t slots = int64_t(kv.blocks_total) * kv.block_size;
  // As the cache stores them (f32 until a pool exists): a whole number for
  // every format (q8: every head's slice is whole blocks of 34 bytes per 32
  // values).
  return slots > 0 && values > 0 ? kv.bytes_per_layer_capacity / slots : values * int64_t{4};
}

KvTokenBytes kv_token_bytes(const char* who, const ModelConfig& cfg, const KvOccupancy& kv) {
  return kv_token_bytes(who, cfg, kv_layer_token_bytes(cfg, kv));
}

KvTokenBytes kv_token_bytes(const char* who, const ModelConfig& cfg, int64_t per_layer) {
  KvTokenBytes out;
  const int64_t values = int64_t(2) * cfg.kv_heads() * cfg.head_dim();
  out.per_layer = per_layer;
  out.per_token = out.per_layer * cfg.n_layer;
  // A value's bytes: 4 or 2, or q8's 34/32 (its f16 scale shared by 32 values).
  char value_bytes[32];
  if (values > 0 && out.per_layer % values == 0)
    std::snprintf(value_bytes, sizeof(value_bytes), "%d B",
                  static_cast<int>(out.per_layer / values));
  else
    std::snprintf(value_bytes, sizeof(value_bytes), "%d/32 B",
                  static_cast<int>(values > 0 ? out.per_layer * 32 / values : 0));
  char b[384];
  std::snprintf(b, sizeof(b),
                "%s: 2 (K, V) \u00D7 %d KV head%s \u00D7 %d dims \u00D7 %s = %s per token per "
                "layer, %s per token in %d layers",
                who, cfg.kv_heads(), cfg.kv_heads() == 1 ? "" : "s", cfg.head_dim(), value_bytes,
                format_bytes(double(out.per_layer)).c_str(),
                format_bytes(double(out.per_token)).c_str(), cfg.n_layer);
  out.text = b;
  return out;
}

KvSpecView kv_spec_view(const SessionSnapshot& snap, const StepView& v) {
  KvSpecView out;
  out.has_draft = snap.has_draft;
  out.draft_blocks_used = snap.draft_kv.blocks_used;
  out.draft_blocks_total = snap.draft_kv.blocks_total;
  if (v.trace) {
    // A round wrote its rejected drafts' slots and gave them back; a later
    // write in the same step (another lane's forward) may take them again.
    std::set<int> target_released, draft_released;
    for (const LaneStep& ls : v.trace->lanes) {
      std::set<int> given_back;
      if (ls.spec) {
        given_back.insert(ls.spec->target_slots_released.begin(),
                          ls.spec->target_slots_released.end());
        target_released.insert(given_back.begin(), given_back.end());
        draft_released.insert(ls.spec->draft_slots_released.begin(),
                              ls.spec->draft_slots_released.end());
      }
      for (int slot : ls.slots_written)
        if (!given_back.count(slot)) out.written_slots.insert(slot);
    }
    for (int slot : target_released)
      if (!out.written_slots.count(slot)) out.target_freed_slots.insert(slot);
    out.draft_freed_slots = std::move(draft_released);
  }
  if (v.record && v.record->spec) {
    const SpecRound& r = *v.record->spec;
    out.round = true;
    out.target_released = static_cast<int>(r.target_slots_released.size());
    out.draft_released = static_cast<int>(r.draft_slots_released.size());
    out.target_blocks_freed = r.target_blocks_freed;
    out.draft_blocks_freed = r.draft_blocks_freed;
    out.round_line = "round gave back " + plural(out.target_released, "target slot") + ", " +
                     plural(out.draft_released, "draft slot") + " (" +
                     plural(out.target_blocks_freed, "target block") + ", " +
                     plural(out.draft_blocks_freed, "draft block") + " freed): caches " +
                     std::to_string(r.target_before) + " \u2192 " + std::to_string(r.target_after) +
                     " and " + std::to_string(r.draft_before) + " \u2192 " +
                     std::to_string(r.draft_after) + " tokens";
  }
  return out;
}

void KvCachePanel::draw(PanelContext& ctx) {
  cache_off_text_.clear();
  sequence_labels_.clear();
  shared_blocks_drawn_ = 0;
  if (!begin_panel(ctx, PanelId::kKvCache)) return;
  if (!ctx.snap) {
    empty_hint(ctx, "No model loaded yet.");
    panel_help_button(PanelId::kKvCache);
    end_panel();
    return;
  }
  const SessionSnapshot& snap = *ctx.snap;
  const StepView& v = ctx.view;
  const KvOccupancy& kv = v.trace ? v.trace->kv_after : snap.kv;
  const float font = ImGui::GetFontSize();
  const int n_layer = snap.config.n_layer;

  const bool cache_on = v.trace ? v.trace->kv_cache : snap.kv_cache;
  if (!cache_on) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.warning), "KV cache off");
    panel_help_button(PanelId::kKvCache);
    // What the viewed step ran, from its record, and what the next step runs
    // in the session's own words (the Transport panel's "Next:" line), so
    // that the two numbers a class sees cannot disagree.
    cache_off_text_ =
        "Nothing is kept between steps: every token of every sequence goes through the "
        "model again at each step (see the timeline for what that costs).";
    if (v.trace) {
      cache_off_text_ += v.step == 0 ? " The prefill ran " : " This step ran ";
      cache_off_text_ += std::to_string(v.trace->recomputed_tokens);
      cache_off_text_ += " tokens.";
    }
    if (v.latest && (snap.state == SessionState::kReady || snap.state == SessionState::kPaused))
      cache_off_text_ += " Next, " + snap.next_action + ".";
    dim_text_wrapped("%s", cache_off_text_.c_str());
    end_panel();
    return;
  }
  const KvSpecView spec = kv_spec_view(snap, v);
  const std::set<int>& written = spec.written_slots;
  const size_t step_wrote = written_slots(v).size();  // the rounds' given-back slots too
  draft_blocks_drawn_ = -1;
  freed_slots_drawn_ = 0;
  // Summary.
  int tokens = 0;
  for (const SequenceOccupancy& s : kv.sequences) tokens = std::max(tokens, s.tokens);
  if (v.step < 0)
    ImGui::TextUnformatted("Empty: prefill will fill it.");
  else
    ImGui::Text("%s: %d token%s cached, %zu slot%s written",
                v.step == 0 ? "After prefill" : "After this step", tokens, tokens == 1 ? "" : "s",
                step_wrote, step_wrote == 1 ? "" : "s");
  panel_help_button(PanelId::kKvCache);
  if (spec.round) {
    ImGui::PushStyleColor(ImGuiCol_Text, ctx.pal.warning);
    ImGui::TextWrapped("%s", spec.round_line.c_str());
    ImGui::PopStyleColor();
  }
  const double layer_used = static_cast<double>(kv.bytes_per_layer_used);
  dim_text_wrapped(
      "Blocks of %d slots: %d used, %d shared, %d free of %d  \u00B7  %s per layer, %s in all %d "
      "layers",
      kv.block_size, kv.blocks_used, kv.blocks_shared, kv.blocks_free, kv.blocks_total,
      format_bytes(layer_used).c_str(), format_bytes(layer_used * n_layer).c_str(), n_layer);

  // What one token costs, from each model's shape: the number GQA shrinks.
  token_bytes_.clear();
  token_bytes_.push_back(
      kv_token_bytes(snap.has_draft ? "model" : snap.model_name.c_str(), snap.config, kv));
  if (snap.has_draft && snap.draft_config.n_layer > 0)  // a re-opened session has no shape
    token_bytes_.push_back(kv_token_bytes("draft", snap.draft_config, snap.draft_kv));
  // The Compare panel's other model (two models compared): its line beside
  // this one, in its own cache's format.
  if (!ctx.state.compared_model_name.empty())
    token_bytes_.push_back(kv_token_bytes(ctx.state.compared_model_name.c_str(),
                                          ctx.state.compared_model_config,
                                          ctx.state.compared_model_kv_layer_bytes));
  for (const KvTokenBytes& t : token_bytes_) dim_text_wrapped("%s", t.text.c_str());
  draw_legend(ctx, !spec.target_freed_slots.empty() || !spec.draft_freed_slots.empty());
  // With a draft section the chart gives up room to the second grid.
  const float chart_h = std::clamp(ImGui::GetContentRegionAvail().y * 0.3f, font * 4.0f,
                                   snap.has_draft ? font * 4.0f : font * 7.0f);
  const float pool_h = font * 2.6f;
  const Grid target{&kv, &written, &spec.target_freed_slots, false};
  if (!snap.has_draft) {
    ImGui::BeginChild(
        "lanes", ImVec2(0, std::max(ImGui::GetContentRegionAvail().y - chart_h - pool_h, font * 3)),
        false);
    draw_lane_blocks(ctx, target);
    ImGui::EndChild();
    draw_pool(ctx, target, pool_h, nullptr);
    draw_chart(ctx, chart_h);
    end_panel();
    return;
  }
  // With a draft model: the target's blocks and pool, then the draft's (its
  // own pool, drawn as it is now), then the chart.
  const float grids_h =
      std::max(ImGui::GetContentRegionAvail().y - chart_h - 2 * pool_h - font * 2.4f, font * 6);
  ImGui::BeginChild("lanes", ImVec2(0, grids_h * 0.55f), false);
  draw_lane_blocks(ctx, target);
  ImGui::EndChild();
  draw_pool(ctx, target, pool_h, nullptr);
  const KvOccupancy& dkv = snap.draft_kv;
  const std::set<int> none;
  ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.ok), "draft model's cache");
  ImGui::SameLine();
  dim_text_wrapped("its own pool: %d of %d blocks used, %d free%s", dkv.blocks_used,
                   dkv.blocks_total, dkv.blocks_free,
                   v.latest ? "" : " (now: the draft's cache is not kept per step)");
  const Grid draft{&dkv, &none, &spec.draft_freed_slots, true};
  ImGui::BeginChild("draft lanes", ImVec2(0, grids_h * 0.45f), false);
  draw_lane_blocks(ctx, draft);
  draft_blocks_drawn_ = static_cast<int>(drawn_blocks_.size());
  ImGui::EndChild();
  draw_pool(ctx, draft, pool_h, "Draft block pool");
  draw_chart(ctx, chart_h);
  end_panel();
}

void KvCachePanel::draw_lane_blocks(PanelContext& ctx, const Grid& g) {
  const SessionSnapshot& snap = *ctx.snap;
  const KvOccupancy& kv = *g.kv;
  drawn_blocks_.clear();
  const float font = ImGui::GetFontSize();
  const int bs = std::max(1, kv.block_size);
  const int slot_cols = bs >= 8 ? (bs + 1) / 2 : bs;
  const int slot_rows = (bs + slot_cols - 1) / slot_cols;
  const KvBlockRows block_rows = kv_block_rows(kv);
  const std::vector<const SequenceOccupancy*>& seqs = block_rows.seqs;
  if (seqs.empty()) {
    dim_text_wrapped("No sequences yet: prefill creates the first one.");
    return;
  }
  // The blocks every sequence starts with (the prompt's, after a fork) are
  // drawn once; each sequence then shows only the blocks after them.
  const size_t shared = block_rows.shared;
  if (!g.draft) shared_blocks_drawn_ = shared;
  int shared_tokens = static_cast<int>(shared) * bs;
  for (const SequenceOccupancy* sq : seqs) shared_tokens = std::min(shared_tokens, sq->tokens);
  const int rows_of_blocks = static_cast<int>(seqs.size()) + (shared > 0 ? 1 : 0);
  // Slots as large as the panel allows (up to a generous size for a projector).
  const int most_blocks = std::max(static_cast<int>(block_rows.most_blocks), 1);
  const ImVec2 area = ImGui::GetContentRegionAvail();
  float cell = std::max(5.0f, font * 0.55f);
  for (float c = font * 1.4f; c > font * 0.55f; c -= 1.0f) {
    const float bw = slot_cols * c + 4 + font * 0.4f,
                bh = slot_rows * c + 4 + font * 0.8f + font * 0.4f;
    const int per_row = std::max(1, static_cast<int>(area.x / bw));
    const int rows = (most_blocks + per_row - 1) / per_row;
    if (rows_of_blocks * (rows * bh + ImGui::GetTextLineHeightWithSpacing()) <= area.y) {
      cell = c;
      break;
    }
  }
  const float block_w = slot_cols * cell + 4, block_h = slot_rows * cell + 4;
  const float label_h = font * 0.8f;
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImU32 empty = ImGui::GetColorU32(ImGuiCol_FrameBg);
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  ImFont* f = ImGui::GetFont();
  const std::set<int>& written = *g.written;
  const std::set<int>& freed = *g.freed;
  int row_id = 0;
  // Blocks [from, to) of a block table holding `tokens` tokens, one row.
  auto draw_blocks = [&](const std::vector<int>& table, size_t from, size_t to, int tokens) {
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    ++row_id;
    for (size_t b = from; b < to; ++b) {
      const int phys = table[b];
      drawn_blocks_.insert(phys);
      if (b > from) {
        ImGui::SameLine(0, font * 0.4f);
        if (ImGui::GetCursorScreenPos().x + block_w > right) ImGui::NewLine();
      }
      const ImVec2 p = ImGui::GetCursorScreenPos();
      ImGui::PushID(static_cast<int>(b) + row_id * 100000);
      ImGui::InvisibleButton("blk", ImVec2(block_w, block_h + label_h));
      const bool hovered = ImGui::IsItemHovered();
      ImGui::PopID();
      const int refs = phys < static_cast<int>(kv.ref_counts.size()) ? kv.ref_counts[phys] : 1;
      char lbl[32];
      std::snprintf(lbl, sizeof(lbl), refs > 1 ? "#%d \u00D7%d" : "#%d", phys, refs);
      dl->AddText(f, font * 0.75f, p, refs > 1 ? ctx.pal.bar : dim, lbl);
      const ImVec2 q(p.x, p.y + label_h);
      int written_here = 0, freed_here = 0;
      for (int s = 0; s < bs; ++s) {
        const int logical = static_cast<int>(b) * bs + s;
        const int slot = phys * bs + s;
        const float x = q.x + 2 + (s % slot_cols) * cell, y = q.y + 2 + (s / slot_cols) * cell;
        ImU32 c = empty;
        if (logical < tokens) c = ctx.pal.accent2;
        if (written.count(slot)) {
          c = ctx.pal.accent;
          ++written_here;
        } else if (logical >= tokens && freed.count(slot)) {
          // Written by the round, then given back (a rejected draft's slot).
          c = ctx.pal.warning;
          ++freed_here;
          ++freed_slots_drawn_;
        }
        dl->AddRectFilled(ImVec2(x + 0.5f, y + 0.5f), ImVec2(x + cell - 0.5f, y + cell - 0.5f), c);
      }
      dl->AddRect(q, ImVec2(q.x + block_w, q.y + block_h),
                  refs > 1 ? ctx.pal.bar : ctx.pal.frame_border, 2.0f, 0,
                  refs > 1 ? 2.0f * ctx.scale : 1.0f);
      if (hovered) {
        const int first = static_cast<int>(b) * bs;
        const int filled = std::clamp(tokens - first, 0, bs);
        std::string freed_text;
        if (freed_here > 0) {
          freed_text = "\n";
          freed_text += plural(freed_here, "slot");
          freed_text += " written by the round, then given back (rejected drafts)";
        }
        ImGui::SetTooltip(
            "logical block %zu \u2192 physical block %d\npositions %d..%d, %d of %d slots filled\n"
            "%d slot%s written by this step\nreference count %d%s%s",
            b, phys, first, first + bs - 1, filled, bs, written_here, written_here == 1 ? "" : "s",
            refs, refs > 1 ? " (shared: stored once, read by every sequence that lists it)" : "",
            freed_text.c_str());
      }
    }
  };
  if (shared > 0) {
    ImGui::Text("shared by all %zu sequences", seqs.size());
    ImGui::SameLine();
    dim_text_wrapped("%zu block%s, stored once: the prompt, prefilled once", shared,
                     shared == 1 ? "" : "s");
    draw_blocks(seqs[0]->block_table, 0, shared, seqs[0]->tokens);
  }
  for (const SequenceOccupancy* sq : seqs) {
    const std::string owner = kv_sequence_owner(snap, ctx.view.trace, sq->id, g.draft);
    const size_t own = sq->block_table.size() - shared;
    const std::string label = owner.empty() ? "sequence " + std::to_string(sq->id) : owner;
    sequence_labels_.push_back(label);
    ImGui::TextUnformatted(label.c_str());
    ImGui::SameLine();
    if (shared > 0)
      dim_text_wrapped("%d tokens: the %zu shared block%s + %zu of its own", sq->tokens, shared,
                       shared == 1 ? "" : "s", own);
    else
      dim_text_wrapped("%d tokens in %zu block%s (block table: logical \u2192 physical)",
                       sq->tokens, own, own == 1 ? "" : "s");
    if (own > 0) draw_blocks(sq->block_table, shared, sq->block_table.size(), sq->tokens);
  }
}

void KvCachePanel::draw_legend(PanelContext& ctx, bool freed) {
  const float font = ImGui::GetFontSize();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImU32 empty = ImGui::GetColorU32(ImGuiCol_FrameBg);
  auto swatch = [&](ImU32 c, const char* text) {
    const float s = font * 0.7f;
    // Wrap to the next line rather than cut a label at the panel's edge.
    if (ImGui::GetContentRegionAvail().x < s + font * 0.3f + ImGui::CalcTextSize(text).x)
      ImGui::NewLine();
    const ImVec2 p = ImGui::GetCursorScreenPos();
    const float y = p.y + (ImGui::GetTextLineHeight() - s) * 0.5f;
    dl->AddRectFilled(ImVec2(p.x, y), ImVec2(p.x + s, y + s), c);
    ImGui::Dummy(ImVec2(s, ImGui::GetTextLineHeight()));
    ImGui::SameLine(0, font * 0.3f);
    ImGui::TextDisabled("%s", text);
    ImGui::SameLine(0, font);
  };
  swatch(ctx.pal.accent2, "cached");
  swatch(ctx.pal.accent, "written this step");
  swatch(ctx.pal.bar, "shared");
  swatch(empty, "free");
  if (freed) swatch(ctx.pal.warning, "given back by the round");
  ImGui::NewLine();
}

void KvCachePanel::draw_pool(PanelContext& ctx, const Grid& g, float height, const char* title) {
  const KvOccupancy& kv = *g.kv;
  const float font = ImGui::GetFontSize();
  const int total = static_cast<int>(kv.ref_counts.size());
  if (total == 0) return;
  std::set<int> written_blocks, freed_blocks;
  for (int s : *g.written) written_blocks.insert(s / std::max(1, kv.block_size));
  for (int s : *g.freed) freed_blocks.insert(s / std::max(1, kv.block_size));
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  const float w = ImGui::GetContentRegionAvail().x;
  ImGui::TextDisabled("%s: %d physical blocks, one square each", title ? title : "Block pool",
                      total);
  const float top = p.y + font * 1.2f;
  const float avail_h = height - font * 1.3f;
  // Squares as large as fit in the strip.
  float sq = std::max(2.0f, std::min(font * 0.6f, std::sqrt(w * avail_h / total)));
  int per_row = std::max(1, static_cast<int>(w / sq));
  while (sq > 2.0f && std::ceil(static_cast<float>(total) / per_row) * sq > avail_h) {
    sq -= 0.5f;
    per_row = std::max(1, static_cast<int>(w / sq));
  }
  const ImU32 empty = ImGui::GetColorU32(ImGuiCol_FrameBg);
  for (int b = 0; b < total; ++b) {
    const float x = p.x + (b % per_row) * sq, y = top + (b / per_row) * sq;
    if (y + sq > top + avail_h + 0.5f) break;
    ImU32 c = empty;
    if (kv.ref_counts[b] > 1)
      c = ctx.pal.bar;
    else if (kv.ref_counts[b] == 1)
      c = ctx.pal.accent2;
    if (written_blocks.count(b)) c = ctx.pal.accent;
    // A block the round wrote and emptied again: back on the free list.
    if (kv.ref_counts[b] == 0 && freed_blocks.count(b)) c = ctx.pal.warning;
    dl->AddRectFilled(ImVec2(x, y), ImVec2(x + sq - (sq > 3 ? 1 : 0), y + sq - (sq > 3 ? 1 : 0)),
                      c);
  }
  ImGui::SetCursorScreenPos(ImVec2(p.x, p.y + height));
  ImGui::Dummy(ImVec2(w, 0));
}

void KvCachePanel::draw_chart(PanelContext& ctx, float height) {
  const SessionSnapshot& snap = *ctx.snap;
  ChartSeries tokens, blocks;
  tokens.name = "tokens' keys and values";
  tokens.color = ctx.pal.accent2;
  blocks.name = "blocks reserved";
  blocks.color = with_alpha(ctx.pal.accent2, 0.45f);
  ChartOptions o;
  o.title = "Cache size over the steps (all layers): tokens | blocks";
  o.highlight = ctx.view.step;
  o.format = [](double v) { return format_bytes(v); };
  for (size_t i = 0; i < snap.history.size(); ++i) {
    const StepTrace& t = *snap.history[i];
    const KvOccupancy& kv = t.kv_after;
    const double per_slot =
        kv.blocks_total > 0 && kv.block_size > 0
            ? static_cast<double>(kv.bytes_per_layer_capacity) / kv.blocks_total / kv.block_size
            : 0.0;
    tokens.values.push_back(filled_slots(kv) * per_slot * snap.config.n_layer);
    blocks.values.push_back(static_cast<double>(kv.bytes_per_layer_used) * snap.config.n_layer);
    o.x_labels.push_back(t.phase == Phase::kPrefill ? "prefill" : std::to_string(i));
  }
  const int clicked =
      bar_chart("kvchart", {tokens, blocks}, o, ImVec2(ImGui::GetContentRegionAvail().x, height));
  if (clicked >= 0) ctx.state.view_step = clicked;
}

}  // namespace ts::app
