#pragma once
// Random commands through a SessionWorker, as an impatient class would send
// them from the window: prompts of random Unicode (empty, whitespace, longer
// than the context), prefill, step, back, run then pause, branching on the
// model's candidates or on nonsense, closing lanes, re-choosing with valid
// and invalid strategies, the KV cache on and off, reset. After every
// command it checks:
//   - the KV block pool's accounting is exact (reference counts recounted
//     from the block tables, free list, no sequence leaked or missing, each
//     lane's cached length equal to its tokens),
//   - the published snapshot says what the session holds,
//   - a refused command left everything as it was (same history pointers,
//     lanes, prompt, cache tables),
//   - nothing but a ts::Error came out of a command (the worker reports any
//     other exception as "internal error: ...").
// Used by the gtest (1,000 commands, every build) and by the soak program
// (10,000 commands with resident-memory figures).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "session/model_setup.h"
#include "session/session.h"
#include "session/session_worker.h"
#include "util/error.h"

namespace ts::soak {

struct SoakStats {
  int commands = 0;
  int refused = 0;
  std::map<std::string, int> issued;    // command name -> count
  std::map<std::string, int> refusals;  // command name -> refused count
  std::vector<std::string> failures;    // broken invariants (empty: all held)
};

class SoakDriver {
 public:
  SoakDriver(const LoadedModel& model, uint64_t seed, SessionOptions options = {})
      : model_(model), rng_(seed) {
    worker_ = std::make_unique<SessionWorker>(
        std::make_unique<Session>(model.tokenizer, model.engine, options), "soak");
    vocab_ = model.engine->config().vocab_size;
    n_ctx_ = model.engine->config().n_ctx;
    n_layer_ = model.engine->config().n_layer;
  }

  const SoakStats& stats() const { return stats_; }
  SessionWorker& worker() { return *worker_; }

  // Runs n commands; stops early once max_failures invariants broke.
  void run(int n, size_t max_failures = 20) {
    for (int i = 0; i < n && stats_.failures.size() < max_failures; ++i) one_command();
  }

  void one_command() {
    worker_->wait_idle();
    const SnapshotPtr before = worker_->snapshot();
    const std::string name = issue(*before);
    worker_->wait_idle();
    const SnapshotPtr after = worker_->snapshot();
    ++stats_.commands;
    ++stats_.issued[name];
    const std::string where = "command " + std::to_string(stats_.commands) + " (" + name + ")";
    if (after->error_serial != before->error_serial) {
      ++stats_.refused;
      ++stats_.refusals[name];
      if (after->last_error.rfind("internal error", 0) == 0)
        fail(where + ": not a ts::Error: " + after->last_error);
      // A run stops at its first error after taking steps: not a refusal.
      if (name != "run" && fingerprint(*before) != fingerprint(*after))
        fail(where + " was refused (" + after->last_error + ") but changed the session:\n  " +
             fingerprint(*before) + "\n  " + fingerprint(*after));
    }
    check(where);
  }

 private:
  template <class T>
  T uniform(T lo, T hi) {  // inclusive
    return std::uniform_int_distribution<T>(lo, hi)(rng_);
  }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  void fail(const std::string& what) { stats_.failures.push_back(what); }

  static void append_utf8(char32_t cp, std::string& out) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  std::string random_prompt() {
    switch (uniform(0, 7)) {
      case 0:
        return "";
      case 1: {  // whitespace only
        static const char* kSpaces[] = {" ", "\t", "\n", "\r\n", "\u00a0", "\u3000", "\u2028"};
        std::string s;
        for (int i = uniform(1, 6); i > 0; --i) s += kSpaces[uniform(0, 6)];
        return s;
      }
      case 2: {  // longer than the context
        std::string s;
        for (int i = 0; i < n_ctx_ + uniform(1, 20); ++i) s += " the";
        return s;
      }
      case 3: {  // random code points from many scripts (never a surrogate)
        static const std::pair<char32_t, char32_t> kRanges[] = {
            {0x20, 0x7e},       {0x01, 0x1f},       {0xa0, 0x24f},    {0x370, 0x3ff},
            {0x400, 0x4ff},     {0x590, 0x6ff},     {0x900, 0x97f},   {0x300, 0x36f},
            {0x3040, 0x30ff},   {0x4e00, 0x9fff},   {0xac00, 0xd7a3}, {0xe000, 0xf8ff},
            {0x1f300, 0x1faff}, {0x10000, 0x10ffff}};
        std::string s;
        for (int i = uniform(1, 40); i > 0; --i) {
          const auto& r = kRanges[uniform(0, 13)];
          append_utf8(uniform<uint32_t>(r.first, r.second), s);
        }
        return s;
      }
      default: {
        static const char* kPrompts[] = {"The cat sat on the", "Once upon a time",
                                         "Hello there, my friend. It's", "1, 2, 3, 4,",
                                         "<|endoftext|>The"};
        return kPrompts[uniform(0, 4)];
      }
    }
  }

