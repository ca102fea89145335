#include "session/session_import.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <nlohmann/json.hpp>

#include "model/mapped_file.h"
#include "session/replay_codec.h"
#include "session/session_export.h"
#include "session/session_import_reader.h"
#include "util/error.h"

namespace ts {

using nlohmann::json;

namespace {

using namespace session_import;

LaneStep read_lane_step(const Reader& r, const json& j, const std::string& w, const Shape& s,
                        const std::vector<std::shared_ptr<const BannedTokens>>& lists) {
  const ModelConfig& cfg = s.config;
  const int vocab = cfg.vocab_size;
  const int max_ctx = std::min(cfg.n_ctx, kMaxReplayContext);
  LaneStep ls;
  ls.lane = r.integer(j, w, "lane", 0, s.lanes - 1);
  ls.input_tokens = r.ints(j, w, "input_tokens", max_ctx, 0, vocab - 1);
  if (ls.input_tokens.empty()) r.fail(w + ".input_tokens", "empty");
  ls.start_pos = r.integer(j, w, "start_pos", 0, max_ctx - 1);
  ls.context_ids = r.ints(j, w, "context_ids", max_ctx, 0, vocab - 1);
  ls.slots_written = r.ints(j, w, "slots_written", max_ctx, 0, std::numeric_limits<int>::max());
  ls.blocks_copied = r.integer(j, w, "blocks_copied", 0, max_ctx);
  try {
    ls.params = parse_strategy(r.string(j, w, "strategy"));
  } catch (const Error& e) {
    r.fail(w + ".strategy", e.what());
  }
  // A lookahead or prompt-lookup lane's prefill feeds the prompt only; each
  // later record is a pass, and one without it (a file written before passes
  // were stored) would replay as a single token.
  const bool pass = j.contains("lookahead");
  if (ls.params.draft_free() && !pass && ls.start_pos > 0)
    r.fail(w + ".strategy",
           "lookahead or prompt-lookup lane without its pass (written by an older TokenScope: "
           "export the session again to re-open it)");
  // A pass's context is its last committed token's (checked with the pass).
  if (!pass && static_cast<int>(ls.context_ids.size()) != ls.context())
    r.fail(w + ".context_ids", std::to_string(ls.context_ids.size()) +
                                   " tokens, but start_pos + input tokens is " +
                                   std::to_string(ls.context()));
  ls.step_index = r.integer(j, w, "step_index", 0, cfg.n_ctx);
  ls.chosen_token = r.integer(j, w, "chosen_token", -1, vocab - 1);
  ls.chosen_prob = static_cast<float>(r.number(j, w, "chosen_prob"));
  ls.uniform = r.number(j, w, "uniform");
  ls.kept_tokens = r.integer(j, w, "kept_tokens", 0, vocab);
  ls.entropy = r.number(j, w, "entropy");
  const int banned = r.integer(j, w, "banned_words", -1, static_cast<int>(lists.size()) - 1);
  if (banned >= 0) ls.banned_words = lists[banned];
  ls.logits = r.packed(r.field(j, w, "logits"), w + ".logits", static_cast<size_t>(vocab), false);
  // A model's raw logits are finite; the views sort and softmax them.
  for (size_t i = 0; i < ls.logits.size(); ++i)
    if (!std::isfinite(ls.logits[i]))
      r.fail(w + ".logits", "value " + std::to_string(i) + " is not a finite number");
  const json& layers = r.array(j, w, "attention", static_cast<size_t>(cfg.n_layer));
  if (!layers.empty() && static_cast<int>(layers.size()) != cfg.n_layer)
    r.fail(w + ".attention",
           std::to_string(layers.size()) + " layers, the model has " + std::to_string(cfg.n_layer));
  const size_t per_layer =
      static_cast<size_t>(cfg.n_head) * ls.input_tokens.size() * static_cast<size_t>(ls.context());
  for (size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].is_null()) {
      ls.attention.push_back(nullptr);
      continue;
    }
    std::vector<float> weights = r.packed(layers[l], at(w + ".attention", l), per_layer, true);
    // Softmax weights: in [0, 1] (NaN fails the test too).
    for (size_t i = 0; i < weights.size(); ++i)
      if (!(weights[i] >= 0.0f && weights[i] <= 1.0f))
        r.fail(at(w + ".attention", l), "weight " + std::to_string(i) + " is outside [0, 1]");
    ls.attention.push_back(std::make_shared<const std::vector<float>>(std::move(weights)));
  }
  if (j.contains("beam")) ls.beam = read_beam(r, j["beam"], w + ".beam", s);
  if (j.contains("contrastive"))
    ls.contrastive = read_contrastive(r, j["contrastive"], w + ".contrastive", s, ls.context());
  if (j.contains("spec")) ls.spec = read_spec(r, j["spec"], w + ".spec", s, ls.rows());
  if (j.contains("dola")) ls.dola = read_dola(r, j["dola"], w + ".dola", s);
  // Replaying a speculative round or a DoLa choice from the logits alone
  // would show the wrong choice, so a record without its round or step (a
  // file written before they were stored) is refused rather than misread. A
  // speculative lane's prefill (from position 0) and a one-row record (a
  // branch) were ordinary choices and replay from their logits.
  if (ls.params.speculative() && !ls.spec && ls.start_pos > 0 && ls.rows() > 1)
    r.fail(w + ".strategy",
           "speculative lane without its round (written by an older TokenScope: export the "
           "session again to re-open it)");
  if (ls.params.dola() && !ls.dola)
    r.fail(w + ".strategy",
           "DoLa lane without its layer contrast (written by an older TokenScope: export the "
           "session again to re-open it)");
  if (ls.spec && !ls.params.speculative())
    r.fail(w + ".spec", "the strategy is not speculative decoding");
  if (ls.dola && !ls.params.dola()) r.fail(w + ".dola", "the strategy is not DoLa");
  if (pass) {
    if (!ls.params.draft_free())
      r.fail(w + ".lookahead", "the strategy is not lookahead or prompt lookup");
    ls.lookahead = read_lookahead(r, j["lookahead"], w + ".lookahead", s, ls);
  }
  if (ls.beam && !ls.params.beam_search()) r.fail(w + ".beam", "the strategy is not beam search");
  if (ls.contrastive && !ls.params.contrastive())
    r.fail(w + ".contrastive", "the strategy is not contrastive search");
  return ls;
}

