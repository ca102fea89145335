#include "app/panels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace ts::app {

const char* const AttentionPanel::kHelp =
    "Attention weights of one layer and head: row = the query token (the token "
    "being processed), column = the key token it looks at. Each row sums to 1.\n\n"
    "Hatched cells are masked: a token may not look at tokens that come after it "
    "(causal mask). After prefill every prompt row is there at once; each decode "
    "step adds one new row at the bottom (outlined). A speculative round adds \u03B3 + 1 "
    "rows at once, its verify pass (a small prefill over the cache); the rows of drafts the "
    "target rejected are struck through. A lookahead or prompt-lookup pass adds all of its "
    "fed rows (the last token, the candidates, the window); the cells among them greyed over "
    "are those its mask forbids: each branch sees the context, x and its own tokens only."
    "\n\nThe small grid shows every "
    "layer \u00D7 head; click one to show it. 'avg' averages the heads of a layer. A log "
    "scale makes small weights visible.";

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xBF58476D1CE4E5B9ull;
}

HeatmapTheme theme_for(bool light) {
  HeatmapTheme t;
  if (light) {
    const float g[4] = {1.0f, 1.0f, 1.0f, 1.0f};
    const float a[4] = {0.86f, 0.86f, 0.88f, 1.0f};
    const float b[4] = {0.75f, 0.75f, 0.78f, 1.0f};
    std::copy(g, g + 4, t.grid);
    std::copy(a, a + 4, t.mask_a);
    std::copy(b, b + 4, t.mask_b);
  }
  return t;
}

}  // namespace

void AttentionPanel::set_synthetic(AttentionMatrix m, bool rerender_every_frame) {
  matrix_ = std::move(m);
  synthetic_ = true;
  rerender_every_frame_ = rerender_every_frame;
  ++matrix_serial_;
}

std::string gqa_note(const ModelConfig& cfg) {
  const int kv = cfg.kv_heads();
  if (kv <= 0 || kv >= cfg.n_head) return {};
  return std::to_string(cfg.n_head) + " query heads share " + std::to_string(kv) + " KV head" +
         (kv == 1 ? "" : "s") + ": " + std::to_string(cfg.n_head / kv) + " per group";
}

std::string kv_group_label(const ModelConfig& cfg, int head) {
  const int kv = cfg.kv_heads();
  if (kv <= 0 || kv >= cfg.n_head) return {};
  const int per = cfg.n_head / kv, g = head / per;
  return "KV head " + std::to_string(g) + ": q heads " + std::to_string(g * per) + "-" +
         std::to_string(g * per + per - 1);
}

std::string verify_caption(const AttentionMatrix& m) {
  if (m.verify_rows <= 0) return {};
  int accepted = 0, rejected = 0;
  for (VerifyRowRole r : m.row_roles) {
    accepted += r == VerifyRowRole::kAccepted;
    rejected += r == VerifyRowRole::kRejected || r == VerifyRowRole::kUnchecked;
  }
  char b[160];
  std::snprintf(b, sizeof b,
                "verify pass: \u03B3+1 = %d rows over the %d cached positions \u00B7 %d accepted, "
                "%d rejected",
                m.verify_rows, m.first_new_row, accepted, rejected);
  return b;
}

VerifyRowRole AttentionPanel::row_role(int row) const {
  const int i = row - matrix_.first_new_row;
  if (synthetic_ || i < 0 || i >= static_cast<int>(matrix_.row_roles.size()))
    return VerifyRowRole::kPending;
  return matrix_.row_roles[i];
}

const char* AttentionPanel::row_role_text(VerifyRowRole role) {
  switch (role) {
    case VerifyRowRole::kAccepted:
      return "accepted draft: the target agreed, so the lane keeps this row's keys and values";
    case VerifyRowRole::kRejected:
      return "rejected draft: the target chose another token here; this row was computed in "
             "the same pass, then its KV slot was given back";
    case VerifyRowRole::kUnchecked:
      return "draft after the first rejection: never checked; computed in the same pass, then "
             "its KV slot was given back";
    case VerifyRowRole::kPending:
      break;
  }
  return nullptr;
}