  SamplingParams random_params(bool* valid) {
    SamplingParams p;
    *valid = true;
    switch (uniform(0, 9)) {
      case 0:
        break;  // greedy
      case 1:
        p.repetition_penalty = 1.3f;
        break;
      case 2:
        p.do_sample = true;
        p.top_p = 0.9f;
        p.seed = uniform<uint64_t>(0, 100);
        break;
      case 3:
        p.do_sample = true;
        p.top_k = uniform(1, 50);
        p.temperature = 0.7f;
        break;
      case 4:
        p.do_sample = true;
        p.min_p = 0.05f;
        p.seed = uniform<uint64_t>(0, 100);
        break;
      case 5:
        p.num_beams = uniform(2, 4);
        break;
      default: {  // invalid: validate() must refuse each
        *valid = false;
        switch (uniform(0, 5)) {
          case 0:
            p.do_sample = true;
            p.temperature = -1.0f;
            break;
          case 1:
            p.do_sample = true;
            p.top_p = 2.0f;
            break;
          case 2:
            p.top_k = -3;
            break;
          case 3:
            p.num_beams = 99;
            break;
          case 4:
            p.repetition_penalty = std::numeric_limits<float>::quiet_NaN();
            break;
          default:
            p.num_beams = 3;
            p.do_sample = true;
            break;
        }
      }
    }
    return p;
  }

  // A token from the candidates of a step's record (often), else anything.
  int random_token(const SessionSnapshot& s, int step, int lane) {
    if (chance(0.7)) {
      const LaneStep* rec = step >= 0 && step < static_cast<int>(s.history.size())
                                ? lane_record(s.history, s.lanes, step, lane)
                                : nullptr;
      if (rec && !rec->logits.empty()) {
        std::vector<int> order(rec->logits.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
        const int k = std::min<int>(8, static_cast<int>(order.size()));
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          [&](int a, int b) { return rec->logits[a] > rec->logits[b]; });
        return order[uniform(0, k - 1)];
      }
    }
    return uniform(-3, vocab_ + 3);
  }

  // Issues one random command; returns its name.
  std::string issue(const SessionSnapshot& s) {
    const int lanes = static_cast<int>(s.lanes.size());
    const int steps = static_cast<int>(s.history.size());
    const int r = uniform(0, 99);
    if (r < 8) {
      worker_->set_prompt(random_prompt());
      return "set_prompt";
    }
    if (r < 16) {
      worker_->prefill();
      return "prefill";
    }
    if (r < 40) {
      worker_->step();
      return "step";
    }
    if (r < 50) {
      worker_->back();
      return "back";
    }
    if (r < 54) {
      worker_->run(chance(0.5) ? 1000.0 : 200.0);
      std::this_thread::sleep_for(std::chrono::milliseconds(uniform(0, 8)));
      worker_->pause();
      return "run";
    }
    if (r < 63) {
      const int step = uniform(-1, steps);
      const int lane = uniform(-1, lanes);
      worker_->branch(step, lane, random_token(s, step, lane));
      return "branch";
    }
    if (r < 67) {
      worker_->back_lane(uniform(-1, lanes));
      return "back_lane";
    }
    if (r < 72) {
      worker_->close_lane(uniform(-1, lanes));
      return "close_lane";
    }
    if (r < 81) {
      bool valid = true;
      worker_->rechoose(uniform(-1, lanes), random_params(&valid));
      return valid ? "rechoose" : "rechoose_invalid";
    }
    if (r < 85) {
      std::vector<SamplingParams> list;
      bool all_valid = true;
      for (int i = uniform(0, 3) == 0 ? uniform(0, 10) : uniform(1, 3); i > 0; --i) {
        bool valid = true;
        list.push_back(random_params(&valid));
        all_valid = all_valid && valid;
      }
      all_valid = all_valid && !list.empty() && list.size() <= static_cast<size_t>(kMaxLanes);
      worker_->set_strategies(list);
      return all_valid ? "set_strategies" : "set_strategies_invalid";
    }
    if (r < 90) {
      const bool on = !s.kv_cache;
      worker_->post([on](Session& ses) { ses.set_kv_cache(on); });
      return "toggle_kv_cache";
    }
    if (r < 94) {
      worker_->reset();
      return "reset";
    }
    if (r < 96) {
      const int n = uniform(-1, 80);
      worker_->post([n](Session& ses) { ses.set_max_new_tokens(n); });
      return "set_max_new_tokens";
    }
    std::vector<float> att;
    worker_->attention(uniform(-1, steps), uniform(-1, lanes), uniform(-1, n_layer_), att);
    return "attention";
  }

