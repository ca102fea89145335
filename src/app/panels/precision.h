#pragma once
// Compare: the session's prompt run greedily under two engines that share a
// vocabulary (session/precision_compare.h), in one of two modes: two weight
// formats of this model (loaded twice), or this model against another model
// (a path: e.g. its draft, or a Llama-shaped twin with the same tokenizer).
// The compared side is teacher-forced on the reference's tokens, beside its
// own free-running continuation. Per step the KL of the compared distribution
// from the reference's, whether top-1 agrees, the top-10 tokens that changed
// places, and bytes and time per side; a small KL-per-step plot with the
// first divergence marked, the two continuations side by side, and each
// side's weight bytes and KV bytes per token. Both modes share the drawing.
//
// The comparison is the panel's own (it never touches the session's lanes);
// its engines load and its rows run on the session's worker thread, one
// posted task per row, so stepping the session and drawing never wait for it.
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "app/panels/panel.h"
#include "session/precision_compare.h"

namespace ts::app {

class PrecisionPanel : public Panel {
 public:
  void draw(PanelContext& ctx) override;
  static const char* const kHelp;  // its "?" text

  // Where the two engines come from (the window's model flags) and, with
  // --compare-precision, the pair run as soon as a model is loaded; with
  // --compare-model, the model compared with the session's (the panel then
  // opens in its models mode and runs it as soon as a model is loaded).
  void configure(const ModelSetupOptions& setup, std::optional<PrecisionPair> run_on_load,
                 const std::filesystem::path& compare_model = {});
  // File > Load model: the next run loads this model (the figures shown stay
  // until then, and are not drawn over another model's tokens).
  void set_model(const ModelSetupOptions& setup) { setup_ = setup; }

  // Runs `prompt` under `pair` for the prefill and `steps` decode steps on
  // the worker (the Run button; tests): the engines load first, again only
  // when the pair changed. A run started before is abandoned.
  void run(SessionWorker& worker, PrecisionPair pair, const std::string& prompt, int steps);
  // The same with the session's model as the reference and the model at
  // `path` compared (the models mode's Run button; tests). A path that does
  // not load or a vocabulary that differs is the panel's error line.
  void run_models(SessionWorker& worker, const std::filesystem::path& path,
                  const std::string& prompt, int steps);

  // A lesson's compare_model: the models mode with `path` in its field, the
  // figures shown before dropped (a run still going is abandoned), nothing
  // run until Run.
  void set_up_models(const std::filesystem::path& path);

  // Which comparison the controls set up.
  enum class Mode { kFormats, kModels };
  Mode mode() const { return mode_; }
  // The models mode's path field (what its Run button runs).
  const std::string& model_path() const { return model_path_; }
  // What the worker has computed so far (null before the first row).
  struct Result {
    PrecisionPair pair;    // the formats mode's pair (models: f32, f32)
    bool models = false;   // two models, not two formats
    CompareLabels labels;  // the formats' or the models' names
    ModelConfig config;    // the reference model (the session's)
    // Two models: the compared model's shape, and one token's K and V in
    // one layer of its cache.
    ModelConfig compared_config;
    int64_t compared_kv_layer_bytes = 0;
    std::string device;  // where both engines run
    int planned_rows = 0;
    std::vector<PrecisionStep> steps;
    PrecisionSummary summary;
    std::string prompt;
    // The two continuations: the reference's tokens and the compared
    // format's own greedy ones.
    std::vector<int> reference_tokens, free_tokens;
  };
  std::shared_ptr<const Result> result() const;
  std::string error() const;
  bool busy() const;

  // The last frame (tests): table rows drawn, the row highlighted as the
  // first divergence (-1: none), the plot's bars and its rectangle.
  struct Drawn {
    int table_rows = 0;
    int highlighted_row = -1;
    int plot_bars = 0;
    int plot_marked_bar = -1;
    float plot_x0 = 0, plot_y0 = 0, plot_x1 = 0, plot_y1 = 0;
    bool continuations = false;
    bool model_costs = false;  // two models: the weights and KV bytes line
    float error_x1 = 0;        // the right edge of the error line (0: none drawn)
  };
  const Drawn& drawn() const { return drawn_; }

 private:
  struct Shared {
    mutable std::mutex mutex;
    std::shared_ptr<const Result> result;
    bool busy = false;
    std::string error;
    uint64_t generation = 0;  // a newer run makes older rows stop
    // Worker thread only: the loaded pair and its engines.
    std::unique_ptr<PrecisionCompare> compare;
    std::string loaded_key;
  };
  using Loader = std::function<std::unique_ptr<PrecisionCompare>(const ModelSetupOptions&)>;
  // Posts the load (only when `key` differs from the loaded one) and the
  // rows of a run to the worker.
  void start(SessionWorker& worker, const std::string& key, Loader load, const std::string& prompt,
             int steps);
  void draw_controls(PanelContext& ctx, SessionWorker& worker, bool busy_now);
  // Tells the window which model the models mode loaded beside the session's
  // (AppState::compared_model_*), every frame, the panel open or not.
  void publish_compared_model(PanelContext& ctx) const;
  void draw_plot(PanelContext& ctx, const Result& r, float height);
  void draw_table(PanelContext& ctx, const Result& r);
  void draw_continuations(PanelContext& ctx, const Result& r);

  std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
  const SessionWorker* worker_ = nullptr;  // the worker the results came from
  ModelSetupOptions setup_;
  std::optional<PrecisionPair> run_on_load_;
  std::filesystem::path models_on_load_;  // --compare-model
  Mode mode_ = Mode::kFormats;
  std::string model_path_;                          // the models mode's path field
  const void* auto_ran_for_ = nullptr;              // the session the flag's run was started in
  int reference_choice_ = 0, compared_choice_ = 3;  // indices into the five formats: f32, q8
  int steps_ = 16;
  Drawn drawn_;
  std::weak_ptr<const Result> counted_;  // the last result counted in comparisons_finished
};

}  // namespace ts::app