std::string AttentionPanel::label(const PanelContext& ctx, int pos) const {
  if (synthetic_ || !ctx.snap || pos < 0 || pos >= static_cast<int>(matrix_.tokens.size()))
    return std::to_string(pos);
  return context_piece(*ctx.snap, matrix_.tokens[pos]);
}

void AttentionPanel::update_matrix(PanelContext& ctx) {
  if (synthetic_) return;
  AttentionSelection& sel = ctx.state.attention;
  if (!ctx.snap || ctx.view.step < 0) {
    if (matrix_.n != 0 || atlas_.layers != 0) {
      matrix_ = AttentionMatrix{};
      atlas_ = ThumbnailAtlas{};
      verify_caption_.clear();
      ++matrix_serial_;
      ++atlas_serial_;
    }
    matrix_key_ = atlas_key_ = 0;
    return;
  }
  const SessionSnapshot& snap = *ctx.snap;
  if (ctx.ctl.worker() != source_worker_ || !source_) {
    source_ = std::make_unique<WorkerAttentionSource>(ctx.ctl.worker());
    source_worker_ = ctx.ctl.worker();
    matrix_key_ = atlas_key_ = 0;
  }
  sel.layer = std::clamp(sel.layer, 0, std::max(0, snap.config.n_layer - 1));
  sel.head = std::clamp(sel.head, 0, std::max(0, snap.config.n_head - 1));
  uint64_t hist = mix(0, static_cast<uint64_t>(ctx.view.lane));
  for (int s = 0; s <= ctx.view.step; ++s)
    hist = mix(hist, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(snap.history[s].get())));
  const uint64_t key = mix(mix(hist, static_cast<uint64_t>(sel.layer)),
                           sel.average ? 0xFFFFull : static_cast<uint64_t>(sel.head));
  if (key != matrix_key_ || !matrix_.complete) {
    matrix_ = build_attention_matrix(snap, ctx.view.step, ctx.view.lane, sel.layer,
                                     sel.average ? -1 : sel.head, *source_);
    matrix_key_ = key;
    ++matrix_serial_;
    verify_caption_ = verify_caption(matrix_);
  }
  if (ctx.state.settings.show_thumbnails && (hist != atlas_key_ || !atlas_.complete)) {
    atlas_ = build_thumbnail_atlas(snap, ctx.view.step, ctx.view.lane, *source_);
    atlas_key_ = hist;
    ++atlas_serial_;
  }
}

void AttentionPanel::draw_controls(PanelContext& ctx) {
  AttentionSelection& sel = ctx.state.attention;
  Settings& set = ctx.state.settings;
  const float font = ImGui::GetFontSize();
  const int n_layer = ctx.snap ? ctx.snap->config.n_layer : 1;
  const int n_head = ctx.snap ? ctx.snap->config.n_head : 1;
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Layer");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(font * 5.5f);
  ImGui::SliderInt("##layer", &sel.layer, 0, std::max(0, n_layer - 1));
  ImGui::SameLine();
  ImGui::TextUnformatted("Head");
  ImGui::SameLine();
  ImGui::BeginDisabled(sel.average);
  ImGui::SetNextItemWidth(font * 5.5f);
  ImGui::SliderInt("##head", &sel.head, 0, std::max(0, n_head - 1));
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::Checkbox("average", &sel.average);
  if (ImGui::IsItemHovered()) ImGui::SetTooltip("Average of every head of the layer");
  panel_help_button(PanelId::kAttention);

  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("Scale");
  ImGui::SameLine();
  int scale = static_cast<int>(set.scale);
  ImGui::RadioButton("linear", &scale, 0);
  ImGui::SameLine();
  ImGui::RadioButton("log", &scale, 1);
  set.scale = static_cast<HeatScale>(scale);
  ImGui::SameLine();
  ImGui::SetNextItemWidth(font * 6.0f);
  if (ImGui::BeginCombo("##cmap", colormap_name(set.colormap))) {
    for (int i = 0; i < kNumColormaps; ++i) {
      const Colormap m = static_cast<Colormap>(i);
      if (ImGui::Selectable(colormap_name(m), m == set.colormap)) set.colormap = m;
    }
    ImGui::EndCombo();
  }
  if (ImGui::IsItemHovered())
    ImGui::SetTooltip("Colour map (viridis and magma are colour-blind safe)");
  ImGui::SameLine();
  ImGui::Checkbox("all heads", &set.show_thumbnails);
  gqa_note_drawn_ = ctx.snap && !synthetic_ ? gqa_note(ctx.snap->config) : std::string();
  if (!gqa_note_drawn_.empty()) dim_text_wrapped("%s", gqa_note_drawn_.c_str());
}