  // Everything a refusal must leave alone, as text.
  static std::string fingerprint(const SessionSnapshot& s) {
    std::ostringstream o;
    o << "state=" << state_name(s.state) << " prompt=" << s.prompt_text.size() << "B/"
      << s.prompt_tokens.size() << "t kv=" << s.kv_cache << " max=" << s.max_new_tokens
      << " history=[";
    for (const auto& h : s.history) o << h.get() << ' ';
    o << "] lanes=[";
    for (const Lane& l : s.lanes) {
      o << "{" << l.id << " seq=" << l.seq << " gen=" << l.generated.size();
      for (int t : l.generated) o << ',' << t;
      o << " stop=" << l.stop_reason << " closed=" << l.closed << " parent=" << l.parent
        << " beams=" << l.beam_seqs.size() << " T=" << l.params.temperature
        << " sample=" << l.params.do_sample << " nb=" << l.params.num_beams << "}";
    }
    o << "] blocks=" << s.kv.blocks_used << "/" << s.kv.blocks_shared << " seqs=[";
    for (const auto& q : s.kv.sequences) {
      o << q.id << ':' << q.tokens << '(';
      for (int b : q.block_table) o << b << ' ';
      o << ')';
    }
    o << "]";
    return o.str();
  }

  // Runs on the worker thread: the session's own view, checked there.
  struct Facts {
    std::vector<std::string> broken;
    SessionState state{};
    size_t history = 0, lanes = 0;
    std::string prompt;
    int blocks_used = 0;
    std::vector<size_t> generated;
  };

  void check(const std::string& where) {
    auto facts = std::make_shared<Facts>();
    worker_->post([facts](Session& s) {
      const KvCacheManager& cache = s.engine().cache();
      try {
        cache.check_invariants();
      } catch (const Error& e) {
        facts->broken.push_back(std::string("block pool: ") + e.what());
      }
      std::set<SeqId> expected;
      const int prompt = static_cast<int>(s.prompt_tokens().size());
      for (const Lane& l : s.lanes()) {
        if (l.closed && (l.seq >= 0 || !l.beam_seqs.empty()))
          facts->broken.push_back("closed lane " + std::to_string(l.id) + " holds a sequence");
        if (l.seq >= 0) expected.insert(l.seq);
        for (SeqId q : l.beam_seqs) expected.insert(q);
        if (!l.closed && !l.beam_search() && l.seq >= 0 && cache.contains(l.seq)) {
          const int want = prompt + static_cast<int>(l.generated.size()) - 1;
          if (cache.length(l.seq) != want)
            facts->broken.push_back("lane " + std::to_string(l.id) + " caches " +
                                    std::to_string(cache.length(l.seq)) + " tokens, holds " +
                                    std::to_string(want));
        }
        if (s.options().kv_cache && !l.closed && !s.history().empty() && !l.beam_search() &&
            l.seq < 0)
          facts->broken.push_back("open lane " + std::to_string(l.id) + " has no sequence");
      }
      const std::vector<SeqId> live = cache.sequences();
      const std::set<SeqId> live_set(live.begin(), live.end());
      if (live_set != expected) {
        std::string a, b;
        for (SeqId q : live_set) a += std::to_string(q) + " ";
        for (SeqId q : expected) b += std::to_string(q) + " ";
        facts->broken.push_back("live sequences {" + a + "} but lanes hold {" + b + "}");
      }
      if (s.history().empty() != s.lanes().empty())
        facts->broken.push_back("history and lanes disagree on emptiness");
      facts->state = s.state();
      facts->history = s.history().size();
      facts->lanes = s.lanes().size();
      facts->prompt = s.prompt_text();
      facts->blocks_used = cache.occupancy().blocks_used;
      for (const Lane& l : s.lanes()) facts->generated.push_back(l.generated.size());
    });
    worker_->wait_idle();
    const SnapshotPtr snap = worker_->snapshot();
    for (const std::string& b : facts->broken) fail(where + ": " + b);
    std::vector<size_t> generated;
    for (const Lane& l : snap->lanes) generated.push_back(l.generated.size());
    if (snap->state != facts->state || snap->history.size() != facts->history ||
        snap->lanes.size() != facts->lanes || snap->prompt_text != facts->prompt ||
        snap->kv.blocks_used != facts->blocks_used || generated != facts->generated)
      fail(where + ": the snapshot differs from the session");
    if (snap->busy || snap->running) fail(where + ": idle worker reports busy/running");
  }

  const LoadedModel& model_;
  std::mt19937_64 rng_;
  std::unique_ptr<SessionWorker> worker_;
  int vocab_ = 0, n_ctx_ = 0, n_layer_ = 0;
  SoakStats stats_;
};

}  // namespace ts::soak
