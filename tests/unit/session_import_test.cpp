// Reading an exported session back: the records equal the live session's
// (attention within half precision), stepping through it gives the live
// session's state at each step, and every broken or hostile file is refused
// with one line naming the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "kv_occupancy_check.h"
#include "sampling/banned_words.h"
#include "sampling/sampling_pipeline.h"
#include "session/lane_summary.h"
#include "session/replay_codec.h"
#include "session/session.h"
#include "session/session_export.h"
#include "session/session_import.h"
#include "test_models.h"
#include "util/error.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::shared_ptr<const BannedTokens> banned_list(int vocab) {
  BannedWordList list;
  list.source = "test list";
  list.entries = {"a", "b"};
  const std::map<std::string, std::vector<int>> by_text = {{"a", {5}}, {"b", {7, 8}}};
  return std::make_shared<const BannedTokens>(build_banned_tokens(
      list,
      [&](std::string_view t) {
        auto it = by_text.find(std::string(t));
        return it == by_text.end() ? std::vector<int>{} : it->second;
      },
      vocab, -1));
}

// Each lane's generated tokens now.
std::vector<std::vector<int>> lanes_generated(const Session& s) {
  std::vector<std::vector<int>> g;
  for (const Lane& l : s.lanes()) g.push_back(l.generated);
  return g;
}

// A session with every kind of record: a greedy lane, a sampling lane, beam
// search, contrastive search, the banned-words stage, and a branch.
struct Recorded {
  LoadedModel model;
  std::unique_ptr<Session> session;
  // Each lane's generated tokens after each history step (index = step).
  std::vector<std::vector<std::vector<int>>> generated;
};

Recorded& recorded() {
  static Recorded r = [] {
    Recorded rec;
    rec.model = test::load_tiny(16);
    rec.session =
        std::make_unique<Session>(rec.model.tokenizer, rec.model.engine, SessionOptions{});
    Session& s = *rec.session;
    s.set_prompt("The cat sat on the mat.");
    s.set_strategies({SamplingParams{}, parse_strategy("top_p=0.9,temperature=0.8,seed=3"),
                      parse_strategy("beams=2"), parse_strategy("contrastive=4,alpha=0.6")});
    s.set_banned_words(banned_list(rec.model.engine->config().vocab_size));
    auto note = [&] { rec.generated.push_back(lanes_generated(s)); };
    s.prefill();
    note();
    for (int i = 0; i < 3; ++i) {
      s.step();
      note();
    }
    const int token =
        (s.history()[2]->lanes[0].chosen_token + 1) % rec.model.engine->config().vocab_size;
    s.branch(2, 0, token);
    for (int i = 0; i < 2; ++i) {
      s.step();
      note();
    }
    return rec;
  }();
  return r;
}

std::string exported_text() {
  // Token pieces can be partial UTF-8: replaced, as the file writer does.
  static const std::string text =
      session_to_json(*recorded().session).dump(-1, ' ', false, json::error_handler_t::replace);
  return text;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return false;
  return true;
}

// Half precision: relative 2^-11, absolute 2^-25 for the subnormal range.
void expect_attention_near(const LaneStep& want, const LaneStep& got) {
  ASSERT_EQ(want.attention.size(), got.attention.size());
  for (size_t l = 0; l < want.attention.size(); ++l) {
    ASSERT_EQ(want.attention[l] == nullptr, got.attention[l] == nullptr) << "layer " << l;
    if (!want.attention[l]) continue;
    const auto& a = *want.attention[l];
    const auto& b = *got.attention[l];
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      ASSERT_LE(std::fabs(a[i] - b[i]), std::max(std::fabs(a[i]) * 0x1p-11f, 0x1p-25f))
          << "layer " << l << " value " << i << ": " << a[i] << " vs " << b[i];
  }
}

void expect_same_beam_state(const BeamSearchState& a, const BeamSearchState& b) {
  ASSERT_EQ(a.beams.size(), b.beams.size());
  for (size_t i = 0; i < a.beams.size(); ++i) {
    EXPECT_EQ(a.beams[i].tokens, b.beams[i].tokens);
    EXPECT_TRUE(same_bits(a.beams[i].token_log_probs, b.beams[i].token_log_probs));
    EXPECT_EQ(a.beams[i].sum_log_prob, b.beams[i].sum_log_prob);
  }
  ASSERT_EQ(a.finished.size(), b.finished.size());
  for (size_t i = 0; i < a.finished.size(); ++i) {
    EXPECT_EQ(a.finished[i].tokens, b.finished[i].tokens);
    EXPECT_EQ(a.finished[i].score, b.finished[i].score);
    EXPECT_EQ(a.finished[i].ended_by_eos, b.finished[i].ended_by_eos);
  }
  EXPECT_EQ(a.done, b.done);
  EXPECT_EQ(a.steps, b.steps);
}