KvOccupancy read_kv(const Reader& r, const json& j, const std::string& w, const json& ref_counts) {
  constexpr int kMaxBlocks = 1 << 24;
  KvOccupancy kv;
  kv.blocks_total = r.integer(j, w, "blocks_total", 0, kMaxBlocks);
  kv.blocks_used = r.integer(j, w, "blocks_used", 0, kv.blocks_total);
  kv.blocks_shared = r.integer(j, w, "blocks_shared", 0, kv.blocks_total);
  kv.blocks_free = r.integer(j, w, "blocks_free", 0, kv.blocks_total);
  kv.block_size = r.integer(j, w, "block_size", 1, 1 << 16);
  kv.bytes_per_layer_used = r.integer(r.field(j, w, "bytes_per_layer_used"),
                                      w + ".bytes_per_layer_used", 0, int64_t(1) << 50);
  kv.bytes_per_layer_capacity = r.integer(r.field(j, w, "bytes_per_layer_capacity"),
                                          w + ".bytes_per_layer_capacity", 0, int64_t(1) << 50);
  kv.wasted_slots = r.integer(j, w, "wasted_slots", 0, std::numeric_limits<int>::max());
  const json& seqs = r.array(j, w, "sequences", 4096);
  for (size_t i = 0; i < seqs.size(); ++i) {
    const std::string sw = at(w + ".sequences", i);
    SequenceOccupancy so;
    so.id = r.integer(seqs[i], sw, "id", 0, std::numeric_limits<int>::max());
    so.tokens = r.integer(seqs[i], sw, "tokens", 0, kMaxReplayContext);
    so.block_table = r.ints(seqs[i], sw, "block_table", static_cast<size_t>(kv.blocks_total), 0,
                            std::max(0, kv.blocks_total - 1));
    so.wasted_slots = r.integer(seqs[i], sw, "wasted_slots", 0, kv.block_size);
    kv.sequences.push_back(std::move(so));
  }
  const json wrapped = {{"ref_counts", ref_counts}};
  kv.ref_counts = r.ints(wrapped, w, "ref_counts", static_cast<size_t>(kv.blocks_total), 0,
                         kMaxReplayLanes * 64);
  if (static_cast<int>(kv.ref_counts.size()) != kv.blocks_total)
    r.fail(w + ".ref_counts", std::to_string(kv.ref_counts.size()) + " entries for " +
                                  std::to_string(kv.blocks_total) + " blocks");
  return kv;
}

