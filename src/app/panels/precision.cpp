#include "app/panels/precision.h"

#include <algorithm>
#include <cstdio>

#include <imgui_stdlib.h>

#include "app/panels/kv.h"
#include "app/ui_util.h"
#include "model/token_display.h"
#include "session/session_worker.h"
#include "util/error.h"

namespace ts::app {

const char* const PrecisionPanel::kHelp =
    "Compare: the same prompt under two number formats of the same weights (two formats), or "
    "under this model and another one with the same vocabulary (two models).\n\nTwo formats: the "
    "model is "
    "loaded twice, its matrices in the reference format (e.g. f32) and in the compared one "
    "(bf16, f16, or the 8- and 4-bit block formats q8 and q4), and both continue the prompt "
    "greedily. The compared model is fed the reference's tokens (teacher-forced), so every "
    "row compares the two on the same context: KL(p_ref || p_fmt) in nats over the whole "
    "vocabulary says how far the compared distribution is from the reference's (0: the "
    "same), top-1 says whether both pick the same token, and the last column lists the "
    "top-10 tokens that changed places (reference rank -> compared rank).\n\nBeside it a "
    "second copy of the compared model writes on its own output: the row where its token "
    "first differs from the reference's is the first divergence (highlighted in the table "
    "and the plot); from there the two texts go their own ways, shown side by side "
    "below.\n\nMB is what each step moves through memory (the weights in that format plus "
    "the KV cache); ms is its measured time: fewer bytes per weight, less to read each "
    "step. q8 and q4 run on the CPU (with either, both formats do). Row 0 is the prefill.\n\nTwo "
    "models: type the "
    "path of another model whose tokenizer gives every id the same token (e.g. this model's "
    "draft, or a Llama-shaped twin of a GPT-2): this model is the reference, the other is "
    "compared the same way, row by row. Beside the KL and top-1, the line under the heading "
    "gives each model's weight MB read per step and the KV cache bytes it keeps per token (a "
    "model with fewer key/value heads keeps fewer). A model with another vocabulary is "
    "refused, naming the first id that differs.";

namespace {

constexpr WeightFormat kFormats[] = {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kF16,
                                     WeightFormat::kQ8, WeightFormat::kQ4};
constexpr int kNumFormats = 5;

int format_index(WeightFormat f) {
  for (int i = 0; i < kNumFormats; ++i)
    if (kFormats[i] == f) return i;
  return 0;
}

// Rows computed so far, as the panel shows them.
std::shared_ptr<const PrecisionPanel::Result> make_result(const PrecisionCompare& cmp,
                                                          const std::string& prompt,
                                                          int planned_rows) {
  auto r = std::make_shared<PrecisionPanel::Result>();
  r->pair = cmp.pair().value_or(PrecisionPair{});
  r->models = !cmp.pair();
  r->labels = cmp.labels();
  r->config = cmp.reference_engine().config();
  r->compared_config = cmp.compared_engine().config();
  r->compared_kv_layer_bytes =
      kv_layer_token_bytes(r->compared_config, cmp.compared_engine().cache().occupancy());
  r->device = cmp.compared_engine().backend().device_name();
  r->planned_rows = planned_rows;
  r->steps = cmp.steps();
  r->summary = cmp.summary();
  r->prompt = prompt;
  r->reference_tokens = cmp.reference_tokens();
  r->free_tokens = cmp.free_tokens();
  return r;
}

ImVec4 to_vec4(ImU32 c) { return ImGui::ColorConvertU32ToFloat4(c); }

}  // namespace

void PrecisionPanel::configure(const ModelSetupOptions& setup,
                               std::optional<PrecisionPair> run_on_load,
                               const std::filesystem::path& compare_model) {
  setup_ = setup;
  run_on_load_ = run_on_load;
  models_on_load_ = compare_model;
  if (run_on_load) {
    reference_choice_ = format_index(run_on_load->reference);
    compared_choice_ = format_index(run_on_load->compared);
  }
  if (!compare_model.empty()) {
    mode_ = Mode::kModels;
    model_path_ = compare_model.string();
  }
}

void PrecisionPanel::set_up_models(const std::filesystem::path& path) {
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    ++shared_->generation;  // the rows of a run still going stop
    shared_->busy = false;
  }
  shared_ = std::make_shared<Shared>();
  mode_ = Mode::kModels;
  model_path_ = path.string();
}