void expect_same_record(const LaneStep& want, const LaneStep& got) {
  EXPECT_EQ(want.lane, got.lane);
  EXPECT_EQ(want.input_tokens, got.input_tokens);
  EXPECT_EQ(want.start_pos, got.start_pos);
  EXPECT_EQ(want.slots_written, got.slots_written);
  EXPECT_EQ(want.blocks_copied, got.blocks_copied);
  EXPECT_EQ(want.context_ids, got.context_ids);
  EXPECT_TRUE(same_bits(want.logits, got.logits)) << "logits differ";
  EXPECT_EQ(want.params, got.params);
  EXPECT_EQ(want.step_index, got.step_index);
  EXPECT_EQ(want.chosen_token, got.chosen_token);
  EXPECT_EQ(want.chosen_prob, got.chosen_prob);
  EXPECT_EQ(want.uniform, got.uniform);
  EXPECT_EQ(want.kept_tokens, got.kept_tokens);
  EXPECT_EQ(want.entropy, got.entropy);
  ASSERT_EQ(want.banned_words == nullptr, got.banned_words == nullptr);
  if (want.banned_words) {
    EXPECT_EQ(want.banned_words->sequences, got.banned_words->sequences);
    EXPECT_EQ(want.banned_words->singles, got.banned_words->singles);
    EXPECT_EQ(want.banned_words->multi, got.banned_words->multi);
    EXPECT_EQ(want.banned_words->source, got.banned_words->source);
  }
  expect_attention_near(want, got);
  // The Choosing panel's stages, recomputed from each side's record, are the same.
  const SamplingRecord a = sample_next(want.logits, want.context_ids, want.params, want.step_index,
                                       want.banned_words.get());
  const SamplingRecord b =
      sample_next(got.logits, got.context_ids, got.params, got.step_index, got.banned_words.get());
  ASSERT_EQ(a.stages.size(), b.stages.size());
  for (size_t i = 0; i < a.stages.size(); ++i) {
    EXPECT_EQ(a.stages[i].kept, b.stages[i].kept) << a.stages[i].name;
    EXPECT_EQ(a.stages[i].removed_ids_here, b.stages[i].removed_ids_here) << a.stages[i].name;
    EXPECT_TRUE(same_bits(a.stages[i].logits, b.stages[i].logits)) << a.stages[i].name;
  }
  EXPECT_EQ(a.draw.chosen_token, b.draw.chosen_token);
  EXPECT_TRUE(same_bits(a.final_probs, b.final_probs));
  ASSERT_EQ(want.beam == nullptr, got.beam == nullptr);
  if (want.beam) {
    ASSERT_EQ(want.beam->candidates.size(), got.beam->candidates.size());
    for (size_t i = 0; i < want.beam->candidates.size(); ++i) {
      const BeamCandidate& x = want.beam->candidates[i];
      const BeamCandidate& y = got.beam->candidates[i];
      EXPECT_EQ(x.parent, y.parent);
      EXPECT_EQ(x.token, y.token);
      EXPECT_EQ(x.log_prob, y.log_prob);
      EXPECT_EQ(x.sum_log_prob, y.sum_log_prob);
      EXPECT_EQ(x.fate, y.fate);
      EXPECT_EQ(x.new_beam, y.new_beam);
    }
    expect_same_beam_state(*want.beam->before, *got.beam->before);
    expect_same_beam_state(*want.beam->after, *got.beam->after);
    ASSERT_EQ(want.beam->final.size(), got.beam->final.size());
  }
  ASSERT_EQ(want.contrastive == nullptr, got.contrastive == nullptr);
  if (want.contrastive) {
    const ContrastiveStep& x = *want.contrastive;
    const ContrastiveStep& y = *got.contrastive;
    EXPECT_EQ(x.k, y.k);
    EXPECT_EQ(x.alpha, y.alpha);
    EXPECT_EQ(x.chosen, y.chosen);
    EXPECT_EQ(x.positions, y.positions);
    EXPECT_TRUE(same_bits(x.similarity, y.similarity));
    ASSERT_EQ(x.candidates.size(), y.candidates.size());
    for (size_t i = 0; i < x.candidates.size(); ++i) {
      EXPECT_EQ(x.candidates[i].token, y.candidates[i].token);
      EXPECT_EQ(x.candidates[i].prob, y.candidates[i].prob);
      EXPECT_EQ(x.candidates[i].penalty, y.candidates[i].penalty);
      EXPECT_EQ(x.candidates[i].similar_pos, y.candidates[i].similar_pos);
      EXPECT_EQ(x.candidates[i].score, y.candidates[i].score);
    }
  }
}

