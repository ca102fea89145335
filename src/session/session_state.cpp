// What a session holds and will do next (its state, lanes and the next
// action's words), and the settings that change it before a step: prompt,
// strategies, token limit, banned words, draft model, KV cache switch.
#include "session/session.h"

#include <algorithm>

#include "session/dola_lane.h"
#include "session/speculative_lane.h"
#include "util/error.h"

namespace ts {

const char* state_name(SessionState state) {
  switch (state) {
    case SessionState::kNoPrompt:
      return "no prompt";
    case SessionState::kReady:
      return "ready for prefill";
    case SessionState::kPaused:
      return "paused";
    case SessionState::kFinished:
      return "finished";
  }
  return "?";
}

Session::Session(std::shared_ptr<const Tokenizer> tokenizer, std::shared_ptr<Engine> engine,
                 SessionOptions options)
    : tokenizer_(std::move(tokenizer)), engine_(std::move(engine)), options_(options) {
  if (!tokenizer_ || !engine_) throw Error("session: tokenizer and engine are required");
  if (tokenizer_->vocab_size() != engine_->config().vocab_size)
    throw Error("tokenizer has " + std::to_string(tokenizer_->vocab_size()) +
                " tokens but the model's vocab_size is " +
                std::to_string(engine_->config().vocab_size));
  set_max_new_tokens(options_.max_new_tokens);
}

void Session::set_prompt(std::string_view text) {
  if (text.empty()) throw Error("prompt is empty");
  std::vector<TokenSpan> tokens = tokenizer_->encode_prompt(text);
  if (tokens.empty()) throw Error("prompt is empty");
  const int n_ctx = engine_->config().n_ctx;
  if (static_cast<int>(tokens.size()) > n_ctx)
    throw Error("prompt has " + std::to_string(tokens.size()) +
                " tokens; the model's context holds " + std::to_string(n_ctx));
  release_lanes();
  prompt_text_ = std::string(text);
  prompt_tokens_ = std::move(tokens);
}

void Session::set_strategies(const std::vector<SamplingParams>& strategies) {
  if (strategies.empty() || static_cast<int>(strategies.size()) > kMaxLanes)
    throw Error("lanes: between 1 and " + std::to_string(kMaxLanes) + " strategies");
  for (const SamplingParams& p : strategies) {
    p.validate();
    if (p.dola()) dola_layers_for(p, engine_->config());  // layers the model has
  }
  if (!history_.empty()) throw Error("lanes can change only before prefill (press Reset first)");
  strategies_ = strategies;
}

void Session::set_max_new_tokens(int n) {
  if (n <= 0) throw Error("max new tokens must be positive");
  options_.max_new_tokens = n;
}

void Session::set_banned_words(std::shared_ptr<const BannedTokens> banned) {
  banned_words_ = std::move(banned);
}

void Session::set_draft_engine(std::shared_ptr<Engine> draft) {
  if (!history_.empty())
    throw Error("the draft model can change only before prefill (press Reset first)");
  if (draft) {
    const std::string mismatch = spec_vocab_mismatch(engine_->config(), draft->config());
    if (!mismatch.empty()) throw Error(mismatch);
  }
  draft_engine_ = std::move(draft);
}

void Session::set_kv_cache(bool enabled) {
  if (!history_.empty()) throw Error("the KV cache can be switched only before prefill");
  options_.kv_cache = enabled;
}

std::vector<int> Session::prompt_ids() const {
  std::vector<int> ids;
  ids.reserve(prompt_tokens_.size());
  for (const TokenSpan& t : prompt_tokens_) ids.push_back(t.id);
  return ids;
}

const Lane& Session::lane_at(int lane) const {
  if (lane < 0 || lane >= static_cast<int>(lanes_.size()))
    throw Error("no lane " + std::to_string(lane));
  return lanes_[lane];
}

int Session::open_lanes() const {
  return static_cast<int>(
      std::count_if(lanes_.begin(), lanes_.end(), [](const Lane& l) { return !l.closed; }));
}

std::vector<int> Session::lane_tokens(int lane) const {
  std::vector<int> ids = prompt_ids();
  const std::vector<int>& generated = lane_at(lane).generated;
  ids.insert(ids.end(), generated.begin(), generated.end());
  return ids;
}

SessionState Session::state() const {
  if (prompt_tokens_.empty()) return SessionState::kNoPrompt;
  if (history_.empty()) return SessionState::kReady;
  for (const Lane& lane : lanes_)
    if (lane.running()) return SessionState::kPaused;
  return SessionState::kFinished;
}

bool Session::can_step() const {
  const SessionState s = state();
  return s == SessionState::kReady || s == SessionState::kPaused;
}

std::string Session::uncached_feed() const {
  // Exactly what the next step feeds: every sequence whole (each open beam,
  // each contrastive candidate), as forward_requests runs them.
  const std::vector<DecodeRequest> requests = gather_requests();
  int total = 0;
  for (const DecodeRequest& r : requests) total += static_cast<int>(r.context.size());
  if (requests.empty()) return "recomputes nothing (no lane runs)";
  const int prompt = static_cast<int>(prompt_tokens_.size());
  if (requests.size() == 1)
    return "recomputes all " + std::to_string(total) + " tokens (the prompt's " +
           std::to_string(prompt) + " and the " +
           std::to_string(requests[0].context.size() - prompt_tokens_.size()) + " chosen so far)";
  // Per lane: its sequences (of one length: a lane's beams or candidates
  // grow together) times their length.
  std::string lanes;
  for (size_t i = 0; i < requests.size();) {
    size_t j = i;
    while (j < requests.size() && requests[j].lane == requests[i].lane) ++j;
    const Lane& lane = lanes_[requests[i].lane];
    const std::string n = std::to_string(requests[i].context.size());
    const std::string what = lane.beam_search() ? " beams" : " candidates";
    if (!lanes.empty()) lanes += "; ";
    lanes += "lane " + std::to_string(lane.id) + ": " +
             (j - i > 1 ? std::to_string(j - i) + what + " \u00D7 " + n : n);
    i = j;
  }
  return "recomputes " + std::to_string(total) + " tokens in all (" + lanes + ")";
}

std::string Session::next_action() const {
  switch (state()) {
    case SessionState::kNoPrompt:
      return "enter a prompt";
    case SessionState::kReady:
      return "prefill: " + std::to_string(prompt_tokens_.size()) + " tokens in one pass";
    case SessionState::kFinished: {
      std::string reasons;
      for (const Lane& lane : lanes_) {
        if (!reasons.empty()) reasons += "; ";
        if (lanes_.size() > 1) reasons += "lane " + std::to_string(lane.id) + ": ";
        reasons += lane.stop_reason;
      }
      return "finished: " + reasons;
    }
    case SessionState::kPaused:
      break;
  }
  int running = 0, cached = 0, sequences = 0;
  for (const Lane& lane : lanes_) {
    if (!lane.running()) continue;
    ++running;
    sequences += lane.beam_search()   ? static_cast<int>(lane.beams->beams.size())
                 : lane.contrastive() ? lane.params.contrastive_k
                                      : 1;
    // A contrastive lane's last token is cached already (it ran as a candidate).
    cached = std::max(cached, static_cast<int>(prompt_tokens_.size() + lane.generated.size()) -
                                  (lane.contrastive() ? 0 : 1));
  }
  // Every open beam and every contrastive candidate is a sequence of its own
  // in the batched step.
  const std::string beams = sequences > running ? " (" + std::to_string(sequences) +
                                                      " sequences: one per beam or candidate)"
                                                : "";
  std::string step = "decode step " + std::to_string(history_.size());
  if (std::any_of(lanes_.begin(), lanes_.end(),
                  [](const Lane& l) { return l.running() && l.speculative(); }))
    step +=
        " (speculative lanes: one round each, the draft proposes and the target verifies "
        "in one pass)";
  if (!options_.kv_cache) return step + ": KV cache off, " + uncached_feed();
  if (running > 1 || sequences > 1)
    return step + ": 1 token for each of " + std::to_string(running) + " lane" +
           (running > 1 ? "s" : "") + beams + ", reads up to " + std::to_string(cached) +
           " cached positions";
  return step + ": 1 token, reads " + std::to_string(cached) + " cached positions";
}

}  // namespace ts
