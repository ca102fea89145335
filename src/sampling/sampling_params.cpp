#include "sampling/sampling_params.h"

#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "sampling/contrastive.h"
#include "sampling/speculative.h"
#include "util/error.h"

namespace ts {
namespace {

// Shortest text that reads back as the same float ("0.9", not "0.899999976").
std::string num(float v) {
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

[[noreturn]] void bad_value(std::string_view key, std::string_view value, const char* expected) {
  throw Error("strategy: " + std::string(key) + "=" + std::string(value) + " is not " + expected);
}

float parse_float(std::string_view key, std::string_view value) {
  float v = 0;
  auto res = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || res.ec != std::errc() || res.ptr != value.data() + value.size()) {
    bad_value(key, value, "a number");
  }
  return v;
}

template <typename Int>
Int parse_int(std::string_view key, std::string_view value, const char* expected) {
  Int v = 0;
  auto res = std::from_chars(value.data(), value.data() + value.size(), v);
  if (value.empty() || res.ec != std::errc() || res.ptr != value.data() + value.size()) {
    bad_value(key, value, expected);
  }
  return v;
}

EarlyStopping parse_early_stopping(std::string_view value) {
  for (EarlyStopping e : {EarlyStopping::kFalse, EarlyStopping::kTrue, EarlyStopping::kNever})
    if (value == early_stopping_name(e)) return e;
  bad_value("early_stopping", value, "true, false or never");
}

// Contrastive search's items: contrastive=K, alpha=A. Returns false for any
// other key. Range checks are validate_contrastive's.
bool parse_contrastive_item(const std::string& key, std::string_view value, SamplingParams& p) {
  if (key == "contrastive") {
    p.contrastive_k = parse_int<int>(key, value, "a whole number from 2 to 16");
    if (p.contrastive_k < kMinContrastiveK || p.contrastive_k > kMaxContrastiveK)
      bad_value(key, value, "a whole number from 2 to 16");
    return true;
  }
  if (key == "alpha") {
    p.penalty_alpha = parse_float(key, value);
    if (!(p.penalty_alpha >= 0.0f && p.penalty_alpha <= 1.0f))
      bad_value(key, value, "a number from 0 to 1");
    return true;
  }
  return false;
}

// What contrastive search cannot be combined with (it is deterministic and
// chooses by score, not by a draw or a beam).
void validate_contrastive(const SamplingParams& p) {
  if (!p.contrastive()) {
    if (p.penalty_alpha != kDefaultPenaltyAlpha) throw Error("alpha needs contrastive=K");
    return;
  }
  if (p.contrastive_k < kMinContrastiveK || p.contrastive_k > kMaxContrastiveK)
    throw Error("contrastive must be from 2 to 16 candidates, 0 = off (got " +
                std::to_string(p.contrastive_k) + ")");
  if (!(p.penalty_alpha >= 0.0f && p.penalty_alpha <= 1.0f))
    throw Error("alpha must be in [0, 1] (got " + num(p.penalty_alpha) + ")");
  if (p.do_sample)
    throw Error(
        "contrastive cannot be combined with sampling (contrastive search is deterministic)");
  if (p.beam_search()) throw Error("contrastive cannot be combined with beams");
  if (p.repetition_penalty != 1.0f)
    throw Error("contrastive cannot be combined with repetition_penalty");
}

void check_contrastive_items(const SamplingParams& p, bool greedy_word,
                             const std::string& sampling_item,
                             const std::vector<std::string>& seen) {
  if (!p.contrastive()) {
    for (const std::string& key : seen)
      if (key == "alpha") throw Error("strategy: alpha needs contrastive=K");
    return;
  }
  if (greedy_word) throw Error("strategy: contrastive cannot be combined with greedy");
  if (!sampling_item.empty())
    throw Error("strategy: contrastive cannot be combined with " + sampling_item +
                " (contrastive search is deterministic)");
}

// DoLa's item: dola=low, dola=high or dola=N (more layers follow as bare
// numbers, see dola_more_layers). Returns false for any other key.
bool parse_dola_item(const std::string& key, std::string_view value, SamplingParams& p) {
  if (key != "dola") return false;
  if (value == "low") {
    p.dola_mode = DolaMode::kLow;
  } else if (value == "high") {
    p.dola_mode = DolaMode::kHigh;
  } else {
    p.dola_mode = DolaMode::kLayers;
    p.dola_layers = {parse_int<int>(key, value, "low, high or a layer number >= 0")};
    if (p.dola_layers[0] < 0) bad_value(key, value, "low, high or a layer number >= 0");
  }
  return true;
}

// A bare whole number right after dola=N (or after another such number)
// continues DoLa's layer list: "dola=2,4" lists layers 2 and 4.
bool dola_more_layers(std::string_view item, const std::string& previous_key, SamplingParams& p) {
  if (previous_key != "dola" || p.dola_mode != DolaMode::kLayers || item.empty()) return false;
  if (item.find_first_not_of("0123456789") != std::string_view::npos) return false;
  const int layer = parse_int<int>("dola", item, "a layer number >= 0");
  for (int l : p.dola_layers)
    if (l == layer) throw Error("strategy: dola layer " + std::to_string(layer) + " given twice");
  p.dola_layers.push_back(layer);
  return true;
}

// lookahead[=W[,N[,G]]] and prompt_lookup[=K[,M]]: the first number after
// '=', then bare numbers continue the list. Returns false for other keys.
bool parse_draft_free_item(const std::string& key, std::string_view value, SamplingParams& p) {
  if (key == "lookahead") {
    p.lookahead_on = true;
    if (!value.empty())
      p.lookahead.window = parse_int<int>(key, value, "W,N,G: window, n-gram size, candidates");
    return true;
  }
  if (key == "prompt_lookup") {
    p.prompt_lookup_on = true;
    if (!value.empty())
      p.prompt_lookup.tokens = parse_int<int>(key, value, "K,M: draft tokens, n-gram size");
    return true;
  }
  return false;
}

// A bare number right after lookahead=W or prompt_lookup=K: the next field
// of its list (*index counts the numbers given so far).
bool draft_free_more(std::string_view item, const std::string& previous_key, int* index,
                     SamplingParams& p) {
  if (previous_key != "lookahead" && previous_key != "prompt_lookup") return false;
  if (item.empty() || item.find_first_not_of("0123456789") != std::string_view::npos) return false;
  const int fields = previous_key == "lookahead" ? 3 : 2;
  if (*index == 0)
    throw Error("strategy: " + previous_key + "'s numbers follow '=' (" + previous_key +
                (fields == 3 ? "=W,N,G)" : "=K,M)"));
  if (*index >= fields)
    throw Error("strategy: " + previous_key + " takes at most " + std::to_string(fields) +
                " numbers (" + (fields == 3 ? "W,N,G" : "K,M") + ")");
  const int v = parse_int<int>(previous_key, item, "a whole number");
  if (previous_key == "lookahead")
    (*index == 1 ? p.lookahead.ngram : p.lookahead.verify) = v;
  else
    p.prompt_lookup.max_ngram = v;
  ++*index;
  return true;
}

void validate_draft_free(const SamplingParams& p) {
  if (p.lookahead_on) validate(p.lookahead);
  if (p.prompt_lookup_on) validate(p.prompt_lookup);
  if (!p.draft_free()) return;
  const char* name = p.lookahead_on ? "lookahead" : "prompt_lookup";
  if (p.lookahead_on && p.prompt_lookup_on)
    throw Error("lookahead cannot be combined with prompt_lookup");
  if (p.beam_search()) throw Error(std::string(name) + " cannot be combined with beams");
  if (p.contrastive()) throw Error(std::string(name) + " cannot be combined with contrastive");
  if (p.speculative()) throw Error(std::string(name) + " cannot be combined with spec");
  if (p.dola()) throw Error(std::string(name) + " cannot be combined with dola");
}

std::string format_draft_free(const SamplingParams& p, const char* sep, bool words) {
  if (p.lookahead_on)
    return std::string(words ? "lookahead " : "lookahead=") + std::to_string(p.lookahead.window) +
           sep + std::to_string(p.lookahead.ngram) + sep + std::to_string(p.lookahead.verify);
  return std::string(words ? "prompt lookup " : "prompt_lookup=") +
         std::to_string(p.prompt_lookup.tokens) + sep + std::to_string(p.prompt_lookup.max_ngram);
}

// What DoLa cannot be combined with (its contrast replaces the logits of
// one sequence; beams and contrastive search choose otherwise).
void validate_dola(const SamplingParams& p) {
  if (!p.dola()) {
    if (!p.dola_layers.empty()) throw Error("dola layers given without dola");
    return;
  }
  if (p.dola_mode == DolaMode::kLayers) {
    if (p.dola_layers.empty()) throw Error("dola: the layer list is empty");
    for (size_t i = 0; i < p.dola_layers.size(); ++i) {
      if (p.dola_layers[i] < 0)
        throw Error("dola: layer " + std::to_string(p.dola_layers[i]) + " is negative");
      for (size_t j = 0; j < i; ++j)
        if (p.dola_layers[j] == p.dola_layers[i])
          throw Error("dola: layer " + std::to_string(p.dola_layers[i]) + " is listed twice");
    }
  } else if (!p.dola_layers.empty()) {
    throw Error("dola: a layer list goes with explicit layers only");
  }
  if (p.beam_search()) throw Error("dola cannot be combined with beams");
  if (p.contrastive()) throw Error("dola cannot be combined with contrastive");
}

std::string format_dola(const SamplingParams& p) {
  return "dola=" + dola_layers_text(p.dola_mode, p.dola_layers);
}

std::string format_contrastive(const SamplingParams& p) {
  return "contrastive=" + std::to_string(p.contrastive_k) + ",alpha=" + num(p.penalty_alpha);
}

// Speculative decoding's item: spec=N (1..16) or spec=auto. Returns false
// for any other key.
bool parse_spec_item(const std::string& key, std::string_view value, SamplingParams& p) {
  if (key != "spec") return false;
  if (value == "auto") {
    p.spec_gamma = kSpecGammaAuto;
    return true;
  }
  p.spec_gamma = parse_int<int>(key, value, "a whole number from 1 to 16 or auto");
  if (p.spec_gamma < kMinSpecGamma || p.spec_gamma > kMaxSpecGamma)
    bad_value(key, value, "a whole number from 1 to 16 or auto");
  return true;
}

void validate_spec(const SamplingParams& p) {
  if (!p.speculative()) return;
  if (p.spec_gamma != kSpecGammaAuto &&
      (p.spec_gamma < kMinSpecGamma || p.spec_gamma > kMaxSpecGamma))
    throw Error("spec must be from 1 to 16 draft tokens a round or auto, 0 = off (got " +
                std::to_string(p.spec_gamma) + ")");
  if (p.beam_search()) throw Error("spec cannot be combined with beams");
  if (p.contrastive()) throw Error("spec cannot be combined with contrastive");
  // The draft would have to contrast its own layers too; HF's assisted
  // generation does not do DoLa either.
  if (p.dola()) throw Error("spec cannot be combined with dola");
}

std::string format_spec(const SamplingParams& p) {
  return p.spec_gamma == kSpecGammaAuto ? "spec=auto" : "spec=" + std::to_string(p.spec_gamma);
}

}  // namespace

void SamplingParams::validate() const {
  if (do_sample && !(std::isfinite(temperature) && temperature > 0.0f)) {
    throw Error("temperature must be a finite number > 0 when sampling (got " + num(temperature) +
                "); use greedy for argmax decoding");
  }
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    throw Error("top_p must be in (0, 1] (got " + num(top_p) + ")");
  }
  if (top_k < 0) {
    throw Error("top_k must be >= 0, 0 = off (got " + std::to_string(top_k) + ")");
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    throw Error("min_p must be in [0, 1], 0 = off (got " + num(min_p) + ")");
  }
  if (!(std::isfinite(repetition_penalty) && repetition_penalty > 0.0f)) {
    throw Error("repetition_penalty must be a finite number > 0, 1 = off (got " +
                num(repetition_penalty) + ")");
  }
  if (num_beams < 1 || num_beams > kMaxBeams) {
    throw Error("beams must be from 2 to " + std::to_string(kMaxBeams) + ", 1 = off (got " +
                std::to_string(num_beams) + ")");
  }
  if (!std::isfinite(length_penalty)) {
    throw Error("length_penalty must be a finite number (got " + num(length_penalty) + ")");
  }
  if (!beam_search() && (length_penalty != 1.0f || early_stopping != EarlyStopping::kFalse)) {
    throw Error("length_penalty and early_stopping need beams=N");
  }
  if (beam_search() && do_sample) {
    throw Error("beams cannot be combined with sampling (beam search is deterministic)");
  }
  if (beam_search() && repetition_penalty != 1.0f) {
    throw Error("beams cannot be combined with repetition_penalty");
  }
  validate_contrastive(*this);
  validate_spec(*this);
  validate_dola(*this);
  validate_draft_free(*this);
}