void expect_same_session(const Session& live, const ImportedSession& got) {
  const SessionSnapshot& snap = got.full;
  EXPECT_EQ(snap.prompt_text, live.prompt_text());
  ASSERT_EQ(snap.prompt_tokens.size(), live.prompt_tokens().size());
  for (size_t i = 0; i < snap.prompt_tokens.size(); ++i) {
    EXPECT_EQ(snap.prompt_tokens[i].id, live.prompt_tokens()[i].id);
    EXPECT_EQ(snap.prompt_tokens[i].byte_end, live.prompt_tokens()[i].byte_end);
  }
  EXPECT_EQ(snap.config.n_layer, live.engine().config().n_layer);
  EXPECT_EQ(snap.config.vocab_size, live.engine().config().vocab_size);
  EXPECT_EQ(snap.state, live.state());
  ASSERT_TRUE(snap.tokenizer);
  for (int id = 0; id < live.tokenizer().vocab_size(); ++id)
    ASSERT_EQ(snap.tokenizer->token_bytes(id), live.tokenizer().token_bytes(id)) << id;
  ASSERT_EQ(snap.lanes.size(), live.lanes().size());
  for (size_t i = 0; i < snap.lanes.size(); ++i) {
    const Lane& a = live.lanes()[i];
    const Lane& b = snap.lanes[i];
    EXPECT_EQ(a.params, b.params);
    EXPECT_EQ(a.generated, b.generated);
    EXPECT_EQ(a.stop_reason, b.stop_reason);
    EXPECT_EQ(a.parent, b.parent);
    EXPECT_EQ(a.branch_step, b.branch_step);
    EXPECT_EQ(a.first_step, b.first_step);
    ASSERT_EQ(a.branch_record == nullptr, b.branch_record == nullptr);
    if (a.branch_record) expect_same_record(*a.branch_record, *b.branch_record);
  }
  ASSERT_EQ(snap.history.size(), live.history().size());
  for (size_t s = 0; s < snap.history.size(); ++s) {
    SCOPED_TRACE("step " + std::to_string(s));
    const StepTrace& a = *live.history()[s];
    const StepTrace& b = *snap.history[s];
    EXPECT_EQ(a.index, b.index);
    EXPECT_EQ(a.phase, b.phase);
    EXPECT_EQ(a.seconds, b.seconds);
    EXPECT_EQ(a.cost.flops, b.cost.flops);
    EXPECT_EQ(a.cost.bytes(), b.cost.bytes());
    EXPECT_EQ(a.backend, b.backend);
    EXPECT_EQ(a.kv_cache, b.kv_cache);
    EXPECT_EQ(a.recomputed_tokens, b.recomputed_tokens);
    test::expect_same_kv_occupancy(a.kv_after, b.kv_after);
    ASSERT_EQ(a.lanes.size(), b.lanes.size());
    for (size_t l = 0; l < a.lanes.size(); ++l) {
      SCOPED_TRACE("lane record " + std::to_string(l));
      expect_same_record(a.lanes[l], b.lanes[l]);
    }
  }
}

// The one-line refusal, naming the file.
void expect_refused(const std::string& text, const std::string& needle) {
  try {
    import_session_text(text, "bad.json");
    ADD_FAILURE() << "accepted; expected an error containing: " << needle;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("bad.json: ", 0), 0u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what << "\nexpected: " << needle;
  }
}

json exported_json() { return json::parse(exported_text()); }

