#pragma once
// Runs a Session on its own thread. Front ends post commands and read
// immutable snapshots; drawing never waits for a forward pass. A command
// that fails leaves the session as it was and its one-line error in the
// next snapshot.
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "session/memory_report.h"
#include "session/session.h"

namespace ts {

struct SessionSnapshot {
  uint64_t version = 0;  // grows with every published change
  SessionState state = SessionState::kNoPrompt;
  std::string next_action;
  std::string prompt_text;
  std::vector<TokenSpan> prompt_tokens;
  std::vector<Lane> lanes;
  std::vector<StepTracePtr> history;
  KvOccupancy kv;  // now (also after step back / reset)
  // The draft model's own KV cache now, when the session has a draft model
  // (speculative lanes); its history is not kept per step.
  bool has_draft = false;
  KvOccupancy draft_kv;
  ModelConfig draft_config;  // the draft model's shape (with has_draft)
  ModelConfig config;
  std::string model_name;
  std::string backend;  // "cpu" / "cuda"
  std::string device;
  std::string notice;  // e.g. why CUDA is not used
  bool kv_cache = true;
  int max_new_tokens = 0;
  bool busy = false;     // a command is running
  bool running = false;  // run mode (auto-stepping) is on
  std::string last_error;
  uint64_t error_serial = 0;  // grows with every error, so a front end can tell new ones
  std::shared_ptr<const Tokenizer> tokenizer;  // const calls only (token_bytes, decode)
  // The banned-words stage's tokens while it is on (null: off): the window
  // shows its single-token words masked wherever a token is drawn
  // (app/view_model token_piece), so the words themselves never reach a
  // projector even where the model's raw ranking still lists them.
  std::shared_ptr<const BannedTokens> banned_words;
  MemoryReport memory;  // where memory goes, read when published
};
using SnapshotPtr = std::shared_ptr<const SessionSnapshot>;

class SessionWorker {
 public:
  SessionWorker(std::unique_ptr<Session> session, std::string model_name, std::string notice = {});
  ~SessionWorker();
  SessionWorker(const SessionWorker&) = delete;
  SessionWorker& operator=(const SessionWorker&) = delete;

  SnapshotPtr snapshot() const;

  // Queues fn to run on the worker thread; a ts::Error it throws becomes
  // the snapshot's last_error.
  void post(std::function<void(Session&)> fn);

  // Common commands.
  void set_prompt(std::string text);
  void prefill();
  void step();
  void back();
  void reset();
  void set_strategies(std::vector<SamplingParams> strategies);
  void rechoose(int lane, SamplingParams params);
  // Lanes (see Session): a new lane from `lane` at history step `step` with
  // `token` chosen there; undo one lane's last token; close a lane.
  void branch(int step, int lane, int token);
  void back_lane(int lane);
  void close_lane(int lane);
  // Auto-stepping: one step every 1/steps_per_second seconds until paused,
  // finished, or an error.
  void run(double steps_per_second);
  void pause();

  // Attention of (step, lane, layer), computed on the worker if it was not
  // kept in the trace. Returns true and fills out when ready; otherwise
  // queues the work (once) and returns false: call again on a later frame.
  bool attention(int step, int lane, int layer, std::vector<float>& out);

  // Blocks until the queue is empty and no command runs (tests, screenshots).
  void wait_idle();

 private:
  void loop();
  void publish_locked_session();  // worker thread only

  std::unique_ptr<Session> session_;
  std::string model_name_;
  std::string notice_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::deque<std::function<void(Session&)>> queue_;
  SnapshotPtr snapshot_;
  bool busy_ = false;
  bool stop_ = false;
  bool running_ = false;
  double run_rate_ = 4.0;
  std::string last_error_;
  uint64_t error_serial_ = 0;
  uint64_t version_ = 0;
  struct AttentionKey {
    int step, lane, layer;
    uint64_t history_version;
    bool operator==(const AttentionKey&) const = default;
  };
  std::vector<std::pair<AttentionKey, std::shared_ptr<const std::vector<float>>>> attention_cache_;
  std::vector<AttentionKey> attention_pending_;
  uint64_t history_version_ = 0;  // changes whenever the history is rewritten
  std::thread thread_;
};

}  // namespace ts