SamplingParams parse_strategy(std::string_view text) {
  SamplingParams p;
  if (trim(text).empty()) throw Error("strategy: empty (try \"greedy\" or \"top_p=0.9\")");

  bool greedy_word = false;
  bool beams_given = false;
  std::string sampling_item;  // first item that asked for sampling, for the error message
  std::string beam_key;       // first beam-only item, for the error message
  std::vector<std::string> seen;
  std::string previous_key;  // for DoLa's layer list and lookahead's numbers
  int list_index = 0;        // numbers given so far in lookahead's / prompt_lookup's list
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string_view item = trim(text.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) throw Error("strategy: empty item in \"" + std::string(text) + "\"");
    if (dola_more_layers(item, previous_key, p)) continue;
    if (draft_free_more(item, previous_key, &list_index, p)) continue;

    size_t eq = item.find('=');
    std::string key(trim(item.substr(0, eq)));
    std::string_view value =
        eq == std::string_view::npos ? std::string_view{} : trim(item.substr(eq + 1));
    for (const auto& k : seen) {
      if (k == key) throw Error("strategy: " + key + " given twice");
    }
    seen.push_back(key);
    previous_key = key;
    list_index = eq == std::string_view::npos ? 0 : 1;

    if (eq == std::string_view::npos) {
      if (key == "greedy") {
        greedy_word = true;
      } else if (key == "sample") {
        p.do_sample = true;
        if (sampling_item.empty()) sampling_item = key;
      } else if (parse_draft_free_item(key, value, p)) {
      } else if (key == "temperature" || key == "top_k" || key == "top_p" || key == "min_p" ||
                 key == "repetition_penalty" || key == "seed" || key == "beams" ||
                 key == "length_penalty" || key == "early_stopping" || key == "contrastive" ||
                 key == "alpha" || key == "spec" || key == "dola") {
        throw Error("strategy: " + key + " needs a value (" + key + "=...)");
      } else {
        throw Error("strategy: unknown item '" + key +
                    "' (expected greedy, sample, temperature=, top_k=, top_p=, min_p=, "
                    "repetition_penalty=, seed=, beams=, length_penalty=, early_stopping=, "
                    "contrastive=, alpha=, spec=, dola=, lookahead, prompt_lookup)");
      }
      continue;
    }
    if (parse_draft_free_item(key, value, p)) continue;
    if (parse_contrastive_item(key, value, p)) continue;
    if (parse_spec_item(key, value, p)) continue;
    if (parse_dola_item(key, value, p)) continue;
    if (key == "temperature") {
      p.temperature = parse_float(key, value);
    } else if (key == "top_p") {
      p.top_p = parse_float(key, value);
    } else if (key == "min_p") {
      p.min_p = parse_float(key, value);
    } else if (key == "top_k") {
      p.top_k = parse_int<int>(key, value, "a whole number");
    } else if (key == "repetition_penalty") {
      p.repetition_penalty = parse_float(key, value);
    } else if (key == "seed") {
      p.seed = parse_int<uint64_t>(key, value, "a whole number >= 0");
    } else if (key == "beams") {
      p.num_beams = parse_int<int>(key, value, "a whole number from 2 to 8");
      if (p.num_beams < 2 || p.num_beams > kMaxBeams)
        bad_value(key, value, "a whole number from 2 to 8");
      beams_given = true;
    } else if (key == "length_penalty") {
      p.length_penalty = parse_float(key, value);
    } else if (key == "early_stopping") {
      p.early_stopping = parse_early_stopping(value);
    } else {
      throw Error("strategy: unknown key '" + key +
                  "' (expected temperature, top_k, top_p, min_p, repetition_penalty, seed, "
                  "beams, length_penalty, early_stopping, contrastive, alpha, spec, dola, "
                  "lookahead, prompt_lookup)");
    }
    if (key == "length_penalty" || key == "early_stopping") {
      if (beam_key.empty()) beam_key = key;
    } else if (key != "repetition_penalty" && key != "seed" && key != "beams") {
      p.do_sample = true;
      if (sampling_item.empty()) sampling_item = key;
    }
  }
  if (greedy_word && p.do_sample) {
    throw Error("strategy: greedy cannot be combined with " + sampling_item);
  }
  if (beams_given && (greedy_word || p.do_sample)) {
    throw Error("strategy: beams cannot be combined with " +
                (greedy_word ? std::string("greedy") : sampling_item) +
                " (beam search is deterministic)");
  }
  check_contrastive_items(p, greedy_word, sampling_item, seen);
  if (p.speculative() && (beams_given || p.contrastive()))
    throw Error(std::string("strategy: spec cannot be combined with ") +
                (beams_given ? "beams" : "contrastive"));
  if (!beam_key.empty() && !beams_given) {
    throw Error("strategy: " + beam_key + " needs beams=N");
  }
  p.validate();
  return p;
}