// Edited documents are dumped the same way.
std::string dump(const json& doc) {
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

TEST(SessionImport, RoundTripEqualsTheRecords) {
  const Recorded& rec = recorded();
  ASSERT_EQ(rec.session->history().size(), 6u);
  bool beam = false, contrastive = false, banned = false;
  for (const StepTracePtr& s : rec.session->history())
    for (const LaneStep& ls : s->lanes) {
      beam |= ls.beam != nullptr;
      contrastive |= ls.contrastive != nullptr;
      banned |= ls.banned_words != nullptr;
    }
  ASSERT_TRUE(beam && contrastive && banned) << "the session lacks a kind of record";
  expect_same_session(*rec.session, import_session_text(exported_text(), "mem.json"));
}

TEST(SessionImport, FileWrittenStepByStepReadsBack) {
  const fs::path file =
      fs::temp_directory_path() / ("ts-import-" + std::to_string(getpid()) + ".json");
  write_session_json(*recorded().session, file);
  const ImportedSession got = import_session_file(file);
  fs::remove(file);
  EXPECT_EQ(got.file, file.string());
  expect_same_session(*recorded().session, got);
}

TEST(SessionImport, SteppingGivesTheLiveStateAtEachStep) {
  const Recorded& rec = recorded();
  const ImportedSession got = import_session_text(exported_text(), "mem.json");
  const int n = static_cast<int>(rec.session->history().size());
  const SnapshotPtr before = replay_snapshot(got, -1, 1);
  EXPECT_EQ(before->state, SessionState::kReady);
  EXPECT_TRUE(before->history.empty());
  EXPECT_EQ(before->kv.blocks_used, 0);
  for (int c = 0; c < n; ++c) {
    SCOPED_TRACE("cursor " + std::to_string(c));
    const SnapshotPtr s = replay_snapshot(got, c, 2 + c);
    EXPECT_EQ(s->version, static_cast<uint64_t>(2 + c));
    ASSERT_EQ(s->history.size(), static_cast<size_t>(c + 1));
    for (int k = 0; k <= c; ++k) EXPECT_EQ(s->history[k], got.full.history[k]);
    test::expect_same_kv_occupancy(s->kv, rec.session->history()[c]->kv_after);
    // Lanes that existed then, with the tokens they had.
    ASSERT_EQ(s->lanes.size(), rec.generated[c].size());
    for (size_t l = 0; l < s->lanes.size(); ++l)
      EXPECT_EQ(s->lanes[l].generated, rec.generated[c][l]) << "lane " << l;
  }
  EXPECT_EQ(replay_snapshot(got, n + 5, 9)->history.size(), static_cast<size_t>(n));
  // Before the last step there is more to step through; at the last one the
  // replay has finished (the live session was paused there, not finished).
  EXPECT_EQ(rec.session->state(), SessionState::kPaused);
  EXPECT_EQ(replay_snapshot(got, n - 2, 10)->state, SessionState::kPaused);
  const SnapshotPtr end = replay_snapshot(got, n - 1, 11);
  EXPECT_EQ(end->state, SessionState::kFinished);
  EXPECT_EQ(end->next_action, "the end of the recorded session (step 6 of 6)");
}

// Every lane's summary from the re-opened records is the live one.
void expect_same_summaries(const Session& live, const ImportedSession& got) {
  for (int l = 0; l < static_cast<int>(live.lanes().size()); ++l) {
    const LaneSummary a = summarize_lane(live, l);
    const LaneSummary b = summarize_lane(got.full.history, got.full.lanes, l);
    EXPECT_EQ(a.tokens, b.tokens) << l;
    EXPECT_EQ(a.log_prob, b.log_prob) << l;
    EXPECT_EQ(a.seconds, b.seconds) << l;
    EXPECT_GT(a.tokens, 0) << l;
  }
}

TEST(SessionImport, LaneSummariesFromTheRecordsAreTheLiveOnes) {
  expect_same_summaries(*recorded().session, import_session_text(exported_text(), "mem.json"));
}

// Which lane and beam held each cache sequence reads back as recorded;
// a file from before it was stored reads without it, and an owner of a
// sequence the step's cache does not hold is refused.
TEST(SessionImport, SequenceOwnersReadBackAndAreChecked) {
  const Session& live = *recorded().session;
  const ImportedSession got = import_session_text(exported_text(), "mem.json");
  ASSERT_EQ(got.full.history.size(), live.history().size());
  for (size_t i = 0; i < live.history().size(); ++i) {
    const auto& want = live.history()[i]->kv_owners;
    const auto& have = got.full.history[i]->kv_owners;
    // Lane 0, the sampled lane, 2 beams, the contrastive lane (and the branch).
    EXPECT_GE(want.size(), 5u) << "step " << i;
    ASSERT_EQ(have.size(), want.size()) << "step " << i;
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(have[k].seq, want[k].seq);
      EXPECT_EQ(have[k].lane, want[k].lane);
      EXPECT_EQ(have[k].beam, want[k].beam);
    }
  }
  json doc = exported_json();
  for (json& step : doc["steps"]) step["replay"].erase("kv_owners");
  const ImportedSession old = import_session_text(dump(doc), "old.json");
  EXPECT_TRUE(old.full.history.back()->kv_owners.empty());
  doc = exported_json();
  doc["steps"][1]["replay"]["kv_owners"][0]["seq"] = 999999;
  expect_refused(dump(doc), "steps[1].replay.kv_owners[0].seq: sequence 999999 is not in");
}

TEST(SessionImport, AnotherVersionIsRefused) {
  json doc = exported_json();
  doc["format"] = "tokenscope-session/1";
  expect_refused(dump(doc),
                 "format tokenscope-session/1, this TokenScope reads tokenscope-session/2");
  doc["format"] = "something-else";
  expect_refused(dump(doc), "not a TokenScope session file");
  doc.erase("format");
  expect_refused(dump(doc), "not a TokenScope session file");
  expect_refused("[1, 2, 3]", "not a TokenScope session file");
}

TEST(SessionImport, TruncatedFilesAreRefused) {
  const std::string text = exported_text();
  for (double cut : {0.0, 0.001, 0.1, 0.5, 0.9, 0.999}) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    expect_refused(text.substr(0, static_cast<size_t>(text.size() * cut)),
                   "not a complete JSON document (truncated or corrupt)");
  }
  expect_refused(text.substr(0, text.size() - 1), "truncated or corrupt");
}