void AttentionPanel::draw(PanelContext& ctx) {
  if (!begin_panel(ctx, PanelId::kAttention)) return;
  draw_controls(ctx);
  if (!renderer_) {
    ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.error),
                       "Heatmap shaders could not be loaded (see the status bar).");
    end_panel();
    return;
  }
  update_matrix(ctx);
  style_.colormap = ctx.state.settings.colormap;
  style_.range.scale = ctx.state.settings.scale;
  if (matrix_.n == 0) {
    empty_hint(ctx,
               ctx.snap ? "Attention appears after prefill: press Space." : "No model loaded yet.");
    end_panel();
    return;
  }
  const float font = ImGui::GetFontSize();
  const AttentionSelection& sel = ctx.state.attention;
  // What this picture is.
  {
    char head[64];
    if (synthetic_)
      std::snprintf(head, sizeof(head), "synthetic %d \u00D7 %d", matrix_.n, matrix_.n);
    else if (sel.average)
      std::snprintf(head, sizeof(head), "layer %d, average of %d heads", sel.layer,
                    ctx.snap ? ctx.snap->config.n_head : 0);
    else
      std::snprintf(head, sizeof(head), "layer %d, head %d", sel.layer, sel.head);
    ImGui::TextUnformatted(head);
    // Under GQA the head's KV group, in the accent colour the grid's
    // group labels use.
    group_label_drawn_ = synthetic_ || sel.average || !ctx.snap
                             ? std::string()
                             : kv_group_label(ctx.snap->config, sel.head);
    if (!group_label_drawn_.empty()) {
      ImGui::SameLine();
      ImGui::PushStyleColor(ImGuiCol_Text, ctx.pal.accent);
      ImGui::Text("(%s)", group_label_drawn_.c_str());
      ImGui::PopStyleColor();
    }
    ImGui::SameLine();
    if (!synthetic_ && ctx.view.trace && ctx.view.trace->phase == Phase::kPrefill)
      ImGui::TextDisabled("\u2014 prefill: all %d prompt rows in one pass", matrix_.n);
    else if (!synthetic_ && matrix_.verify_rows > 0) {
      // A speculative round: its verify pass is a small prefill over the cache.
      ImGui::PushStyleColor(ImGuiCol_Text, ctx.pal.accent);
      ImGui::TextWrapped("\u2014 %s (outlined)", verify_caption_.c_str());
      ImGui::PopStyleColor();
    } else if (!synthetic_ && matrix_.pass_rows > 0) {
      ImGui::TextDisabled(
          "\u2014 one pass of %d fed rows (outlined); grey: what the pass's mask forbids",
          matrix_.pass_rows);
    } else if (!synthetic_)
      ImGui::TextDisabled("\u2014 decode step %d added the outlined row", ctx.view.step);
    if (!matrix_.complete) {
      ImGui::SameLine();
      // A reopened session has no model to recompute what its file left out.
      ImGui::TextColored(ImGui::ColorConvertU32ToFloat4(ctx.pal.warning), "%s",
                         ctx.ctl.replaying()
                             ? "(some rows are not in the file: recomputing them needs the model)"
                             : "(recomputing...)");
    }
  }

  const ImVec2 avail = ImGui::GetContentRegionAvail();
  const float bottom_h = font * 5.2f;  // legend + summary
  const float axis_h = font * 1.1f;
  // Row labels are token pieces when rows are tall enough to hold text.
  const bool show_thumbs = ctx.state.settings.show_thumbnails && atlas_.layers > 0 && !synthetic_;
  const bool wide = avail.x > avail.y * 1.25f;
  float thumbs_w = 0, thumbs_h = 0;
  if (show_thumbs) {
    if (wide) {
      thumbs_w = std::min(avail.x * 0.38f, font * 24);
    } else {
      const float tile = std::clamp(avail.x / (atlas_.heads + 1.5f), font * 1.2f, font * 2.6f);
      const bool gqa = ctx.snap && ctx.snap->config.kv_heads() < ctx.snap->config.n_head;
      thumbs_h = std::min(avail.y * 0.26f,
                          (tile + font * 0.3f) * atlas_.layers + font * (gqa ? 3.9f : 2.6f));
    }
  }
  float label_w = font * 5.5f;
  float side = std::min(avail.x - label_w - thumbs_w, avail.y - bottom_h - axis_h - thumbs_h);
  if (side / matrix_.n < font * 0.75f) label_w = font * 2.5f;  // numbers only
  side = std::min(avail.x - label_w - thumbs_w - (thumbs_w > 0 ? font : 0),
                  avail.y - bottom_h - axis_h - thumbs_h);
  side = std::max(side, font * 4);

  ImGui::BeginGroup();
  draw_heatmap(ctx, side, label_w);
  const float group_w =
      std::max(side + label_w, std::min(avail.x - thumbs_w - (thumbs_w > 0 ? font : 0), font * 24));
  draw_legend(ctx, group_w);
  draw_summary(ctx, group_w);
  ImGui::EndGroup();
  if (show_thumbs) {
    if (wide) {
      ImGui::SameLine(0, font);
      draw_thumbnails(ctx, ImVec2(thumbs_w, avail.y));
    } else {
      draw_thumbnails(ctx, ImVec2(avail.x, thumbs_h));
    }
  }
  end_panel();
}