void PrecisionPanel::publish_compared_model(PanelContext& ctx) const {
  const auto r = result();
  // Only figures of the session's model (a model loaded since drops them).
  if (r && r->models && worker_ == ctx.ctl.worker()) {
    ctx.state.compared_model_name = r->labels.compared;
    ctx.state.compared_model_config = r->compared_config;
    ctx.state.compared_model_kv_layer_bytes = r->compared_kv_layer_bytes;
  } else {
    ctx.state.compared_model_name.clear();
  }
}

std::shared_ptr<const PrecisionPanel::Result> PrecisionPanel::result() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->result;
}

std::string PrecisionPanel::error() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->error;
}

bool PrecisionPanel::busy() const {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  return shared_->busy;
}

void PrecisionPanel::run(SessionWorker& worker, PrecisionPair pair, const std::string& prompt,
                         int steps) {
  mode_ = Mode::kFormats;
  reference_choice_ = format_index(pair.reference);
  compared_choice_ = format_index(pair.compared);
  start(
      worker, precision_pair_name(pair),
      [pair](const ModelSetupOptions& setup) { return PrecisionCompare::load(setup, pair); },
      prompt, steps);
}

void PrecisionPanel::run_models(SessionWorker& worker, const std::filesystem::path& path,
                                const std::string& prompt, int steps) {
  mode_ = Mode::kModels;
  model_path_ = path.string();
  start(
      worker, "model:" + path.string(),
      [path](const ModelSetupOptions& setup) { return PrecisionCompare::load_models(setup, path); },
      prompt, steps);
}

void PrecisionPanel::start(SessionWorker& worker, const std::string& key, Loader load,
                           const std::string& prompt, int steps) {
  if (&worker != worker_) {
    shared_ = std::make_shared<Shared>();  // another model: nothing carries over
    worker_ = &worker;
  }
  steps_ = steps;
  uint64_t gen = 0;
  {
    std::lock_guard<std::mutex> lock(shared_->mutex);
    gen = ++shared_->generation;
    shared_->busy = true;
    shared_->error.clear();
  }
  // True when a newer run took over or this one failed: its rows stop.
  auto stale = [](Shared& s, uint64_t g) {
    std::lock_guard<std::mutex> lock(s.mutex);
    return s.generation != g || !s.busy;
  };
  auto fail = [](Shared& s, uint64_t g, const std::string& what) {
    std::lock_guard<std::mutex> lock(s.mutex);
    if (s.generation != g) return;
    s.error = what;
    s.busy = false;
  };
  const ModelSetupOptions setup = setup_;
  const int rows = steps + 1;
  worker.post([shared = shared_, gen, setup, key, load, prompt, rows, stale, fail](Session&) {
    if (stale(*shared, gen)) return;
    try {
      if (!shared->compare || shared->loaded_key != key) {
        shared->compare.reset();  // the old pair's engines go before the new ones load
        shared->loaded_key.clear();
        shared->compare = load(setup);
        shared->loaded_key = key;
      }
      shared->compare->set_prompt(prompt);
      const int room = shared->compare->context() -
                       static_cast<int>(shared->compare->prompt_tokens().size()) + 1;
      auto r = make_result(*shared->compare, prompt, std::min(rows, room));
      std::lock_guard<std::mutex> lock(shared->mutex);
      if (shared->generation == gen) shared->result = std::move(r);
    } catch (const std::exception& e) {
      fail(*shared, gen, e.what());
    }
  });
  for (int i = 0; i < rows; ++i)
    worker.post([shared = shared_, gen, prompt, last = i + 1 == rows, stale, fail](Session&) {
      if (stale(*shared, gen)) return;
      try {
        PrecisionCompare& cmp = *shared->compare;
        if (cmp.can_step()) cmp.step();
        const bool done = last || !cmp.can_step();
        auto r = make_result(cmp, prompt,
                             done             ? static_cast<int>(cmp.steps().size())
                             : shared->result ? shared->result->planned_rows
                                              : 0);
        std::lock_guard<std::mutex> lock(shared->mutex);
        if (shared->generation != gen) return;
        shared->result = std::move(r);
        if (done) shared->busy = false;
      } catch (const std::exception& e) {
        fail(*shared, gen, e.what());
      }
    });
}