TEST(SessionImport, CorruptFieldsAreRefused) {
  const json good = exported_json();
  const int vocab = good["model"]["vocab_size"].get<int>();
  auto with = [&](auto edit) {
    json doc = good;
    edit(doc);
    return dump(doc);
  };
  expect_refused(with([](json& d) { d["steps"][1]["replay"]["lanes"][0]["logits"] = "!!!!"; }),
                 "steps[1].replay.lanes[0].logits: expected " + std::to_string(vocab) +
                     " float32 values in base64");
  expect_refused(with([](json& d) {
                   std::string s = d["steps"][1]["replay"]["lanes"][0]["logits"];
                   d["steps"][1]["replay"]["lanes"][0]["logits"] = s.substr(0, s.size() - 8);
                 }),
                 "steps[1].replay.lanes[0].logits: expected");
  expect_refused(with([](json& d) {
                   std::string s = d["steps"][0]["replay"]["lanes"][0]["attention"][0];
                   d["steps"][0]["replay"]["lanes"][0]["attention"][0] = s + "AAAA";
                 }),
                 ".attention[0]: expected");
  expect_refused(
      with([&](json& d) { d["steps"][2]["replay"]["lanes"][0]["context_ids"][0] = vocab; }),
      "steps[2].replay.lanes[0].context_ids[0]: " + std::to_string(vocab) + " is outside 0..");
  expect_refused(with([](json& d) { d["steps"][2]["replay"]["lanes"][0]["context_ids"].erase(0); }),
                 "start_pos + input tokens is");
  expect_refused(with([](json& d) { d["steps"][2]["replay"]["lanes"][0]["lane"] = 99; }),
                 "steps[2].replay.lanes[0].lane: 99 is outside");
  expect_refused(
      with([](json& d) { d["steps"][2]["replay"]["lanes"][0]["strategy"] = "top_k=-1"; }),
      "steps[2].replay.lanes[0].strategy:");
  // A DoLa record without its contrast would replay the wrong choice: refused.
  expect_refused(with([](json& d) { d["steps"][2]["replay"]["lanes"][0]["strategy"] = "dola=1"; }),
                 "steps[2].replay.lanes[0].strategy: DoLa lane without its layer contrast");
  expect_refused(with([](json& d) { d.erase("replay"); }), "missing \"replay\"");
  expect_refused(with([](json& d) { d["steps"][3].erase("replay"); }),
                 "steps[3]: missing \"replay\"");
  expect_refused(with([](json& d) { d["steps"][3]["index"] = 7; }), "steps[3].index: 7 is outside");
  expect_refused(with([](json& d) { d["steps"][0]["phase"] = "decode"; }), "expected \"prefill\"");
  expect_refused(with([](json& d) { d["replay"]["vocabulary"].erase(3); }),
                 "replay.vocabulary: " + std::to_string(vocab - 1) + " tokens, the model has");
  expect_refused(with([](json& d) { d["lanes"][4]["parent"] = 4; }),
                 "lanes[4].parent: 4 is outside");
  expect_refused(
      with([](json& d) { d["steps"][1]["kv"]["sequences"][0]["block_table"][0] = 1 << 20; }),
      "steps[1].kv.sequences[0].block_table[0]");
  expect_refused(with([](json& d) { d["steps"][1]["replay"]["kv_ref_counts"].erase(0); }),
                 "steps[1].kv.ref_counts:");
  expect_refused(with([](json& d) { d["state"] = "ready for prefill"; }), "does not match 6 steps");
  expect_refused(with([](json& d) {
                   std::vector<float> v(d["model"]["vocab_size"].get<int>(), 0.0f);
                   v[3] = std::nanf("");
                   d["steps"][1]["replay"]["lanes"][0]["logits"] = replay::pack_f32(v);
                 }),
                 "steps[1].replay.lanes[0].logits: value 3 is not a finite number");
  expect_refused(with([](json& d) {
                   json& ls = d["steps"][1]["replay"]["lanes"][0];
                   const size_t n =
                       replay::base64_decode(ls["attention"][1].get<std::string>())->size() / 2;
                   std::vector<float> v(n, 0.0f);
                   v[0] = 1.5f;
                   ls["attention"][1] = replay::pack_f16(v);
                 }),
                 "steps[1].replay.lanes[0].attention[1]: weight 0 is outside [0, 1]");
  // A prompt that no longer matches its tokens (edited after the export).
  expect_refused(with([](json& d) { d["prompt"] = "The dog sat on the mat."; }),
                 "prompt_tokens[1]: token ");
  expect_refused(with([](json& d) { d["prompt"] = d["prompt"].get<std::string>() + " Then"; }),
                 "prompt_tokens: the tokens spell 23 of the prompt's 28 bytes");
  expect_refused(with([](json& d) {
                   d["prompt_tokens"][0]["id"] = (d["prompt_tokens"][0]["id"].get<int>() + 1) % 50;
                 }),
                 "prompt_tokens[0]: token ");
  // A branch's record before the branch existed.
  expect_refused(with([](json& d) { d["lanes"][4]["first_step"] = 5; }),
                 "lane 4 has no record before its first step 5");
  // A beam candidate pointing at a beam that does not exist.
  expect_refused(with([](json& d) {
                   for (json& ls : d["steps"][2]["replay"]["lanes"])
                     if (ls.contains("beam")) ls["beam"]["candidates"][0]["parent"] = 50;
                 }),
                 ".beam.candidates[0].parent: 50 is outside");
  // A contrastive similarity strip of the wrong length.
  expect_refused(with([](json& d) {
                   for (json& ls : d["steps"][2]["replay"]["lanes"])
                     if (ls.contains("contrastive")) ls["contrastive"]["positions"] = 1;
                 }),
                 ".contrastive.similarity: expected");
  // Corrupt bytes in the middle of the text.
  std::string text = exported_text();
  text[text.size() / 2] = '\x01';
  expect_refused(text, "truncated or corrupt");
}