// Throws when the nesting is too deep or the document holds too many values:
// bounds what parsing can allocate, whatever the file declares.
json parse_bounded(std::string_view text, const std::string& name) {
  int64_t values = 0;
  const auto callback = [&](int depth, json::parse_event_t event, json&) {
    if (depth > kMaxSessionJsonDepth)
      throw Error(name + ": nested more than " + std::to_string(kMaxSessionJsonDepth) +
                  " levels deep: not a session file");
    if (event == json::parse_event_t::value && ++values > kMaxSessionJsonValues)
      throw Error(name + ": more than " + std::to_string(kMaxSessionJsonValues) +
                  " JSON values: too large for a session file");
    return true;
  };
  try {
    return json::parse(text, callback);
  } catch (const json::exception& e) {
    std::string what = e.what();
    const size_t tag_end = what.find("] ");
    if (tag_end != std::string::npos) what = what.substr(tag_end + 2);
    throw Error(name + ": not a complete JSON document (truncated or corrupt): " + what);
  }
}

std::shared_ptr<const Tokenizer> read_vocabulary(const Reader& r, const json& replay,
                                                 const std::string& name, int vocab_size) {
  // Files written before the tokenizer record: GPT-2's pre-tokenizer, no BOS.
  const json* rules = replay.contains("tokenizer") ? &replay["tokenizer"] : nullptr;
  const int padding =
      rules ? r.integer(*rules, "replay.tokenizer", "padding", 0, vocab_size - 1) : 0;
  const json& words = r.array(replay, "replay", "vocabulary", static_cast<size_t>(vocab_size));
  if (static_cast<int>(words.size()) != vocab_size - padding)
    r.fail("replay.vocabulary",
           std::to_string(words.size()) + " tokens, the model has " + std::to_string(vocab_size) +
               (padding ? " of which " + std::to_string(padding) + " padding" : std::string()));
  json vocab = json::object();
  for (size_t i = 0; i < words.size(); ++i) {
    if (!words[i].is_string()) r.fail(at("replay.vocabulary", i), "expected a string");
    vocab[words[i].get<std::string>()] = i;
  }
  if (vocab.size() != words.size()) r.fail("replay.vocabulary", "a token appears twice");
  // from_text's errors name the field: "FILE: replay.vocabulary: ...".
  Tokenizer tok = Tokenizer::from_text(vocab.dump(), "#version: 0.2\n",
                                       name + ": replay.vocabulary", name + ": (no merges)");
  if (rules) {
    const std::string w = "replay.tokenizer";
    std::vector<std::string> patterns;
    const json& list = r.array(*rules, w, "split_patterns", 16);
    for (size_t i = 0; i < list.size(); ++i) {
      if (!list[i].is_string()) r.fail(at(w + ".split_patterns", i), "expected a string");
      patterns.push_back(list[i].get<std::string>());
    }
    const int words_n = static_cast<int>(words.size());
    const std::vector<int> added = r.ints(*rules, w, "added_tokens", 1 << 20, 0, words_n - 1);
    const int bos = r.integer(*rules, w, "bos_id", -1, words_n - 1);
    const bool add_bos = r.boolean(*rules, w, "add_bos");
    try {
      tok.pad_to(vocab_size);
      tok.set_prompt_rules(patterns, added, bos, add_bos, r.boolean(*rules, w, "nfc_normalizer"));
    } catch (const Error& e) {
      r.fail(w, e.what());
    }
  }
  return std::make_shared<const Tokenizer>(std::move(tok));
}

}  // namespace