void AttentionPanel::draw_heatmap(PanelContext& ctx, float side, float label_w) {
  const int n = matrix_.n;
  const float font = ImGui::GetFontSize();
  // Small maps: whole pixels per cell. Maps larger than the panel: each
  // pixel max-pools a block of cells, so the picture is drawn 1:1 (no
  // minification at draw time, cheap on software renderers).
  const int down = cells_per_pixel(n, side);
  const int px = down > 1 ? 1 : pixels_per_cell(n, side);
  const float disp =
      down > 1 ? static_cast<float>((n + down - 1) / down) : static_cast<float>(n * px);
  const float cell = disp / static_cast<float>(n);
  style_.grid = px >= 8;
  const bool light = ctx.pal.text == palette(true).text;
  const uint64_t key =
      mix(mix(mix(mix(matrix_serial_, px * 64 + down), static_cast<uint64_t>(style_.colormap)),
              static_cast<uint64_t>(style_.range.scale)),
          light ? 1 : 2);
  if (key != image_key_ || rerender_every_frame_) {
    renderer_->set_theme(theme_for(light));
    renderer_->render(matrix_.values.data(), n, n, px, style_, image_, down);
    image_key_ = key;
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImVec2 origin = ImGui::GetCursorScreenPos();
  const float axis_h = font * 1.1f;
  const ImVec2 img(origin.x + label_w, origin.y + axis_h);
  ImGui::SetCursorScreenPos(img);
  ImGui::Image(image_.imgui_id(), ImVec2(disp, disp));
  const bool hovered = ImGui::IsItemHovered();
  const bool clicked = ImGui::IsItemClicked();
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const ImU32 text = ImGui::GetColorU32(ImGuiCol_Text);

  // Key positions above the columns, as many as fit.
  {
    const float w = ImGui::CalcTextSize("0000").x;
    const int every = std::max(1, static_cast<int>(std::ceil(w / cell)));
    for (int c = 0; c < n; c += every) {
      char b[16];
      std::snprintf(b, sizeof(b), "%d", c);
      const float tw = ImGui::CalcTextSize(b).x;
      dl->AddText(ImVec2(img.x + (c + 0.5f) * cell - tw * 0.5f, origin.y), dim, b);
    }
    const float kw = ImGui::CalcTextSize("key \u2192").x;
    if (kw + font * 0.6f < label_w)
      dl->AddText(ImVec2(img.x - kw - font * 0.6f, origin.y), dim, "key \u2192");
  }
  // Query labels beside the rows: token pieces when they fit, else positions.
  const bool pieces = cell >= font * 0.75f;
  const float label_font = std::min(font, cell * 1.05f);
  const int every = pieces ? 1 : std::max(1, static_cast<int>(std::ceil(font * 1.1f / cell)));
  for (int r = 0; r < n; r += every) {
    const bool is_new = !synthetic_ && r >= matrix_.first_new_row && matrix_.first_new_row > 0;
    std::string s = pieces ? label(ctx, r) : std::to_string(r);
    s = fit_text(s, label_w - font * 0.4f);
    const float tw = ImGui::CalcTextSize(s.c_str()).x;
    const float lf = pieces ? label_font : font;
    const float y = img.y + (r + 0.5f) * cell - lf * 0.5f;
    ImU32 col = pieces && r >= matrix_.prompt_len ? ctx.pal.accent : text;
    if (!pieces) col = dim;
    if (is_new) col = ctx.pal.accent;
    // A speculative round: the rows of drafts the target did not keep are
    // dimmed and struck through (their keys and values were given back).
    const VerifyRowRole role = row_role(r);
    const bool dropped = role == VerifyRowRole::kRejected || role == VerifyRowRole::kUnchecked;
    if (dropped) col = dim;
    const ImVec2 at(img.x - tw * lf / font - font * 0.3f, y);
    dl->AddText(ImGui::GetFont(), lf, at, col, s.c_str());
    if (dropped)
      dl->AddLine(ImVec2(at.x, y + lf * 0.55f), ImVec2(at.x + tw * lf / font, y + lf * 0.55f), dim,
                  std::max(1.0f, ctx.scale));
  }
  // Hovering a query label of a verify row says what became of it.
  if (matrix_.verify_rows > 0 &&
      ImGui::IsMouseHoveringRect(ImVec2(origin.x, img.y), ImVec2(img.x, img.y + disp))) {
    const int r = std::clamp(static_cast<int>((ImGui::GetIO().MousePos.y - img.y) / cell), 0,
                             std::max(0, n - 1));
    if (const char* why = row_role_text(row_role(r))) ImGui::SetTooltip("%s", why);
  }
  const float thick = 2.0f * ctx.scale;
  // Where the prompt ends (rows and columns after it were generated).
  if (!synthetic_ && matrix_.prompt_len > 0 && matrix_.prompt_len < n) {
    const float at = matrix_.prompt_len * cell;
    dl->AddLine(ImVec2(img.x + at, img.y + at), ImVec2(img.x + at, img.y + disp),
                with_alpha(ctx.pal.text, 0.5f), 1.0f);
    dl->AddLine(ImVec2(img.x, img.y + at), ImVec2(img.x + at, img.y + at),
                with_alpha(ctx.pal.text, 0.5f), 1.0f);
  }
  // The rows the viewed decode step added (never outside the map).
  heatmap_box_ = {img.x, img.y, disp, disp};
  new_rows_box_ = {};
  if (!synthetic_ && matrix_.first_new_row > 0 && matrix_.first_new_row < n) {
    const float y0 = img.y + matrix_.first_new_row * cell;
    dl->AddRect(ImVec2(img.x - 1, y0 - 1), ImVec2(img.x + disp + 1, img.y + disp + 1),
                ctx.pal.accent, 0, 0, thick);
    new_rows_box_ = {img.x, y0, disp, img.y + disp - y0};
    // A speculative round: "verify pass" at the frame's right end, in the
    // masked triangle above the frame (the caption line above the map
    // says the rest).
    if (matrix_.verify_rows > 0) {
      const char* tag = "verify pass";
      const ImVec2 ts = ImGui::CalcTextSize(tag);
      if (ts.x + font < disp && y0 - ts.y >= img.y)
        dl->AddText(ImVec2(img.x + disp - ts.x - font * 0.2f, y0 - ts.y), ctx.pal.accent, tag);
    }
  }
  // A lookahead or prompt-lookup pass: the cells among its fed rows that
  // its mask forbids (another branch, or a window cell outside its row 0
  // prefix and column), greyed over: the paper's figure of who sees whom.
  pass_masked_cells_ = 0;
  if (!synthetic_ && matrix_.pass_rows > 0) {
    const int first = matrix_.first_new_row;
    const ImU32 grey = with_alpha(ctx.pal.text, 0.45f);
    for (int q = first; q < first + matrix_.pass_rows && q < n; ++q)
      for (int k = first; k < q; ++k) {
        if (matrix_.pass_allows(q, k)) continue;
        dl->AddRectFilled(ImVec2(img.x + k * cell, img.y + q * cell),
                          ImVec2(img.x + (k + 1) * cell, img.y + (q + 1) * cell), grey);
        ++pass_masked_cells_;
      }
  }
  // The query chosen in the token strip.
  const int q_sel = ctx.state.attention.query;
  if (q_sel >= 0 && q_sel < n) {
    const float y0 = img.y + q_sel * cell;
    dl->AddRect(ImVec2(img.x - 2, y0 - 2), ImVec2(img.x + disp + 2, y0 + cell + 2),
                ctx.pal.selected, 0, 0, thick);
  }
  if (hovered) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    const int q = std::clamp(static_cast<int>((m.y - img.y) / cell), 0, n - 1);
    const int k = std::clamp(static_cast<int>((m.x - img.x) / cell), 0, n - 1);
    if (cell >= 3)
      dl->AddRect(ImVec2(img.x + k * cell, img.y + q * cell),
                  ImVec2(img.x + (k + 1) * cell, img.y + (q + 1) * cell), ctx.pal.selected);
    ImGui::BeginTooltip();
    const std::string qs = label(ctx, q), ks = label(ctx, k);
    ImGui::Text("query: position %d  %s", q, synthetic_ ? "" : qs.c_str());
    ImGui::Text("key:   position %d  %s", k, synthetic_ ? "" : ks.c_str());
    const float v = matrix_.at(q, k);
    if (v < 0)
      ImGui::TextDisabled("masked: a token cannot attend to a later token");
    else if (!synthetic_ && !matrix_.pass_allows(q, k))
      ImGui::TextDisabled("masked by the pass: these fed rows are on different branches (greyed)");
    else
      ImGui::Text("weight: %.4f  (%.1f%% of the row)", v, v * 100.0f);
    if (down > 1)
      ImGui::TextDisabled(
          "%d x %d cells per pixel: each pixel shows the largest weight of its block", down, down);
    ImGui::EndTooltip();
    if (clicked) ctx.state.attention.query = ctx.state.attention.query == q ? -1 : q;
  }
  ImGui::SetCursorScreenPos(ImVec2(origin.x, img.y + disp + font * 0.3f));
  ImGui::Dummy(ImVec2(label_w + disp, 0));
}