// Speculative and DoLa lanes (greedy and sampled) beside a plain one, on the
// bundled model with itself as the draft: the file re-opens with each
// round and contrast whole, every lane keeps its strategy and replays the
// recorded tokens step by step.
struct RecordedSpec {
  LoadedModel model;
  LoadedModel draft;
  std::unique_ptr<Session> session;
  std::vector<std::vector<std::vector<int>>> generated;  // [step][lane]
};

RecordedSpec& recorded_spec() {
  static RecordedSpec r = [] {
    RecordedSpec rec;
    rec.model = test::load_model(test::bundled_model_dir(), "cpu", 16);
    rec.draft = test::load_model(test::bundled_model_dir(), "cpu", 16);
    SessionOptions o;
    o.max_new_tokens = 16;
    rec.session = std::make_unique<Session>(rec.model.tokenizer, rec.model.engine, o);
    Session& s = *rec.session;
    s.set_draft_engine(rec.draft.engine);
    s.set_prompt("Once upon a time there was");
    s.set_strategies({SamplingParams{}, parse_strategy("spec=3"),
                      parse_strategy("spec=2,top_p=0.9,seed=4"), parse_strategy("dola=high"),
                      parse_strategy("dola=low,sample,seed=2")});
    auto note = [&] { rec.generated.push_back(lanes_generated(s)); };
    s.prefill();
    note();
    for (int i = 0; i < 4 && s.can_step(); ++i) {
      s.step();
      note();
    }
    return rec;
  }();
  return r;
}

std::string exported_spec_text() {
  static const std::string text = session_to_json(*recorded_spec().session)
                                      .dump(-1, ' ', false, json::error_handler_t::replace);
  return text;
}

TEST(SessionImport, SpeculativeAndDolaLanesReopenWithTheirRoundsAndContrasts) {
  const RecordedSpec& rec = recorded_spec();
  const Session& live = *rec.session;
  const ImportedSession got = import_session_text(exported_spec_text(), "spec.json");
  ASSERT_EQ(got.full.lanes.size(), live.lanes().size());
  for (size_t l = 0; l < live.lanes().size(); ++l) {
    EXPECT_EQ(format_strategy(got.full.lanes[l].params), format_strategy(live.lanes()[l].params));
    EXPECT_EQ(got.full.lanes[l].generated, live.lanes()[l].generated) << "lane " << l;
  }
  ASSERT_EQ(got.full.history.size(), live.history().size());
  int rounds = 0, dola = 0;
  for (size_t st = 0; st < live.history().size(); ++st)
    for (size_t k = 0; k < live.history()[st]->lanes.size(); ++k) {
      SCOPED_TRACE("step " + std::to_string(st) + ", record " + std::to_string(k));
      const LaneStep& a = live.history()[st]->lanes[k];
      const LaneStep& b = got.full.history[st]->lanes[k];
      ASSERT_EQ(a.spec == nullptr, b.spec == nullptr);
      ASSERT_EQ(a.dola == nullptr, b.dola == nullptr);
      EXPECT_EQ(format_strategy(a.params), format_strategy(b.params));
      if (a.spec) {
        ++rounds;
        const SpecRound& x = *a.spec;
        const SpecRound& y = *b.spec;
        EXPECT_EQ(x.gamma, y.gamma);
        EXPECT_EQ(x.gamma_next, y.gamma_next);
        EXPECT_EQ(x.sampled, y.sampled);
        EXPECT_EQ(x.committed, y.committed);
        EXPECT_EQ(x.accepted, y.accepted);
        EXPECT_EQ(x.next_token, y.next_token);
        EXPECT_EQ(x.next, y.next);
        EXPECT_EQ(x.next_uniform, y.next_uniform);
        ASSERT_EQ(x.drafts.size(), y.drafts.size());
        for (size_t i = 0; i < x.drafts.size(); ++i) {
          EXPECT_EQ(x.drafts[i].token, y.drafts[i].token);
          EXPECT_EQ(x.drafts[i].q, y.drafts[i].q);
          EXPECT_EQ(x.drafts[i].p, y.drafts[i].p);
          EXPECT_EQ(x.drafts[i].accepted, y.drafts[i].accepted);
          EXPECT_EQ(x.drafts[i].checked, y.drafts[i].checked);
        }
        ASSERT_EQ(x.target_logits.size(), y.target_logits.size());
        for (size_t i = 0; i < x.target_logits.size(); ++i)
          EXPECT_TRUE(same_bits(x.target_logits[i], y.target_logits[i])) << "row " << i;
        ASSERT_EQ(x.draft_logits.size(), y.draft_logits.size());
        for (size_t i = 0; i < x.draft_logits.size(); ++i)
          EXPECT_TRUE(same_bits(x.draft_logits[i], y.draft_logits[i])) << "row " << i;
        EXPECT_TRUE(same_bits(x.residual, y.residual));
        EXPECT_EQ(x.target_slots_released, y.target_slots_released);
        EXPECT_EQ(x.verify_cost.flops, y.verify_cost.flops);
        EXPECT_EQ(x.draft_cost.bytes(), y.draft_cost.bytes());
      }
      if (a.dola) {
        ++dola;
        EXPECT_EQ(a.dola->candidate_layers, b.dola->candidate_layers);
        EXPECT_EQ(a.dola->divergence, b.dola->divergence);
        EXPECT_EQ(a.dola->premature_layer, b.dola->premature_layer);
        EXPECT_EQ(a.dola->kept, b.dola->kept);
        EXPECT_TRUE(same_bits(a.dola->contrast, b.dola->contrast));
        ASSERT_EQ(a.dola->top.size(), b.dola->top.size());
        for (size_t i = 0; i < a.dola->top.size(); ++i)
          EXPECT_EQ(a.dola->top[i].contrast, b.dola->top[i].contrast);
        // The stored contrast is what the choice ran on: choosing again
        // from the re-opened record gives the recorded token.
        const SamplingRecord again = sample_next(choice_logits(b), choice_context(b), b.params,
                                                 b.step_index, b.banned_words.get());
        EXPECT_EQ(again.draw.chosen_token, b.chosen_token);
      }
    }
  EXPECT_GT(rounds, 4);
  EXPECT_GT(dola, 4);
  // The lane summaries (log-probability from each round's rows, the rounds'
  // own time) are the live ones.
  expect_same_summaries(live, got);
  // Stepping through it: each lane has the tokens it had at that step.
  for (int c = 0; c < static_cast<int>(rec.generated.size()); ++c) {
    SCOPED_TRACE("cursor " + std::to_string(c));
    const SnapshotPtr s = replay_snapshot(got, c, 1);
    ASSERT_EQ(s->lanes.size(), rec.generated[c].size());
    for (size_t l = 0; l < s->lanes.size(); ++l)
      EXPECT_EQ(s->lanes[l].generated, rec.generated[c][l]) << "lane " << l;
  }
}

