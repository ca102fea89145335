#pragma once
// The GUI's side of the session: owns the SessionWorker (compute runs on its
// thread), loads models in the background, and turns button presses into
// worker commands. Panels call these; none of them blocks on a forward pass.
// No GL, no ImGui.
#include <cstdint>
#include <future>
#include <memory>
#include <string>

#include "app/analysis.h"
#include "session/model_flags.h"
#include "session/model_setup.h"
#include "session/session_import.h"
#include "session/session_worker.h"

namespace ts::app {

class Controller {
 public:
  Controller() = default;
  ~Controller();
  Controller(const Controller&) = delete;
  Controller& operator=(const Controller&) = delete;

  // Loads now; throws ts::Error (the previous model, if any, stays).
  void load_blocking(const ModelSetupOptions& options);
  // Loads on a background thread; poll() installs the result or reports the error.
  void load_async(const ModelSetupOptions& options);
  bool loading() const { return load_.valid(); }
  const std::string& loading_what() const { return loading_what_; }
  // Load and warm-up time of the model in use (LoadedModel's), for the status bar.
  double load_seconds() const { return load_seconds_; }
  double warmup_seconds() const { return warmup_seconds_; }
  // Call once per frame: finishes a background load.
  void poll();

  // File > Open session / --open: replaces the session with the one the file
  // recorded, stepped through without the model (Space / Back move through
  // its history; the panels draw the stored records). Throws ts::Error with
  // one line naming the file and the reason; then nothing changes. A model
  // loaded later ends the replay.
  void open_session(const std::filesystem::path& file);
  bool replaying() const { return replay_ != nullptr; }
  const std::string& replay_file() const;
  int replay_steps() const { return replay_ ? static_cast<int>(replay_->full.history.size()) : 0; }
  int replay_lanes() const { return replay_ ? static_cast<int>(replay_->full.lanes.size()) : 0; }
  // The one line a panel that computes with the model shows instead of
  // drawing: no model loaded yet, or a reopened session (which has none).
  std::string needs_model_line() const;

  // Changes whenever the session is replaced (a model loaded, a file opened).
  const void* session_key() const {
    return replay_ ? static_cast<const void*>(replay_.get()) : worker_.get();
  }

  // Null while no model is loaded, and in a reopened session.
  SessionWorker* worker() { return worker_.get(); }
  // Roofs, cache comparison and logit lens of the loaded model (null before a model loads).
  AnalysisStore* analysis() { return analysis_.get(); }
  SnapshotPtr snapshot() const;  // null while no model is loaded and no session was opened

  // Commands. Each is ignored with a message when no model is loaded.
  // `strategies`: one per lane, used when the command starts a new generation.
  void set_prompt(const std::string& text, const std::vector<SamplingParams>& strategies);
  // Space: prefill when the prompt waits for it, else one decode step.
  void advance(const std::vector<SamplingParams>& strategies);
  void back();
  void reset(const std::vector<SamplingParams>& strategies);
  void run(double steps_per_second, const std::vector<SamplingParams>& strategies);
  void pause();
  // A changed control: before prefill it sets the lane's strategy; after, it
  // re-chooses the newest step's token from the same logits.
  void choose_with(int lane, const SamplingParams& params);
  void set_max_new_tokens(int n);
  void set_kv_cache(bool enabled);
  // The banned-words stage of the session (every lane, from the next choice on).
  void set_banned_words(bool on);
  bool banned_words_on() const { return banned_words_on_; }
  // The list the stage uses when on (null: none could be loaded; see error()).
  const std::shared_ptr<const BannedTokens>& banned_words_list() const { return banned_list_; }

  // Errors from the GUI side (a failed model load, a command with no model).
  const std::string& error() const { return error_; }
  uint64_t error_serial() const { return error_serial_; }
  void report(const std::string& message);

  // Session options new sessions get.
  SessionOptions session_options;
  std::string prompt_on_load = "Today's weather is so";  // set on every newly loaded model
  std::vector<SamplingParams> strategies_on_load{SamplingParams{}};
  // --ban-words FILE / --no-ban-words, and whether the stage is on by default
  // (the bundled model is loaded, or presentation mode is on).
  BanWordsFlags ban_words;
  bool presentation_on_load = false;
  // --draft-model DIR: the draft of speculative lanes, loaded with every
  // model (empty: none; a speculative lane is then refused at prefill).
  std::filesystem::path draft_model_on_load;
  // The draft the session has (empty name: none).
  const std::string& draft_name() const { return draft_name_; }

 private:
  // A target and, with draft_model_on_load, its draft. A draft that cannot
  // be loaded or does not share the target's vocabulary leaves `draft`
  // empty and says why in draft_error (one line).
  struct Loaded {
    LoadedModel model;
    LoadedModel draft;
    std::string draft_error;
  };
  static Loaded load_with_draft(const ModelSetupOptions& options,
                                const std::filesystem::path& draft_path);
  void install(Loaded loaded);
  bool require_model(const char* what);

  // The list the checkbox switches on: the user's, else the shipped one.
  void load_banned_words(const Tokenizer& tokenizer, bool bundled);
  std::shared_ptr<const BannedTokens> banned_list_;
  bool banned_words_on_ = false;
  bool loading_bundled_ = false;
  std::unique_ptr<SessionWorker> worker_;
  // A reopened session: its records, the viewed history step (-1: before
  // prefill) and the snapshot of that step.
  std::unique_ptr<const ImportedSession> replay_;
  int replay_cursor_ = 0;
  uint64_t replay_version_ = 0;
  SnapshotPtr replay_snapshot_;
  void replay_move(int cursor);
  std::shared_ptr<AnalysisStore> analysis_;  // shared with the jobs it queued
  std::future<Loaded> load_;
  std::string draft_name_;
  std::string loading_what_;
  double load_seconds_ = 0, warmup_seconds_ = 0;
  std::string error_;
  uint64_t error_serial_ = 0;
};

}  // namespace ts::app