void AttentionPanel::draw_legend(PanelContext& ctx, float width) {
  const float font = ImGui::GetFontSize();
  const HeatRange& range = style_.range;
  const uint64_t key =
      mix(static_cast<uint64_t>(style_.colormap) + 1, static_cast<uint64_t>(range.scale) + 7);
  if (key != legend_key_) {
    std::vector<float> values(256);
    for (int i = 0; i < 256; ++i) {
      const float t = i / 255.0f;
      values[i] = range.scale == HeatScale::kLog
                      ? range.log_floor * std::pow(range.vmax / range.log_floor, t)
                      : t * range.vmax;
    }
    HeatmapStyle s = style_;
    s.grid = false;
    renderer_->render(values.data(), 256, 1, 1, s, legend_);
    legend_key_ = key;
  }
  const bool light = ctx.pal.text == palette(true).text;
  if (swatch_key_ != (light ? 1u : 2u)) {
    const float masked = kMaskedValue;
    HeatmapStyle s = style_;
    s.grid = false;
    renderer_->set_theme(theme_for(light));
    renderer_->render(&masked, 1, 1, 16, s, mask_swatch_);
    swatch_key_ = light ? 1 : 2;
  }
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  const float label_w = ImGui::CalcTextSize("weight ").x;
  const float mask_w = font * 7.5f;
  const float bar_w = std::max(font * 6, width - label_w - mask_w);
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("weight");
  ImGui::SameLine();
  const ImVec2 p = ImGui::GetCursorScreenPos();
  ImGui::Image(legend_.imgui_id(), ImVec2(bar_w, font * 0.9f));
  // Ticks under the bar.
  float last_end = -1e9f;
  legend_ticks_drawn_.clear();
  for (const LegendTick& t : legend_ticks(range)) {
    const float x = p.x + t.position * bar_w;
    const float tw = ImGui::CalcTextSize(t.label).x;
    const float tx = std::clamp(x - tw * 0.5f, p.x, p.x + bar_w - tw);
    if (tx < last_end + font * 0.4f) continue;
    last_end = tx + tw;
    dl->AddLine(ImVec2(x, p.y + font * 0.9f), ImVec2(x, p.y + font * 1.15f), dim);
    dl->AddText(ImVec2(tx, p.y + font * 1.15f), dim, t.label);
    legend_ticks_drawn_.push_back(t);
  }
  ImGui::SameLine(0, font * 0.8f);
  ImGui::Image(mask_swatch_.imgui_id(), ImVec2(font, font));
  ImGui::SameLine();
  ImGui::TextDisabled("masked");
  ImGui::Dummy(ImVec2(0, font * 0.9f));
}