TEST(SessionImport, CorruptSpeculativeAndDolaRecordsAreRefused) {
  const json doc = json::parse(exported_spec_text());
  const auto with = [&](const std::function<void(json&)>& edit) {
    json d = doc;
    edit(d);
    return dump(d);
  };
  // steps[1]: the first decode step; records 1 and 2 are speculative rounds,
  // 3 and 4 DoLa steps.
  ASSERT_TRUE(doc["steps"][1]["replay"]["lanes"][1].contains("spec"));
  ASSERT_TRUE(doc["steps"][1]["replay"]["lanes"][3].contains("dola"));
  expect_refused(with([](json& d) { d["steps"][1]["replay"]["lanes"][1].erase("spec"); }),
                 "steps[1].replay.lanes[1].strategy: speculative lane without its round");
  expect_refused(with([](json& d) { d["steps"][1]["replay"]["lanes"][3].erase("dola"); }),
                 "steps[1].replay.lanes[3].strategy: DoLa lane without its layer contrast");
  expect_refused(with([](json& d) { d["steps"][1]["replay"]["lanes"][1]["spec"]["gamma"] = 1; }),
                 "steps[1].replay.lanes[1].spec.gamma: 1 drafts, but the verify pass fed 4");
  expect_refused(
      with([](json& d) { d["steps"][1]["replay"]["lanes"][1]["spec"]["target_logits"].erase(0); }),
      "steps[1].replay.lanes[1].spec.target_logits: 3 rows, expected 4");
  expect_refused(with([](json& d) {
                   d["steps"][1]["replay"]["lanes"][1]["spec"]["committed"] = json::array();
                 }),
                 "spec.committed: a round that committed no token");
  expect_refused(
      with([](json& d) { d["steps"][1]["replay"]["lanes"][3]["dola"]["contrast"] = "!!!!"; }),
      "steps[1].replay.lanes[3].dola.contrast: expected");
  expect_refused(
      with([](json& d) { d["steps"][1]["replay"]["lanes"][3]["dola"]["premature_layer"] = 99; }),
      "dola.premature_layer: not one of the candidate layers");
  expect_refused(with([](json& d) {
                   d["steps"][1]["replay"]["lanes"][0]["spec"] =
                       d["steps"][1]["replay"]["lanes"][1]["spec"];
                 }),
                 "steps[1].replay.lanes[0].spec");
}

