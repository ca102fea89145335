#include "model/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include "model/mapped_file.h"
#include "util/error.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Llama 3's tokenizer.json is 9 MB; anything past this is not a tokenizer.
constexpr uint64_t kMaxTokenizerJsonBytes = uint64_t{1} << 29;

json parse(std::string_view text, const std::string& name) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    // Drop nlohmann's "[json.exception.parse_error.101] " prefix.
    std::string what = e.what();
    const size_t tag_end = what.find("] ");
    if (tag_end != std::string::npos) what = what.substr(tag_end + 2);
    throw Error(name + ": invalid JSON: " + what);
  }
}

// Field access that turns every surprise into one line naming the field.
class Reader {
 public:
  explicit Reader(std::string name) : name_(std::move(name)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw Error(name_ + ": " + path + ": " + what);
  }
  const json* get(const json& obj, const char* key) const {
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  const json& object(const json& v, const std::string& path) const {
    if (!v.is_object()) fail(path, "expected an object");
    return v;
  }
  const json& array(const json& v, const std::string& path) const {
    if (!v.is_array()) fail(path, "expected an array");
    return v;
  }
  const std::string& string(const json& v, const std::string& path) const {
    if (!v.is_string()) fail(path, "expected a string");
    return v.get_ref<const std::string&>();
  }
  bool boolean(const json& obj, const char* key, const std::string& path, bool fallback) const {
    const json* v = get(obj, key);
    if (!v) return fallback;
    if (!v->is_boolean()) fail(path + "." + key, "expected true or false");
    return v->get<bool>();
  }
  int64_t integer(const json& v, const std::string& path) const {
    if (!v.is_number_integer()) fail(path, "expected an integer");
    return v.get<int64_t>();
  }
  std::string type(const json& obj, const std::string& path) const {
    object(obj, path);
    const json* t = get(obj, "type");
    if (!t) fail(path + ".type", "missing");
    return string(*t, path + ".type");
  }
  // A refusal: the field's value is valid JSON but not something we run.
  [[noreturn]] void unsupported(const std::string& path, const json& value,
                                const std::string& why) const {
    std::string shown = value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (shown.size() > 80) shown = shown.substr(0, 80) + "...";
    fail(path, shown + " is not supported (" + why + ")");
  }
  // Fields that must be absent, null, false, 0 or "".
  void must_be_off(const json& obj, const char* key, const std::string& path,
                   const std::string& why) const {
    const json* v = get(obj, key);
    if (!v) return;
    const bool off = (v->is_boolean() && !v->get<bool>()) ||
                     (v->is_number() && v->get<double>() == 0) ||
                     (v->is_string() && v->get_ref<const std::string&>().empty());
    if (!off) unsupported(path + "." + key, *v, why);
  }

 private:
  std::string name_;
};

// One Isolated Split, as its regex.
std::string read_split(const Reader& r, const json& split, const std::string& path) {
  const json* behavior = r.get(split, "behavior");
  if (!behavior || r.string(*behavior, path + ".behavior") != "Isolated") {
    r.unsupported(path + ".behavior", behavior ? *behavior : json(nullptr), "only \"Isolated\"");
  }
  if (r.boolean(split, "invert", path, false)) r.unsupported(path + ".invert", true, "only false");
  const json* pattern = r.get(split, "pattern");
  if (!pattern) r.fail(path + ".pattern", "missing");
  r.object(*pattern, path + ".pattern");
  const json* regex = r.get(*pattern, "Regex");
  if (!regex) r.unsupported(path + ".pattern", *pattern, "only {\"Regex\": ...}");
  const std::string& text = r.string(*regex, path + ".pattern.Regex");
  if (text.empty()) r.fail(path + ".pattern.Regex", "empty pattern");
  return text;
}

// The pre-tokenizer as a chain of Isolated splits: Split(Regex) and Digits
// stages, then ByteLevel last (with use_regex, GPT-2's pattern as the final
// stage).
std::vector<std::string> read_pre_tokenizer(const Reader& r, const json* pt) {
  if (!pt) r.fail("pre_tokenizer", "missing; byte-level BPE needs a ByteLevel pre-tokenizer");
  std::vector<std::pair<const json*, std::string>> stages;
  if (r.type(*pt, "pre_tokenizer") == "Sequence") {
    const json* list = r.get(*pt, "pretokenizers");
    if (!list) r.fail("pre_tokenizer.pretokenizers", "missing");
    r.array(*list, "pre_tokenizer.pretokenizers");
    for (size_t i = 0; i < list->size(); ++i) {
      stages.emplace_back(&(*list)[i], "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]");
    }
  } else {
    stages.emplace_back(pt, "pre_tokenizer");
  }
  std::vector<std::string> patterns;
  bool byte_level = false;
  for (const auto& [stage, path] : stages) {
    const std::string type = r.type(*stage, path);
    if (byte_level) {
      r.unsupported(path + ".type", type, "ByteLevel must be the last pre-tokenizer");
    }
    if (type == "Split") {
      patterns.push_back(read_split(r, *stage, path));
    } else if (type == "Digits") {
      patterns.push_back(r.boolean(*stage, "individual_digits", path, false) ? "\\p{N}"
                                                                             : "\\p{N}+");
    } else if (type == "ByteLevel") {
      byte_level = true;
      if (r.boolean(*stage, "add_prefix_space", path, false)) {
        r.unsupported(path + ".add_prefix_space", true, "only false");
      }
      if (r.boolean(*stage, "use_regex", path, true)) {
        patterns.emplace_back(kGpt2SplitPattern);
      }
    } else {
      r.unsupported(path + ".type", type, "only Split, Digits and ByteLevel");
    }
  }
  if (!byte_level) {
    r.fail("pre_tokenizer", "no ByteLevel pre-tokenizer; only byte-level BPE is supported");
  }
  if (patterns.empty()) {
    r.fail("pre_tokenizer", "nothing splits the text (ByteLevel with use_regex false alone)");
  }
  return patterns;
}

// BOS from the post-processor: nullopt when it adds none.
struct Bos {
  bool add = false;
  std::string token;
  int64_t id = -1;
};

void read_template(const Reader& r, const json& tp, const std::string& path, Bos& bos) {
  const json* single = r.get(tp, "single");
  if (!single) r.fail(path + ".single", "missing");
  r.array(*single, path + ".single");
  const auto is_sequence_a = [&](const json& item) {
    const json* seq = item.is_object() ? r.get(item, "Sequence") : nullptr;
    const json* id = seq && seq->is_object() ? r.get(*seq, "id") : nullptr;
    return id && id->is_string() && *id == "A";
  };
  const json* special = nullptr;
  if (single->size() == 2 && is_sequence_a((*single)[1]) && (*single)[0].is_object()) {
    special = r.get((*single)[0], "SpecialToken");
  }
  if (!(single->size() == 1 && is_sequence_a((*single)[0])) && !special) {
    r.unsupported(path + ".single", *single, "only \"$A\" or \"<bos> $A\"");
  }
  if (!special) return;
  const json* token_id = special->is_object() ? r.get(*special, "id") : nullptr;
  if (!token_id) r.fail(path + ".single[0].SpecialToken.id", "missing");
  bos.add = true;
  bos.token = r.string(*token_id, path + ".single[0].SpecialToken.id");
  // special_tokens maps the name to its ids; one id makes a BOS.
  const json* table = r.get(tp, "special_tokens");
  const json* entry = table && table->is_object() ? r.get(*table, bos.token.c_str()) : nullptr;
  if (!entry) return;  // resolved by content below
  const std::string entry_path = path + ".special_tokens[" + bos.token + "].ids";
  const json* ids = entry->is_object() ? r.get(*entry, "ids") : nullptr;
  if (!ids) r.fail(entry_path, "missing");
  r.array(*ids, entry_path);
  if (ids->size() != 1) r.unsupported(entry_path, *ids, "exactly one id");
  bos.id = r.integer((*ids)[0], entry_path + "[0]");
}

Bos read_post_processor(const Reader& r, const json* pp) {
  Bos bos;
  if (!pp) return bos;
  const std::string type = r.type(*pp, "post_processor");
  const auto one = [&](const json& p, const std::string& path, const std::string& t) {
    if (t == "ByteLevel") return;  // offsets only
    if (t == "TemplateProcessing") return read_template(r, p, path, bos);
    r.unsupported(path + ".type", t, "only ByteLevel, TemplateProcessing or a Sequence of them");
  };
  if (type != "Sequence") {
    one(*pp, "post_processor", type);
    return bos;
  }
  const json* list = r.get(*pp, "processors");
  if (!list) r.fail("post_processor.processors", "missing");
  r.array(*list, "post_processor.processors");
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string path = "post_processor.processors[" + std::to_string(i) + "]";
    one((*list)[i], path, r.type((*list)[i], path));
  }
  return bos;
}