void AttentionPanel::draw_summary(PanelContext& ctx, float width) {
  const int n = matrix_.n;
  const int sel = ctx.state.attention.query;
  const int q = sel >= 0 && sel < n ? sel : n - 1;
  std::vector<int> keys(q + 1);
  for (int k = 0; k <= q; ++k) keys[k] = k;
  const int shown = std::min(3, q + 1);
  std::partial_sort(keys.begin(), keys.begin() + shown, keys.end(),
                    [&](int a, int b) { return matrix_.at(q, a) > matrix_.at(q, b); });
  std::string s;
  for (int i = 0; i < shown; ++i) {
    char b[32];
    std::snprintf(b, sizeof(b), " %.0f%%", matrix_.at(q, keys[i]) * 100.0f);
    if (i) s += "  \u00B7  ";
    s += synthetic_ ? "position " + std::to_string(keys[i])
                    : "\u201C" + label(ctx, keys[i]) + "\u201D";
    s += b;
  }
  ImGui::PushTextWrapPos(ImGui::GetCursorPosX() + width);
  if (synthetic_)
    ImGui::Text("Row %d attends most to: %s", q, s.c_str());
  else
    ImGui::Text("\u201C%s\u201D (position %d%s) attends most to: %s", label(ctx, q).c_str(), q,
                sel >= 0 && sel < n ? ", selected" : ", newest", s.c_str());
  ImGui::PopTextWrapPos();
}