// A lookahead and a prompt-lookup lane's passes: each part of the stored
// pass is checked, and a record without its pass (a file from before passes
// were stored) is refused in one line rather than replayed as one token.
TEST(SessionImport, CorruptLookaheadRecordsAreRefused) {
  const LoadedModel m = test::load_model(test::bundled_model_dir(), "cpu", 6);
  Session s(m.tokenizer, m.engine);
  s.set_prompt("1, 2, 3, 4, 5, 6, 7, 8, 9,");
  s.set_strategies(
      {SamplingParams{}, parse_strategy("lookahead"), parse_strategy("prompt_lookup=6,2")});
  s.prefill();
  s.step();
  s.step();
  const json doc = session_to_json(s);
  ASSERT_NO_THROW(import_session_text(dump(doc), "t.json"));
  const auto with = [&](const std::function<void(json&)>& edit) {
    json d = doc;
    edit(d);
    return dump(d);
  };
  // steps[1]: the first passes; record 1 is the lookahead lane's, 2 the
  // prompt-lookup lane's.
  ASSERT_TRUE(doc["steps"][1]["replay"]["lanes"][1].contains("lookahead"));
  ASSERT_TRUE(doc["steps"][1]["replay"]["lanes"][2].contains("lookahead"));
  const auto pass = [](json& d, int lane) -> json& {
    return d["steps"][1]["replay"]["lanes"][lane]["lookahead"];
  };
  expect_refused(with([](json& d) { d["steps"][1]["replay"]["lanes"][1].erase("lookahead"); }),
                 "steps[1].replay.lanes[1].strategy: lookahead or prompt-lookup lane without "
                 "its pass");
  expect_refused(with([&](json& d) { pass(d, 1)["layout"]["mask"] = "01"; }),
                 "steps[1].replay.lanes[1].lookahead.layout.mask: 2 entries, expected");
  expect_refused(with([&](json& d) { pass(d, 1)["layout"]["tokens"][0] = 5; }),
                 "lookahead.layout.tokens: not the record's input tokens");
  expect_refused(with([&](json& d) { pass(d, 2)["logits"].erase(0); }),
                 "steps[1].replay.lanes[2].lookahead.logits:");
  expect_refused(with([&](json& d) { pass(d, 2)["committed"] = json::array({0}); }),
                 "lookahead.committed: not a beginning of the verdict's tokens");
  expect_refused(with([&](json& d) { pass(d, 1)["prompt_lookup"] = true; }),
                 "lookahead.prompt_lookup: does not match the strategy");
  expect_refused(with([&](json& d) { pass(d, 1)["verdict"]["candidate"] = 40; }),
                 "lookahead.verdict.candidate:");
  expect_refused(
      with([&](json& d) { d["steps"][1]["replay"]["lanes"][0]["lookahead"] = pass(d, 1); }),
      "steps[1].replay.lanes[0].lookahead");
}

TEST(SessionImport, HugeDeclaredSizesAreRefused) {
  const json good = exported_json();
  auto with = [&](auto edit) {
    json doc = good;
    edit(doc);
    return dump(doc);
  };
  expect_refused(with([](json& d) { d["model"]["vocab_size"] = int64_t(1) << 40; }),
                 "model.vocab_size: 1099511627776 is outside 1..");
  expect_refused(with([](json& d) { d["model"]["n_layer"] = 1 << 20; }), "model.n_layer:");
  expect_refused(with([](json& d) { d["model"]["n_head"] = 1 << 20; }), "model.n_head:");
  expect_refused(with([](json& d) { d["model"]["vocab_size"] = uint64_t(1) << 63; }),
                 "model.vocab_size:");
  expect_refused(with([](json& d) { d["steps"][1]["kv"]["blocks_total"] = 1 << 30; }),
                 "steps[1].kv.blocks_total:");
  // A declared shape larger than the data: refused by the data's own length.
  expect_refused(with([](json& d) { d["model"]["n_head"] = 200; }), ".attention[0]: expected");
  // Nesting and value counts are bounded while parsing.
  expect_refused(std::string(100, '[') + std::string(100, ']'), "nested more than 32 levels");
  // A file larger than the bound is refused before it is read (a sparse file: no disk used).
  const fs::path big = fs::temp_directory_path() / ("ts-import-big-" + std::to_string(getpid()));
  { std::ofstream f(big); }
  fs::resize_file(big, kMaxSessionFileBytes + 1);
  try {
    import_session_file(big);
    ADD_FAILURE() << "a file over the bound was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("too large for a session file"), std::string::npos)
        << e.what();
    EXPECT_EQ(std::string(e.what()).rfind(big.string(), 0), 0u) << e.what();
  }
  fs::remove(big);
  EXPECT_THROW(import_session_file("/nonexistent/session.json"), Error);
}

TEST(SessionImport, PackedArraysAreStrict) {
  const std::vector<float> v = {0.0f, 1.0f, -2.5f, 1e-30f, 3.4e38f};
  const auto back = replay::unpack_f32(replay::pack_f32(v), v.size());
  ASSERT_TRUE(back);
  EXPECT_TRUE(same_bits(v, *back));
  EXPECT_FALSE(replay::unpack_f32(replay::pack_f32(v), v.size() + 1));
  EXPECT_FALSE(replay::unpack_f32(replay::pack_f32(v), v.size() - 1));
  EXPECT_FALSE(replay::base64_decode("AB=C"));
  EXPECT_FALSE(replay::base64_decode("ABC"));
  EXPECT_FALSE(replay::base64_decode("AB\nC"));
  EXPECT_TRUE(replay::base64_decode("ABC="));
  // Half floats: the error bound the attention round trip is held to.
  for (float x : {1.0f, 0.3333f, 1e-3f, 7e-6f, 1e-8f, 0.0f}) {
    const auto h = replay::unpack_f16(replay::pack_f16({x}), 1);
    ASSERT_TRUE(h);
    EXPECT_LE(std::fabs((*h)[0] - x), std::max(x * 0x1p-11f, 0x1p-25f)) << x;
  }
}

}  // namespace
}  // namespace ts