std::string format_strategy(const SamplingParams& p) {
  std::string out;
  auto add = [&out](const std::string& item) {
    if (!out.empty()) out += ',';
    out += item;
  };
  // A speculative lane: spec=N first, then its warping ("spec=4" alone is greedy).
  if (p.speculative()) add(format_spec(p));
  if (p.draft_free()) add(format_draft_free(p, ",", false));
  if (p.beam_search()) {
    add("beams=" + std::to_string(p.num_beams));
    if (p.length_penalty != 1.0f) add("length_penalty=" + num(p.length_penalty));
    if (p.early_stopping != EarlyStopping::kFalse)
      add(std::string("early_stopping=") + early_stopping_name(p.early_stopping));
  } else if (p.contrastive()) {
    add(format_contrastive(p));
  } else if (!p.do_sample) {
    if (p.dola())
      add(format_dola(p));
    else if (!p.speculative() && !p.draft_free())
      add("greedy");
  } else {
    if (p.dola()) add(format_dola(p));
    const size_t before = out.size();
    if (p.temperature != 1.0f) add("temperature=" + num(p.temperature));
    if (p.top_k != 0) add("top_k=" + std::to_string(p.top_k));
    if (p.top_p != 1.0f) add("top_p=" + num(p.top_p));
    if (p.min_p != 0.0f) add("min_p=" + num(p.min_p));
    // Plain sampling with every default still has to read back as sampling.
    if (out.size() == before) add("sample");
  }
  if (p.repetition_penalty != 1.0f) add("repetition_penalty=" + num(p.repetition_penalty));
  if (p.seed != 0) add("seed=" + std::to_string(p.seed));
  return out;
}