void PrecisionPanel::draw_plot(PanelContext& ctx, const Result& r, float height) {
  const float font = ImGui::GetFontSize();
  const ImVec2 size(ImGui::GetContentRegionAvail().x, height);
  ImGui::InvisibleButton("klplot", size);
  const ImVec2 a = ImGui::GetItemRectMin(), b = ImGui::GetItemRectMax();
  ImDrawList* dl = ImGui::GetWindowDrawList();
  dl->AddRect(a, b, ctx.pal.grid);
  const int n = std::max(r.planned_rows, static_cast<int>(r.steps.size()));
  drawn_.plot_x0 = a.x, drawn_.plot_y0 = a.y, drawn_.plot_x1 = b.x, drawn_.plot_y1 = b.y;
  if (n == 0) return;
  double top = 0;
  for (const PrecisionStep& s : r.steps) top = std::max(top, s.kl);
  char label[48];
  std::snprintf(label, sizeof label, "KL max %.3g nats", top);
  const float label_h = font * 1.1f;
  dl->AddText(ImVec2(a.x + font * 0.3f, a.y + 1), ctx.pal.text_dim, label);
  const float y_base = b.y - 2, y_top = a.y + label_h;
  const float slot = (b.x - a.x) / static_cast<float>(n);
  const float gap = std::min(slot * 0.2f, 3.0f * ctx.scale);
  const int diverge = r.summary.first_divergence;
  int hovered = -1;
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const double v = top > 0 ? r.steps[i].kl / top : 0;
    const float x0 = a.x + slot * static_cast<float>(i) + gap * 0.5f;
    const float x1 = x0 + std::max(1.0f, slot - gap);
    const float y0 = y_base - static_cast<float>(v) * (y_base - y_top);
    const bool marked = static_cast<int>(i) == diverge;
    ImU32 colour = r.steps[i].top1_agrees() ? ctx.pal.accent2 : ctx.pal.warning;
    if (marked) colour = ctx.pal.accent;
    dl->AddRectFilled(ImVec2(x0, std::min(y0, y_base - 1)), ImVec2(x1, y_base), colour);
    if (marked) {
      dl->AddRect(ImVec2(x0 - 2, y_top - 2), ImVec2(x1 + 2, y_base + 1), ctx.pal.accent, 0, 0,
                  2.0f * ctx.scale);
      drawn_.plot_marked_bar = static_cast<int>(i);
    }
    const ImVec2 m = ImGui::GetIO().MousePos;
    if (ImGui::IsItemHovered() && m.x >= x0 - gap * 0.5f && m.x < x0 - gap * 0.5f + slot)
      hovered = static_cast<int>(i);
    ++drawn_.plot_bars;
  }
  if (hovered >= 0) {
    const PrecisionStep& s = r.steps[hovered];
    ImGui::SetTooltip("step %d: KL %.4g nats, top-1 %s%s", s.index, s.kl,
                      s.top1_agrees() ? "agrees" : "differs",
                      hovered == diverge ? " (first divergence)" : "");
  }
}

void PrecisionPanel::draw_continuations(PanelContext& ctx, const Result& r) {
  const std::string &ref = r.labels.reference, &fmt = r.labels.compared;
  const ImGuiTableFlags tf = ImGuiTableFlags_BordersInnerV | ImGuiTableFlags_SizingStretchSame;
  if (!ImGui::BeginTable("continuations", 2, tf)) return;
  drawn_.continuations = true;
  // The shared part once per column, then each one's own tail in the accent
  // colour (a divergence starts a new line, so it is seen at a glance). A
  // token the banned-words stage masks is shown masked, as everywhere else.
  const SessionSnapshot& snap = *ctx.snap;
  auto column = [&](const std::string& title, const std::vector<int>& tokens) {
    ImGui::TableNextColumn();
    ImGui::TextColored(to_vec4(ctx.pal.accent2), "%s", title.c_str());
    const int d = r.summary.first_divergence;
    std::string shared_part, tail;
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::string masked = token_piece(snap, tokens[i]);
      const bool is_masked = masked != context_piece(snap, tokens[i]);
      (d >= 0 && static_cast<int>(i) >= d ? tail : shared_part) +=
          is_masked ? masked : snap.tokenizer->token_bytes(tokens[i]);
    }
    ImGui::PushTextWrapPos(0.0f);
    ImGui::TextColored(to_vec4(ctx.pal.text_dim), "%s",
                       with_replacement_chars(r.prompt + shared_part).c_str());
    if (!tail.empty())
      ImGui::TextColored(to_vec4(ctx.pal.accent), "%s", with_replacement_chars(tail).c_str());
    ImGui::PopTextWrapPos();
  };
  column(ref + " (reference)", r.reference_tokens);
  column(fmt + " (its own greedy text)", r.free_tokens);
  ImGui::EndTable();
}