// A token named by its text: the added token with that content, or the
// vocabulary entry whose bytes it is.
int64_t token_id(const TokenizerSpec& spec, const std::string& text) {
  for (const TokenizerSpec::AddedToken& a : spec.added) {
    if (a.content == text) return a.id;
  }
  const std::string as_vocab = bytes_to_gpt2_unicode(text);
  for (const TokenizerSpec::Entry& e : spec.vocab) {
    if (e.token == as_vocab) return e.id;
  }
  return -1;
}

// tokenizer_config.json's bos_token / eos_token: a string or {"content": ...}.
std::string config_token(const Reader& r, const json& config, const char* key) {
  const json* v = r.get(config, key);
  if (!v) return {};
  if (v->is_object()) {
    const json* content = r.get(*v, "content");
    if (!content) r.fail(std::string(key) + ".content", "missing");
    return r.string(*content, std::string(key) + ".content");
  }
  return r.string(*v, key);
}

Tokenizer read_tokenizer_json(std::string_view text, std::string_view config_text,
                              const std::string& name, const std::string& config_name);

}  // namespace

Tokenizer tokenizer_json_from_text(std::string_view text, std::string_view config_text,
                                   const std::string& name, const std::string& config_name) {
  try {
    return read_tokenizer_json(text, config_text, name, config_name);
  } catch (const json::exception& e) {
    // A shape the reads above did not foresee still ends as one line.
    throw Error(name + ": unexpected JSON shape: " + e.what());
  }
}