ImportedSession import_session_text(std::string_view text, const std::string& name) {
  const Reader r(name);
  const json doc = parse_bounded(text, name);
  if (!doc.is_object()) r.fail("", "not a TokenScope session file (expected a JSON object)");
  const auto format = doc.find("format");
  if (format == doc.end() || !format->is_string())
    r.fail("", "not a TokenScope session file (no \"format\")");
  const std::string& fmt = format->get_ref<const std::string&>();
  if (fmt != kSessionFormat) {
    if (fmt.rfind("tokenscope-session/", 0) == 0)
      r.fail("", "format " + fmt + ", this TokenScope reads " + kSessionFormat +
                     " (export the session again with this version)");
    r.fail("", "not a TokenScope session file (format \"" + fmt.substr(0, 64) + "\")");
  }

  ImportedSession out;
  out.file = name;
  SessionSnapshot& snap = out.full;
  Shape shape;
  ModelConfig& cfg = shape.config;
  const json& model = r.field(doc, "", "model");
  cfg.vocab_size = r.integer(model, "model", "vocab_size", 1, 1 << 20);
  cfg.n_ctx = r.integer(model, "model", "n_ctx", 1, 1 << 24);
  cfg.n_embd = r.integer(model, "model", "n_embd", 1, 1 << 16);
  cfg.n_head = r.integer(model, "model", "n_head", 1, kMaxReplayHeads);
  cfg.n_layer = r.integer(model, "model", "n_layer", 1, kMaxReplayLayers);
  // The family and its shape (files written before they were recorded are
  // GPT-2's): what the parameter count and the views are computed from.
  if (model.contains("family")) {
    const std::string& family = r.string(model, "model", "family");
    if (family == "llama" || family == "qwen2") {
      cfg.family = family == "llama" ? ModelFamily::kLlama : ModelFamily::kQwen2;
      cfg.n_kv_head = r.integer(model, "model", "n_kv_head", 1, cfg.n_head);
      if (cfg.n_head % cfg.n_kv_head != 0)
        r.fail("model.n_kv_head", "does not divide n_head " + std::to_string(cfg.n_head));
      cfg.head_size = r.integer(model, "model", "head_dim", 1, 1 << 16);
      cfg.n_inner = r.integer(model, "model", "n_inner", 1, 1 << 20);
      cfg.tied_embeddings = r.boolean(model, "model", "tied_embeddings");
      cfg.rope_theta = static_cast<float>(r.number(model, "model", "rope_theta"));
      cfg.layer_norm_epsilon = static_cast<float>(r.number(model, "model", "norm_epsilon"));
    } else if (family != "gpt2") {
      r.fail("model.family", "\"" + family.substr(0, 32) + "\", expected gpt2, llama or qwen2");
    }
  }
  snap.config = cfg;
  snap.model_name = r.string(model, "model", "source");
  snap.backend = r.string(doc, "", "backend");
  snap.device = r.string(doc, "", "device");
  snap.kv_cache = r.boolean(doc, "", "kv_cache");
  snap.prompt_text = r.string(doc, "", "prompt");
  const json& replay = r.field(doc, "", "replay");
  snap.max_new_tokens = r.integer(replay, "replay", "max_new_tokens", 0, cfg.n_ctx);
  snap.tokenizer = read_vocabulary(r, replay, name, cfg.vocab_size);

  const int max_ctx = std::min(cfg.n_ctx, kMaxReplayContext);
  const json& prompt = r.array(doc, "", "prompt_tokens", static_cast<size_t>(max_ctx));
  for (size_t i = 0; i < prompt.size(); ++i) {
    const std::string w = at("prompt_tokens", i);
    TokenSpan t{};
    t.id = r.integer(prompt[i], w, "id", 0, cfg.vocab_size - 1);
    t.byte_begin = static_cast<size_t>(
        r.integer(prompt[i], w, "byte_begin", 0, static_cast<int>(snap.prompt_text.size())));
    t.byte_end =
        static_cast<size_t>(r.integer(prompt[i], w, "byte_end", static_cast<int>(t.byte_begin),
                                      static_cast<int>(snap.prompt_text.size())));
    snap.prompt_tokens.push_back(t);
  }
  // The tokens must spell the prompt, span after span: a prompt edited in
  // the file would otherwise be shown while the records replay another one.
  // A BOS token the tokenizer adds comes first as a span of no bytes.
  size_t spelled = 0;
  for (size_t i = 0; i < snap.prompt_tokens.size(); ++i) {
    const TokenSpan& t = snap.prompt_tokens[i];
    if (i == 0 && snap.tokenizer->adds_bos() && t.id == snap.tokenizer->bos_id() &&
        t.byte_begin == 0 && t.byte_end == 0)
      continue;
    const std::string bytes = snap.tokenizer->token_bytes(t.id);
    if (t.byte_begin != spelled ||
        snap.prompt_text.compare(t.byte_begin, t.byte_end - t.byte_begin, bytes) != 0)
      r.fail(at("prompt_tokens", i), "token " + std::to_string(t.id) +
                                         " does not match the prompt at byte " +
                                         std::to_string(spelled) + " (the prompt was changed?)");
    spelled = t.byte_end;
  }
  if (spelled != snap.prompt_text.size())
    r.fail("prompt_tokens", "the tokens spell " + std::to_string(spelled) + " of the prompt's " +
                                std::to_string(snap.prompt_text.size()) +
                                " bytes (the prompt was changed?)");

  const json& steps = r.array(doc, "", "steps", static_cast<size_t>(max_ctx) + 1);
  const json& lanes = r.array(doc, "", "lanes", kMaxReplayLanes);
  shape.lanes = static_cast<int>(lanes.size());
  shape.steps = static_cast<int>(steps.size());

  std::vector<std::shared_ptr<const BannedTokens>> lists;
  const json& banned = r.array(replay, "replay", "banned_words", 64);
  for (size_t i = 0; i < banned.size(); ++i) {
    const std::string w = at("replay.banned_words", i);
    auto b = std::make_shared<BannedTokens>();
    b->source = r.string(banned[i], w, "source");
    b->entries = r.integer(banned[i], w, "entries", 0, 1 << 20);
    const json& seqs = r.array(banned[i], w, "sequences", 1 << 20);
    for (size_t k = 0; k < seqs.size(); ++k) {
      const json wrapped = {{"s", seqs[k]}};
      std::vector<int> seq =
          r.ints(wrapped, at(w + ".sequences", k), "s", 64, 0, cfg.vocab_size - 1);
      if (seq.empty()) r.fail(at(w + ".sequences", k), "empty");
      b->sequences.push_back(std::move(seq));
    }
    std::sort(b->sequences.begin(), b->sequences.end());
    b->sequences.erase(std::unique(b->sequences.begin(), b->sequences.end()), b->sequences.end());
    for (const auto& seq : b->sequences) {
      if (seq.size() == 1)
        b->singles.push_back(seq[0]);
      else
        b->multi.push_back(seq);
    }
    std::sort(b->singles.begin(), b->singles.end());
    lists.push_back(std::move(b));
  }
  // The display masks the first list's single-token words, as it did live.
  if (!lists.empty()) snap.banned_words = lists.front();

  const json& branch_records = r.array(replay, "replay", "branch_records", kMaxReplayLanes);
  if (branch_records.size() != lanes.size())
    r.fail("replay.branch_records", std::to_string(branch_records.size()) + " entries for " +
                                        std::to_string(lanes.size()) + " lanes");
  for (size_t i = 0; i < lanes.size(); ++i) {
    const std::string w = at("lanes", i);
    Lane lane;
    lane.id = r.integer(lanes[i], w, "id", static_cast<int>(i), static_cast<int>(i));
    try {
      lane.params = parse_strategy(r.string(lanes[i], w, "strategy"));
    } catch (const Error& e) {
      r.fail(w + ".strategy", e.what());
    }
    lane.generated =
        r.ints(lanes[i], w, "generated", static_cast<size_t>(max_ctx), 0, cfg.vocab_size - 1);
    lane.stop_reason = r.string(lanes[i], w, "stop_reason");
    lane.parent = r.integer(lanes[i], w, "parent", -1, static_cast<int>(i) - 1);
    lane.branch_step = r.integer(lanes[i], w, "branch_step", -1, shape.steps - 1);
    lane.first_step = r.integer(lanes[i], w, "first_step", 0, shape.steps);
    lane.closed = r.boolean(lanes[i], w, "closed");
    if ((lane.parent < 0) != (lane.branch_step < 0))
      r.fail(w, "a branched lane needs both \"parent\" and \"branch_step\"");
    if (!branch_records[i].is_null()) {
      auto rec = std::make_shared<const LaneStep>(
          read_lane_step(r, branch_records[i], at("replay.branch_records", i), shape, lists));
      if (rec->lane != static_cast<int>(i)) r.fail(at("replay.branch_records", i), "wrong lane");
      lane.branch_record = std::move(rec);
    }
    if (lane.parent >= 0 && !lane.branch_record)
      r.fail(at("replay.branch_records", i), "a branched lane needs its branch record");
    snap.lanes.push_back(std::move(lane));
  }

  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string w = at("steps", i);
    const json& st = steps[i];
    auto trace = std::make_shared<StepTrace>();
    trace->index = r.integer(st, w, "index", static_cast<int>(i), static_cast<int>(i));
    const std::string& phase = r.string(st, w, "phase");
    if (phase != (i == 0 ? "prefill" : "decode"))
      r.fail(w + ".phase", "\"" + phase.substr(0, 32) + "\", expected " +
                               (i == 0 ? "\"prefill\"" : "\"decode\""));
    trace->phase = i == 0 ? Phase::kPrefill : Phase::kDecode;
    trace->backend = r.string(st, w, "backend");
    trace->kv_cache = r.boolean(st, w, "kv_cache");
    trace->recomputed_tokens = r.integer(st, w, "recomputed_tokens", 0, 1 << 30);
    trace->seconds = r.number(st, w, "seconds");
    trace->cost.flops = r.number(st, w, "flops");
    trace->cost.weight_bytes = r.number(st, w, "weight_bytes");
    trace->cost.kv_read_bytes = r.number(st, w, "kv_read_bytes");
    trace->cost.kv_write_bytes = r.number(st, w, "kv_write_bytes");
    const json& rep = r.field(st, w, "replay");
    trace->kv_after =
        read_kv(r, r.field(st, w, "kv"), w + ".kv", r.field(rep, w + ".replay", "kv_ref_counts"));
    // Which lane and beam held each sequence (files written before it was
    // stored have none: the KV cache panel then numbers the sequences).
    if (rep.is_object() && rep.contains("kv_owners")) {
      const json& owners = r.array(rep, w + ".replay", "kv_owners", 4096);
      for (size_t k = 0; k < owners.size(); ++k) {
        const std::string ow = at(w + ".replay.kv_owners", k);
        KvSequenceOwner o;
        o.seq = r.integer(owners[k], ow, "seq", 0, std::numeric_limits<int>::max());
        o.lane = r.integer(owners[k], ow, "lane", 0, static_cast<int>(snap.lanes.size()) - 1);
        o.beam = r.integer(owners[k], ow, "beam", -1, kMaxReplayLanes * 64);
        if (std::none_of(trace->kv_after.sequences.begin(), trace->kv_after.sequences.end(),
                         [&](const SequenceOccupancy& so) { return so.id == o.seq; }))
          r.fail(ow + ".seq", "sequence " + std::to_string(o.seq) + " is not in the step's cache");
        trace->kv_owners.push_back(o);
      }
    }
    const json& recs = r.array(rep, w + ".replay", "lanes", kMaxReplayLanes);
    if (recs.empty()) r.fail(w + ".replay.lanes", "a step with no lane");
    for (size_t k = 0; k < recs.size(); ++k) {
      LaneStep ls = read_lane_step(r, recs[k], at(w + ".replay.lanes", k), shape, lists);
      if (static_cast<int>(i) < snap.lanes[ls.lane].first_step)
        r.fail(at(w + ".replay.lanes", k), "lane " + std::to_string(ls.lane) +
                                               " has no record before its first step " +
                                               std::to_string(snap.lanes[ls.lane].first_step));
      for (const LaneStep& other : trace->lanes)
        if (other.lane == ls.lane) r.fail(at(w + ".replay.lanes", k), "a lane appears twice");
      trace->lanes.push_back(std::move(ls));
    }
    snap.history.push_back(std::move(trace));
  }

  const std::string& state = r.string(doc, "", "state");
  if (state == "paused")
    snap.state = SessionState::kPaused;
  else if (state == "finished")
    snap.state = SessionState::kFinished;
  else if (state == "ready for prefill")
    snap.state = SessionState::kReady;
  else if (state == "no prompt")
    snap.state = SessionState::kNoPrompt;
  else
    r.fail("state", "unknown state \"" + state.substr(0, 32) + "\"");
  if (snap.history.empty() !=
      (snap.state == SessionState::kReady || snap.state == SessionState::kNoPrompt))
    r.fail("state",
           "\"" + state + "\" does not match " + std::to_string(snap.history.size()) + " steps");
  if (!snap.history.empty() && snap.lanes.empty()) r.fail("lanes", "steps but no lane");
  snap.kv = snap.history.empty() ? KvOccupancy{} : snap.history.back()->kv_after;
  return out;
}

ImportedSession import_session_file(const std::filesystem::path& file) {
  const std::string text = read_regular_file(file, kMaxSessionFileBytes, "a session file");
  return import_session_text(text, file.string());
}

}  // namespace ts