void PrecisionPanel::draw_table(PanelContext& ctx, const Result& r) {
  const std::string &ref = r.labels.reference, &fmt = r.labels.compared;
  const ImGuiTableFlags tf = ImGuiTableFlags_ScrollY | ImGuiTableFlags_ScrollX |
                             ImGuiTableFlags_RowBg | ImGuiTableFlags_BordersInnerV |
                             ImGuiTableFlags_SizingFixedFit;
  const float h = std::max(ImGui::GetContentRegionAvail().y, ImGui::GetFontSize() * 4);
  if (!ImGui::BeginTable("rows", 11, tf, ImVec2(0, h))) return;
  const std::string cols[] = {"step",
                              ref + " token",
                              "KL (nats)",
                              "top-1",
                              fmt + " token",
                              fmt + " free",
                              ref + " MB",
                              fmt + " MB",
                              ref + " ms",
                              fmt + " ms",
                              "top-10 changed places (ref -> " + fmt + ")"};
  ImGui::TableSetupScrollFreeze(1, 1);
  for (const std::string& c : cols) ImGui::TableSetupColumn(c.c_str());
  ImGui::TableHeadersRow();
  const int diverge = r.summary.first_divergence;
  char buf[64];
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const PrecisionStep& s = r.steps[i];
    ImGui::TableNextRow();
    if (static_cast<int>(i) == diverge) {
      ImGui::TableSetBgColor(ImGuiTableBgTarget_RowBg1, with_alpha(ctx.pal.accent, 0.35f));
      drawn_.highlighted_row = static_cast<int>(i);
    }
    ++drawn_.table_rows;
    ImGui::TableNextColumn();
    ImGui::Text("%d%s", s.index, static_cast<int>(i) == diverge ? " \u25B6" : "");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(token_piece(*ctx.snap, s.reference_token).c_str());
    ImGui::TableNextColumn();
    std::snprintf(buf, sizeof buf, "%.3e", s.kl);
    ImGui::TextUnformatted(buf);
    ImGui::TableNextColumn();
    if (s.top1_agrees())
      ImGui::TextColored(to_vec4(ctx.pal.ok), "yes");
    else
      ImGui::TextColored(to_vec4(ctx.pal.warning), "no");
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(token_piece(*ctx.snap, s.compared_token).c_str());
    ImGui::TableNextColumn();
    ImGui::TextUnformatted(token_piece(*ctx.snap, s.free_token).c_str());
    for (double mb : {s.reference_bytes / 1e6, s.compared_bytes / 1e6}) {
      ImGui::TableNextColumn();
      std::snprintf(buf, sizeof buf, "%.2f", mb);
      ImGui::TextUnformatted(buf);
    }
    for (double ms : {s.reference_seconds * 1e3, s.compared_seconds * 1e3}) {
      ImGui::TableNextColumn();
      std::snprintf(buf, sizeof buf, "%.2f", ms);
      ImGui::TextUnformatted(buf);
    }
    ImGui::TableNextColumn();
    std::string changed;
    for (size_t k = 0; k < s.changed.size(); ++k) {
      std::snprintf(buf, sizeof buf, " %d\u2192%d", s.changed[k].reference_rank,
                    s.changed[k].compared_rank);
      changed += (k ? ",  " : "") + token_piece(*ctx.snap, s.changed[k].token) + buf;
    }
    ImGui::TextUnformatted(changed.empty() ? "-" : changed.c_str());
  }
  ImGui::EndTable();
}

