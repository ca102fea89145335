#include "app/controller.h"

#include <algorithm>
#include <chrono>

#include "session/speculative_lane.h"
#include "util/error.h"

namespace ts::app {

Controller::~Controller() {
  if (load_.valid()) load_.wait();
}

Controller::Loaded Controller::load_with_draft(const ModelSetupOptions& options,
                                               const std::filesystem::path& draft_path) {
  Loaded loaded;
  loaded.model = load_model_setup(options);
  if (draft_path.empty()) return loaded;
  try {
    // A KV sequence for every lane the window may open, and scratch.
    LoadedModel draft =
        load_draft_model(options, draft_path, kMaxLanes + 2, loaded.model.tokenizer);
    const std::string mismatch =
        spec_vocab_mismatch(loaded.model.engine->config(), draft.engine->config());
    if (!mismatch.empty()) throw Error(mismatch);
    loaded.draft = std::move(draft);
  } catch (const Error& e) {
    loaded.draft_error = std::string("--draft-model ") + draft_path.string() + ": " + e.what();
  }
  return loaded;
}

void Controller::install(Loaded loaded) {
  LoadedModel& model = loaded.model;
  auto session = std::make_unique<Session>(model.tokenizer, model.engine, session_options);
  // The window opens without a draft when it could not be loaded: the
  // target runs, a speculative lane is refused at prefill with this line.
  draft_name_.clear();
  if (loaded.draft.engine) {
    session->set_draft_engine(loaded.draft.engine);
    draft_name_ = loaded.draft.name;
  } else if (!loaded.draft_error.empty()) {
    report("draft model not loaded: " + loaded.draft_error);
  }
  // The prompt and strategy go in before the worker starts, so that the first
  // snapshot already shows them.
  // A prompt the model refuses (too long for its context) does not stop the
  // model from loading: the window shows why and waits for another prompt.
  try {
    if (!prompt_on_load.empty()) session->set_prompt(prompt_on_load);
  } catch (const Error& e) {
    report(std::string("prompt not set: ") + e.what());
  }
  try {
    session->set_strategies(strategies_on_load);
  } catch (const Error& e) {
    report(std::string("lanes not set: ") + e.what());
  }
  load_banned_words(*model.tokenizer, loading_bundled_);
  session->set_banned_words(banned_words_on_ ? banned_list_ : nullptr);
  replay_.reset();  // a loaded model ends a reopened session
  replay_snapshot_.reset();
  worker_.reset();  // the old worker's thread ends before the new one starts
  worker_ = std::make_unique<SessionWorker>(std::move(session), model.name, model.backend_notice);
  analysis_ = std::make_shared<AnalysisStore>();
  load_seconds_ = model.load_seconds;
  warmup_seconds_ = model.warmup_seconds;
}

void Controller::load_banned_words(const Tokenizer& tokenizer, bool bundled) {
  banned_list_.reset();
  banned_words_on_ = false;
  // The checkbox needs a list even when the stage starts off: the user's
  // file when one was given, else the shipped list.
  BanWordsFlags list_flags;
  if (ban_words.mode == BanWordsFlags::Mode::kFile) list_flags = ban_words;
  try {
    banned_list_ = ts::load_banned_words(list_flags, tokenizer, true);
  } catch (const Error& e) {
    report(std::string("banned words unavailable: ") + e.what());
    return;
  }
  banned_words_on_ =
      ban_words.mode == BanWordsFlags::Mode::kFile ||
      (ban_words.mode == BanWordsFlags::Mode::kDefault && (bundled || presentation_on_load));
}

void Controller::set_banned_words(bool on) {
  if (!require_model("banned words")) return;
  if (on && !banned_list_) {
    report("banned words: no list could be loaded");
    return;
  }
  banned_words_on_ = on;
  worker_->post([list = on ? banned_list_ : nullptr](Session& s) { s.set_banned_words(list); });
}

void Controller::load_blocking(const ModelSetupOptions& options) {
  loading_bundled_ = options.model.empty();
  Loaded loaded = load_with_draft(options, draft_model_on_load);
  // Like a target that cannot be loaded: nothing changes, the caller says why.
  if (!loaded.draft_error.empty()) throw Error(loaded.draft_error);
  install(std::move(loaded));
}

void Controller::load_async(const ModelSetupOptions& options) {
  if (load_.valid()) {
    report("a model is already loading");
    return;
  }
  loading_what_ = options.model.empty() ? default_model_path().string() : options.model.string();
  loading_bundled_ = options.model.empty();
  load_ = std::async(std::launch::async, [options, draft = draft_model_on_load] {
    return load_with_draft(options, draft);
  });
}

void Controller::poll() {
  if (!load_.valid()) return;
  if (load_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
  try {
    install(load_.get());
  } catch (const std::exception& e) {
    report(std::string("model not loaded: ") + e.what());
  }
  load_ = {};
  loading_what_.clear();
}

SnapshotPtr Controller::snapshot() const {
  if (replay_) return replay_snapshot_;
  return worker_ ? worker_->snapshot() : nullptr;
}

void Controller::open_session(const std::filesystem::path& file) {
  // Read and checked in full before anything is replaced.
  ImportedSession read = import_session_file(file);
  read.full.notice = "reopened from " + read.file + ", without the model";
  auto imported = std::make_unique<const ImportedSession>(std::move(read));
  worker_.reset();
  analysis_.reset();
  banned_list_.reset();
  banned_words_on_ = false;
  load_seconds_ = warmup_seconds_ = 0;
  // The Choosing panel's "Ban listed words" box shows whether the recorded
  // choices used a list (switching it needs the model, and says so).
  if (!imported->full.history.empty())
    for (const LaneStep& ls : imported->full.history.back()->lanes)
      if (ls.banned_words) {
        banned_list_ = ls.banned_words;
        banned_words_on_ = true;
      }
  replay_ = std::move(imported);
  // Opens at prefill, so that a class walks through it from the start.
  replay_move(replay_->full.history.empty() ? -1 : 0);
}

const std::string& Controller::replay_file() const {
  static const std::string none;
  return replay_ ? replay_->file : none;
}

std::string Controller::needs_model_line() const {
  if (!replay_) return "No model loaded yet.";
  return "Needs the model to recompute: this session was reopened from " + replay_->file +
         " (File > Load model runs a live one).";
}

void Controller::replay_move(int cursor) {
  const int n = static_cast<int>(replay_->full.history.size());
  replay_cursor_ = std::clamp(cursor, -1, n - 1);
  replay_snapshot_ = replay_snapshot(*replay_, replay_cursor_, ++replay_version_);
}

void Controller::report(const std::string& message) {
  error_ = message;
  ++error_serial_;
}

bool Controller::require_model(const char* what) {
  if (worker_) return true;
  if (replay_) {
    report(std::string(what) + ": needs the model; " + replay_->file +
           " was reopened without it (File > Load model runs a live session)");
    return false;
  }
  report(std::string(what) + ": no model is loaded yet");
  return false;
}

void Controller::set_prompt(const std::string& text,
                            const std::vector<SamplingParams>& strategies) {
  if (!require_model("set prompt")) return;
  worker_->post([text, strategies](Session& s) {
    s.set_prompt(text);
    s.set_strategies(strategies);
  });
}

void Controller::advance(const std::vector<SamplingParams>& strategies) {
  if (replay_) {
    if (replay_cursor_ + 1 < static_cast<int>(replay_->full.history.size()))
      replay_move(replay_cursor_ + 1);
    else
      report("the end of the recorded session: " + replay_->file + " holds no later step");
    return;
  }
  if (!require_model("step")) return;
  worker_->post([strategies](Session& s) {
    if (s.state() == SessionState::kReady) {
      s.set_strategies(strategies);
      s.prefill();
    } else {
      s.step();
    }
  });
}

void Controller::back() {
  if (replay_) {
    replay_move(replay_cursor_ - 1);
    return;
  }
  if (require_model("back")) worker_->back();
}

void Controller::reset(const std::vector<SamplingParams>& strategies) {
  if (replay_) {
    replay_move(-1);
    return;
  }
  if (!require_model("reset")) return;
  worker_->post([strategies](Session& s) {
    s.reset();
    if (s.state() == SessionState::kReady) s.set_strategies(strategies);
  });
}

void Controller::run(double steps_per_second, const std::vector<SamplingParams>& strategies) {
  if (!require_model("run")) return;
  worker_->post([strategies](Session& s) {
    if (s.state() == SessionState::kReady) s.set_strategies(strategies);
  });
  worker_->run(steps_per_second);
}

void Controller::pause() {
  if (worker_) worker_->pause();
}

void Controller::choose_with(int lane, const SamplingParams& params) {
  if (!require_model("strategy")) return;
  worker_->post([lane, params](Session& s) {
    if (s.history().empty()) {
      std::vector<SamplingParams> strategies;
      for (const Lane& l : s.lanes()) strategies.push_back(l.params);
      if (strategies.empty()) strategies.push_back(params);
      if (lane < static_cast<int>(strategies.size())) strategies[lane] = params;
      s.set_strategies(strategies);
    } else {
      s.rechoose(lane, params);
    }
  });
}

void Controller::set_max_new_tokens(int n) {
  if (!require_model("max new tokens")) return;
  worker_->post([n](Session& s) { s.set_max_new_tokens(n); });
}

void Controller::set_kv_cache(bool enabled) {
  if (!require_model("KV cache")) return;
  worker_->post([enabled](Session& s) { s.set_kv_cache(enabled); });
}

}  // namespace ts::app