std::string describe(const SamplingParams& p) {
  static constexpr const char* kSep = " \u00b7 ";  // " · "
  std::vector<std::string> parts;
  if (p.speculative())
    parts.push_back(p.spec_gamma == kSpecGammaAuto ? std::string("spec auto")
                                                   : "spec " + std::to_string(p.spec_gamma));
  if (p.draft_free()) parts.push_back(format_draft_free(p, ",", true));
  if (p.beam_search()) {
    parts.push_back("beams " + std::to_string(p.num_beams));
    if (p.length_penalty != 1.0f) parts.push_back("lp " + num(p.length_penalty));
    if (p.early_stopping != EarlyStopping::kFalse)
      parts.push_back(std::string("early ") + early_stopping_name(p.early_stopping));
  } else if (p.contrastive()) {
    parts.push_back("contrastive " + std::to_string(p.contrastive_k));
    parts.push_back("\u03b1 " + num(p.penalty_alpha));  // "α 0.6"
  } else if (!p.do_sample) {
    parts.push_back(p.dola() ? "DoLa " + dola_layers_text(p.dola_mode, p.dola_layers) : "greedy");
  } else {
    if (p.dola()) parts.push_back("DoLa " + dola_layers_text(p.dola_mode, p.dola_layers));
    if (p.top_k != 0) parts.push_back("top-k " + std::to_string(p.top_k));
    if (p.top_p != 1.0f) parts.push_back("top-p " + num(p.top_p));
    if (p.min_p != 0.0f) parts.push_back("min-p " + num(p.min_p));
    bool filtered = p.top_k != 0 || p.top_p != 1.0f || p.min_p != 0.0f;
    if (!filtered) parts.push_back("sample");
    if (p.temperature != 1.0f || !filtered) parts.push_back("T " + num(p.temperature));
  }
  if (p.repetition_penalty != 1.0f) parts.push_back("rep " + num(p.repetition_penalty));
  if (p.do_sample && p.seed != 0) parts.push_back("seed " + std::to_string(p.seed));
  std::string out;
  for (const auto& s : parts) {
    if (!out.empty()) out += kSep;
    out += s;
  }
  return out;
}

}  // namespace ts