void PrecisionPanel::draw_controls(PanelContext& ctx, SessionWorker& worker, bool busy_now) {
  const float font = ImGui::GetFontSize();
  static const char* const kNames[] = {"f32", "bf16", "f16", "q8", "q4"};
  static const char* const kModes[] = {"two formats", "two models"};
  int mode = mode_ == Mode::kModels ? 1 : 0;
  ImGui::SetNextItemWidth(font * 7.5f);
  if (ImGui::Combo("##mode", &mode, kModes, 2)) mode_ = mode ? Mode::kModels : Mode::kFormats;
  ImGui::SameLine();
  std::string refusal;
  PrecisionPair pair;
  if (mode_ == Mode::kFormats) {
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("Reference");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(font * 4.5f);
    ImGui::Combo("##ref", &reference_choice_, kNames, kNumFormats);
    ImGui::SameLine();
    ImGui::TextUnformatted("vs");
    ImGui::SameLine();
    ImGui::SetNextItemWidth(font * 4.5f);
    ImGui::Combo("##fmt", &compared_choice_, kNames, kNumFormats);
    // The pair as the CLI checks it: two different formats, CPU-only ones not on CUDA.
    try {
      pair = parse_precision_pair(
          "formats", std::string(kNames[reference_choice_]) + "," + kNames[compared_choice_],
          setup_.device);
    } catch (const Error& e) {
      refusal = e.what();
    }
  } else {
    // The session's model against the one at the path (checked when it loads).
    ImGui::AlignTextToFramePadding();
    ImGui::TextUnformatted("this model vs");
    ImGui::SameLine();
    const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
    ImGui::SetNextItemWidth(std::clamp(right - ImGui::GetCursorScreenPos().x, font * 8, font * 22));
    ImGui::InputTextWithHint("##model", "model directory or .bin file", &model_path_);
    if (ImGui::IsItemHovered())
      ImGui::SetTooltip("A model sharing this model's vocabulary (every id the same token)");
    if (model_path_.empty()) refusal = "type the path of the model to compare with";
  }
  // A narrow panel (a projector's font) puts the steps and Run on a line of their own.
  const float right = ImGui::GetWindowPos().x + ImGui::GetWindowContentRegionMax().x;
  if (right - ImGui::GetItemRectMax().x >= font * 14) ImGui::SameLine();
  ImGui::AlignTextToFramePadding();
  ImGui::TextUnformatted("steps");
  ImGui::SameLine();
  ImGui::SetNextItemWidth(font * 5.5f);
  ImGui::InputInt("##steps", &steps_);
  steps_ = std::clamp(steps_, 1, 4096);
  ImGui::SameLine();
  ImGui::BeginDisabled(busy_now || !refusal.empty());
  const bool go = ImGui::Button(busy_now ? "running..." : "Run");
  ImGui::EndDisabled();
  if (!refusal.empty() && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled))
    ImGui::SetTooltip("%s", refusal.c_str());
  panel_help_button(PanelId::kPrecision);
  if (!go || busy_now || !refusal.empty()) return;
  if (mode_ == Mode::kFormats)
    run(worker, pair, ctx.snap->prompt_text, steps_);
  else
    run_models(worker, model_path_, ctx.snap->prompt_text, steps_);
}