namespace {

Tokenizer read_tokenizer_json(std::string_view text, std::string_view config_text,
                              const std::string& name, const std::string& config_name) {
  const json root = parse(text, name);
  const Reader r(name);
  r.object(root, "(top level)");
  TokenizerSpec spec;

  if (const json* n = r.get(root, "normalizer")) {
    // NFC (Qwen2's) is accepted for text NFC leaves unchanged: encode()
    // refuses any other text in one line. Others would change the text.
    if (r.type(*n, "normalizer") != "NFC") r.unsupported("normalizer", *n, "only null or NFC");
    spec.nfc_normalizer = true;
  }
  if (const json* t = r.get(root, "truncation")) r.unsupported("truncation", *t, "only null");
  if (const json* p = r.get(root, "padding")) r.unsupported("padding", *p, "only null");
  if (const json* d = r.get(root, "decoder")) {
    const std::string type = r.type(*d, "decoder");
    if (type != "ByteLevel") r.unsupported("decoder.type", type, "only ByteLevel");
  }

  // --- model ---
  const json* model = r.get(root, "model");
  if (!model) r.fail("model", "missing");
  const std::string type = r.type(*model, "model");
  if (type != "BPE") r.unsupported("model.type", type, "only byte-level BPE");
  r.must_be_off(*model, "byte_fallback", "model", "byte-level BPE has every byte");
  r.must_be_off(*model, "dropout", "model", "encoding must be deterministic");
  r.must_be_off(*model, "continuing_subword_prefix", "model", "byte-level BPE has none");
  r.must_be_off(*model, "end_of_word_suffix", "model", "byte-level BPE has none");
  spec.ignore_merges = r.boolean(*model, "ignore_merges", "model", false);
  const json* vocab = r.get(*model, "vocab");
  if (!vocab) r.fail("model.vocab", "missing");
  r.object(*vocab, "model.vocab");
  spec.vocab.reserve(vocab->size());
  for (const auto& [key, value] : vocab->items()) {
    spec.vocab.push_back({key, r.integer(value, "model.vocab[" + key + "]")});
  }
  const json* merges = r.get(*model, "merges");
  if (!merges) r.fail("model.merges", "missing");
  r.array(*merges, "model.merges");
  spec.merges.reserve(merges->size());
  for (size_t i = 0; i < merges->size(); ++i) {
    const std::string path = "model.merges[" + std::to_string(i) + "]";
    const json& m = (*merges)[i];
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || space == 0 || space + 1 == s.size() ||
          s.find(' ', space + 1) != std::string::npos) {
        r.fail(path, "expected two tokens separated by one space");
      }
      spec.merges.push_back({s.substr(0, space), s.substr(space + 1), path});
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec.merges.push_back({m[0].get<std::string>(), m[1].get<std::string>(), path});
    } else {
      r.fail(path, "expected \"a b\" or [\"a\", \"b\"]");
    }
  }

  // --- added tokens ---
  if (const json* added = r.get(root, "added_tokens")) {
    r.array(*added, "added_tokens");
    for (size_t i = 0; i < added->size(); ++i) {
      const std::string path = "added_tokens[" + std::to_string(i) + "]";
      const json& a = r.object((*added)[i], path);
      for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
        if (r.boolean(a, flag, path, false)) {
          r.unsupported(path + "." + flag, true, "only false");
        }
      }
      const json* id = r.get(a, "id");
      const json* content = r.get(a, "content");
      if (!id) r.fail(path + ".id", "missing");
      if (!content) r.fail(path + ".content", "missing");
      spec.added.push_back(
          {r.string(*content, path + ".content"), r.integer(*id, path + ".id"), path});
    }
  }

  spec.split_patterns = read_pre_tokenizer(r, r.get(root, "pre_tokenizer"));
  Bos bos = read_post_processor(r, r.get(root, "post_processor"));

  // --- tokenizer_config.json ---
  std::string eos_text;
  if (!config_text.empty()) {
    const json config = parse(config_text, config_name);
    const Reader c(config_name);
    c.object(config, "(top level)");
    const std::string bos_text = config_token(c, config, "bos_token");
    eos_text = config_token(c, config, "eos_token");
    if (c.get(config, "add_bos_token")) {
      bos.add = c.boolean(config, "add_bos_token", "(top level)", false);
      if (bos.add) {
        if (bos_text.empty()) c.fail("bos_token", "missing while add_bos_token is true");
        bos.token = bos_text;
        bos.id = -1;
      }
    }
  }
  if (bos.add && bos.id < 0) {
    bos.id = token_id(spec, bos.token);
    if (bos.id < 0) r.fail("BOS token \"" + bos.token + "\"", "not in the vocabulary");
  }
  spec.add_bos = bos.add;
  spec.bos_id = bos.id;
  if (!eos_text.empty()) {
    spec.eot_id = token_id(spec, eos_text);
    if (spec.eot_id < 0)
      throw Error(config_name + ": eos_token \"" + eos_text + "\" is not a token");
  } else {
    for (const char* t : {"<|endoftext|>", "<|end_of_text|>", "</s>"}) {
      spec.eot_id = token_id(spec, t);
      if (spec.eot_id >= 0) break;
    }
  }
  return Tokenizer::from_spec(spec, name);
}

}  // namespace

Tokenizer load_tokenizer_json(const fs::path& tokenizer_json, const fs::path& tokenizer_config) {
  const std::string text =
      read_regular_file(tokenizer_json, kMaxTokenizerJsonBytes, "a tokenizer file");
  fs::path config_path = tokenizer_config;
  std::error_code ec;
  if (config_path.empty()) {
    const fs::path beside = tokenizer_json.parent_path() / "tokenizer_config.json";
    if (fs::exists(beside, ec)) config_path = beside;
  }
  const std::string config =
      config_path.empty()
          ? std::string()
          : read_regular_file(config_path, kMaxTokenizerJsonBytes, "a tokenizer file");
  return tokenizer_json_from_text(text, config, tokenizer_json.string(), config_path.string());
}

}  // namespace ts