void AttentionPanel::draw_thumbnails(PanelContext& ctx, ImVec2 area) {
  const float font = ImGui::GetFontSize();
  AttentionSelection& sel = ctx.state.attention;
  ImGui::BeginChild("thumbs", area, false);
  dim_text_wrapped("Every layer \u00D7 head (click to show)");
  const float label_w = ImGui::CalcTextSize("L00 ").x;
  const float avail_w = ImGui::GetContentRegionAvail().x - label_w;
  const int tiles = atlas_.heads + 1;
  const float tile_disp =
      std::clamp(avail_w / tiles, font * 1.2f, area.x > font * 20 ? font * 5.0f : font * 2.6f);
  // Gaps of a few pixels at any tile size: the atlas has one background cell
  // between tiles, so render at whole pixels per cell.
  const int px = std::max(1, static_cast<int>(std::floor(tile_disp / (atlas_.tile + atlas_.gap))));
  const uint64_t key = mix(mix(mix(atlas_serial_, px), static_cast<uint64_t>(style_.colormap)),
                           static_cast<uint64_t>(style_.range.scale));
  if (key != thumbs_key_) {
    HeatmapStyle s = style_;
    s.grid = false;
    renderer_->render(atlas_.values.data(), atlas_.cols, atlas_.rows, px, s, thumbs_);
    thumbs_key_ = key;
  }
  const float step = static_cast<float>((atlas_.tile + atlas_.gap) * px);
  const float tile_px = static_cast<float>(atlas_.tile * px);
  ImDrawList* dl = ImGui::GetWindowDrawList();
  const ImU32 dim = ImGui::GetColorU32(ImGuiCol_TextDisabled);
  ImVec2 origin = ImGui::GetCursorScreenPos();
  // Grouped-query attention: one label over each KV head's query heads,
  // and a line between the groups.
  const ModelConfig* cfg = ctx.snap ? &ctx.snap->config : nullptr;
  const int groups = cfg && cfg->kv_heads() < cfg->n_head ? cfg->kv_heads() : 0;
  const int per = groups > 0 ? atlas_.heads / groups : 0;
  group_separators_drawn_ = 0;
  if (groups > 0) {
    for (int g = 0; g < groups; ++g) {
      char b[16];
      std::snprintf(b, sizeof(b), per * step >= ImGui::CalcTextSize("KV 00").x ? "KV %d" : "%d", g);
      const float tw = ImGui::CalcTextSize(b).x;
      const float x0 = origin.x + label_w + g * per * step;
      dl->AddText(ImVec2(x0 + (per * step - step + tile_px - tw) * 0.5f, origin.y), ctx.pal.accent,
                  b);
      dl->AddLine(ImVec2(x0 + font * 0.1f, origin.y + font * 1.1f),
                  ImVec2(x0 + per * step - step + tile_px - font * 0.1f, origin.y + font * 1.1f),
                  ctx.pal.accent, std::max(1.0f, ctx.scale));
    }
    origin.y += font * 1.3f;
  }
  // Column headers.
  for (int h = 0; h < tiles; ++h) {
    char b[16];
    if (h < atlas_.heads)
      std::snprintf(b, sizeof(b), "H%d", h);
    else
      std::snprintf(b, sizeof(b), "avg");
    const float tw = ImGui::CalcTextSize(b).x;
    if (tw < step || h % 2 == 0 || h == atlas_.heads)
      dl->AddText(ImVec2(origin.x + label_w + h * step + (tile_px - tw) * 0.5f, origin.y), dim, b);
  }
  const ImVec2 img(origin.x + label_w, origin.y + font * 1.2f);
  ImGui::SetCursorScreenPos(img);
  ImGui::Image(thumbs_.imgui_id(), ImVec2(static_cast<float>(thumbs_.color().width()),
                                          static_cast<float>(thumbs_.color().height())));
  const bool hovered = ImGui::IsItemHovered();
  const bool clicked = ImGui::IsItemClicked();
  for (int g = 1; g < groups; ++g) {
    const float x = img.x + g * per * step - (step - tile_px) * 0.5f;
    dl->AddLine(ImVec2(x, img.y - font * 1.2f), ImVec2(x, img.y + atlas_.layers * step),
                ctx.pal.accent, std::max(2.0f, 2.0f * ctx.scale));
    ++group_separators_drawn_;
  }
  for (int l = 0; l < atlas_.layers; ++l) {
    char b[16];
    std::snprintf(b, sizeof(b), "L%d", l);
    dl->AddText(ImVec2(origin.x, img.y + l * step + (tile_px - font) * 0.5f), dim, b);
  }
  // The tile on show.
  const int sel_col = sel.average ? atlas_.heads : sel.head;
  dl->AddRect(ImVec2(img.x + sel_col * step - 2, img.y + sel.layer * step - 2),
              ImVec2(img.x + sel_col * step + tile_px + 2, img.y + sel.layer * step + tile_px + 2),
              ctx.pal.accent, 0, 0, 2.0f * ctx.scale);
  if (hovered) {
    const ImVec2 m = ImGui::GetIO().MousePos;
    const int h = std::clamp(static_cast<int>((m.x - img.x) / step), 0, tiles - 1);
    const int l = std::clamp(static_cast<int>((m.y - img.y) / step), 0, atlas_.layers - 1);
    dl->AddRect(ImVec2(img.x + h * step - 1, img.y + l * step - 1),
                ImVec2(img.x + h * step + tile_px + 1, img.y + l * step + tile_px + 1),
                ctx.pal.selected);
    if (h < atlas_.heads)
      ImGui::SetTooltip("layer %d, head %d", l, h);
    else
      ImGui::SetTooltip("layer %d, average of the %d heads", l, atlas_.heads);
    if (clicked) {
      sel.layer = l;
      sel.average = h == atlas_.heads;
      if (!sel.average) sel.head = h;
    }
  }
  ImGui::EndChild();
}

}  // namespace ts::app