void PrecisionPanel::draw(PanelContext& ctx) {
  drawn_ = Drawn{};
  if (!ctx.state.compare_model_request.empty()) {
    set_up_models(ctx.state.compare_model_request);
    ctx.state.compare_model_request.clear();
  }
  publish_compared_model(ctx);
  if (!begin_panel(ctx, PanelId::kPrecision)) return;
  SessionWorker* worker = ctx.ctl.worker();
  if (!ctx.snap || !worker) {
    empty_hint(ctx, ctx.ctl.needs_model_line().c_str());
    panel_help_button(PanelId::kPrecision);
    end_panel();
    return;
  }
  if (worker != worker_ && worker_ != nullptr) {
    shared_ = std::make_shared<Shared>();  // a new model: the old figures are not its
    worker_ = worker;
  }
  // --compare-precision / --compare-model: once per loaded session, on its prompt.
  if ((run_on_load_ || !models_on_load_.empty()) && auto_ran_for_ != ctx.ctl.session_key() &&
      !ctx.snap->prompt_text.empty()) {
    auto_ran_for_ = ctx.ctl.session_key();
    if (run_on_load_)
      run(*worker, *run_on_load_, ctx.snap->prompt_text, steps_);
    else
      run_models(*worker, models_on_load_, ctx.snap->prompt_text, steps_);
  }
  const float font = ImGui::GetFontSize();
  const bool busy_now = busy();
  draw_controls(ctx, *worker, busy_now);
  // One line that fits the panel (a long path would run off its edge); the
  // whole message on hover.
  if (const std::string err = error(); !err.empty()) {
    ImGui::TextColored(to_vec4(ctx.pal.error), "%s",
                       fit_text(err, ImGui::GetContentRegionAvail().x).c_str());
    drawn_.error_x1 = ImGui::GetItemRectMax().x;
    if (ImGui::IsItemHovered()) ImGui::SetTooltip("%s", err.c_str());
  }

  const auto r = result();
  // Each finished run counted once (a lesson step waits for one).
  if (r && !busy_now && error().empty() && counted_.lock() != r) {
    counted_ = r;
    ++ctx.state.comparisons_finished;
  }
  if (!r) {
    const bool models = mode_ == Mode::kModels;
    empty_hint(ctx,
               busy_now
                   ? (models ? "Loading the two models..." : "Loading the model in both formats...")
               : models ? "Type the path of a model that shares this one's vocabulary and press "
                          "Run: the session's prompt runs greedily under both."
                        : "Pick two formats and press Run: the session's prompt runs "
                          "greedily under both.");
    end_panel();
    return;
  }
  // Figures of another model (one loaded since) would name other tokens.
  const ModelConfig& now = ctx.snap->config;
  if (r->config.vocab_size != now.vocab_size || r->config.n_layer != now.n_layer ||
      r->config.n_embd != now.n_embd) {
    empty_hint(ctx, "These figures were computed on another model: press Run.");
    end_panel();
    return;
  }
  const char* ref = r->labels.reference.c_str();
  const char* fmt = r->labels.compared.c_str();
  const PrecisionSummary& s = r->summary;
  ImGui::PushTextWrapPos(0.0f);
  if (ctx.heading_font) ImGui::PushFont(ctx.heading_font);
  if (s.first_divergence >= 0) {
    const int d = s.first_divergence;
    ImGui::TextColored(to_vec4(ctx.pal.accent), "First divergence at step %d: %s \"%s\", %s \"%s\"",
                       d, ref, token_piece(*ctx.snap, r->reference_tokens[d]).c_str(), fmt,
                       token_piece(*ctx.snap, r->free_tokens[d]).c_str());
  } else {
    ImGui::Text("No divergence in %d step%s: %s writes what %s writes", s.steps,
                s.steps == 1 ? "" : "s", fmt, ref);
  }
  if (ctx.heading_font) ImGui::PopFont();
  ImGui::Text("mean KL %.3e nats, top-1 agrees %.1f%% of %d step%s%s", s.mean_kl,
              100.0 * s.top1_agreement, s.steps, s.steps == 1 ? "" : "s",
              busy_now ? " (running...)" : "");
  // What a short panel leaves out first: this line (the table has the
  // figures), then the texts, then the plot; the table always stays.
  const float room = ImGui::GetContentRegionAvail().y;
  // Two models: what each step costs them, the teaching point beside the
  // KL (a model with fewer KV heads caches fewer bytes per token).
  drawn_.model_costs = r->models;
  if (r->models)
    ImGui::Text("%s: weights %.2f MB, KV %.0f B/token; %s: weights %.2f MB, KV %.0f B/token", ref,
                s.reference_weight_bytes / 1e6, s.reference_kv_token_bytes, fmt,
                s.compared_weight_bytes / 1e6, s.compared_kv_token_bytes);
  if (room >= font * 16)
    ImGui::TextDisabled(
        "%s: %.2f MB, %.2f ms per step; %s: %.2f MB, %.2f ms (mean MB, median ms of the decode "
        "steps; %s teacher-forced on %s's tokens, on %s)",
        ref, s.reference_bytes / 1e6, s.reference_median_seconds * 1e3, fmt, s.compared_bytes / 1e6,
        s.compared_median_seconds * 1e3, fmt, ref, r->device.c_str());
  ImGui::PopTextWrapPos();
  // The plot, the texts and the table share what is left; the table keeps
  // at least a few rows and scrolls.
  // A short panel (a projector's large font) keeps room for the table: the
  // plot shrinks to a few lines and the texts scroll in their own strip.
  const float avail = ImGui::GetContentRegionAvail().y;
  const float plot_h = std::clamp(avail * 0.2f, font * 2.5f, font * 7.0f);
  const float text_h = std::clamp(avail * 0.25f, font * 3.5f, font * 7.0f);
  if (avail >= font * 8) draw_plot(ctx, *r, plot_h);
  if (avail >= font * 14) {
    if (ImGui::BeginChild("texts", ImVec2(0, text_h))) draw_continuations(ctx, *r);
    ImGui::EndChild();
  }
  draw_table(ctx, *r);
  end_panel();
}

}  // namespace ts::app
