#include "session/model_flags.h"

#include <charconv>
#include <cmath>
#include <system_error>

#include "util/error.h"
#include "util/paths.h"
#include "util/thread_pool.h"

namespace ts {

FlagReader::FlagReader(int argc, const char* const* argv) : argc_(argc), argv_(argv) {}

bool FlagReader::next() {
  if (++i_ >= argc_) return false;
  flag_ = argv_[i_];
  has_inline_ = false;
  inline_value_.clear();
  if (flag_.rfind("--", 0) == 0) {
    const size_t eq = flag_.find('=');
    if (eq != std::string::npos) {
      inline_value_ = flag_.substr(eq + 1);
      flag_.resize(eq);
      has_inline_ = true;
    }
  }
  return true;
}

std::string FlagReader::value() {
  if (has_inline_) return inline_value_;
  if (i_ + 1 >= argc_) throw Error(flag_ + " needs a value (see --help)");
  const std::string v = argv_[i_ + 1];
  if (v.rfind("--", 0) == 0)
    throw Error(flag_ + " needs a value, got the option '" + v + "' (write " + flag_ + "=" + v +
                " for a value that starts with --)");
  ++i_;
  return v;
}

void FlagReader::no_value() const {
  if (has_inline_) throw Error(flag_ + " takes no value (got '" + inline_value_ + "')");
}

std::vector<std::string> FlagReader::values_up_to_next_flag() {
  std::vector<std::string> out;
  if (has_inline_) {
    out.push_back(inline_value_);
    return out;
  }
  while (i_ + 1 < argc_ && std::string(argv_[i_ + 1]).rfind("--", 0) != 0)
    out.emplace_back(argv_[++i_]);
  return out;
}

long long parse_whole_number(const std::string& flag, const std::string& text, long long lo,
                             long long hi) {
  long long v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ptr != end || (ec != std::errc() && ec != std::errc::result_out_of_range))
    throw Error(flag + ": '" + text + "' is not a whole number");
  const bool negative = text[0] == '-';
  if (ec == std::errc::result_out_of_range || v > hi || v < lo) {
    if (negative || (ec != std::errc::result_out_of_range && v < lo))
      throw Error(flag + ": " + text + " is out of range, at least " + std::to_string(lo));
    throw Error(flag + ": " + text + " is out of range, at most " + std::to_string(hi));
  }
  return v;
}

float parse_decimal(const std::string& flag, const std::string& text) {
  float v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ptr != end || ec == std::errc::invalid_argument)
    throw Error(flag + ": '" + text + "' is not a number");
  if (ec == std::errc::result_out_of_range || !std::isfinite(v))
    throw Error(flag + ": " + text + " is out of the range of a float");
  return v;
}

uint64_t parse_unsigned(const std::string& flag, const std::string& text) {
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ptr != end || ec == std::errc::invalid_argument)
    throw Error(flag + ": '" + text + "' is not a non-negative whole number");
  if (ec == std::errc::result_out_of_range)
    throw Error(flag + ": " + text + " is out of range, at most 18446744073709551615");
  return v;
}

std::string non_empty(const std::string& flag, const std::string& text) {
  if (text.empty()) throw Error(flag + ": the value is empty");
  return text;
}

int max_cpu_threads() { return ThreadPool::max_threads(); }

bool parse_model_flag(FlagReader& reader, ModelSetupOptions& setup) {
  const std::string& f = reader.flag();
  if (f == "--model") {
    setup.model = non_empty(f, reader.value());
  } else if (f == "--tokenizer") {
    setup.tokenizer = non_empty(f, reader.value());
  } else if (f == "--device") {
    const std::string d = reader.value();
    if (d != "auto" && d != "cpu" && d != "cuda")
      throw Error("--device: expected auto, cpu or cuda, got '" + d + "'");
    setup.device = d;
  } else if (f == "--weights") {
    setup.weights = parse_weight_format(reader.value());
  } else if (f == "--kv") {
    setup.kv = parse_kv_format(reader.value());
  } else if (f == "--threads") {
    setup.cpu_threads =
        static_cast<int>(parse_whole_number(f, reader.value(), 0, max_cpu_threads()));
  } else {
    return false;
  }
  return true;
}

std::string model_flags_help() {
  return "  --model PATH            Hugging Face GPT-2, Llama or Qwen2 directory (config.json,\n"
         "                          model.safetensors or shards, vocab.json + merges.txt or\n"
         "                          tokenizer.json) or llm.c gpt2_*.bin (then also --tokenizer\n"
         "                          DIR); default: the bundled model ($TOKENSCOPE_MODEL overrides "
         "it)\n"
         "  --tokenizer DIR         directory with vocab.json + merges.txt (or encoder.json +\n"
         "                          vocab.bpe, or tokenizer.json); default: the model's directory\n"
         "  --device auto|cpu|cuda  backend; auto takes CUDA when a device is usable\n"
         "  --weights f32|bf16|f16|q8|q4\n"
         "                          format of the matmul weights, converted at load (default\n"
         "                          f32); bf16 and f16 halve the bytes a step reads; q8 and q4\n"
         "                          hold 8- or 4-bit values with an f16 scale per 32 (34 and 18\n"
         "                          bytes per 32 values) and run on the CPU only\n"
         "  --kv f32|f16|bf16|q8    format of the KV cache's keys and values (default f32); f16\n"
         "                          and bf16 halve its bytes and what attention reads; q8 holds\n"
         "                          8-bit values with an f16 scale per 32 (34 bytes per 32\n"
         "                          values; head_dim a multiple of 32); CPU only\n"
         "  --threads N             CPU threads, 0 = all hardware threads (default), at most " +
         std::to_string(max_cpu_threads()) +
         "\n"
         "                          (4 x the hardware threads)\n";
}

bool parse_draft_model_flag(FlagReader& reader, std::filesystem::path& draft_model) {
  if (reader.flag() != "--draft-model") return false;
  if (!draft_model.empty()) throw Error("--draft-model is given twice");
  draft_model = non_empty(reader.flag(), reader.value());
  return true;
}

std::string draft_model_help() {
  return "  --draft-model PATH      the draft model of speculative lanes (spec=N): any GPT-2\n"
         "                          model sharing the target's vocabulary (the target's own\n"
         "                          directory works: every draft is then accepted); loaded on\n"
         "                          the same device; its tokenizer must give every id the\n"
         "                          target's token (compared id by id, a mismatch is refused\n"
         "                          naming the first id that differs); an llm.c .bin draft\n"
         "                          without tokenizer files beside it uses the target's\n"
         "                          tokenizer, its vocabulary size checked against it\n";
}

bool parse_ban_words_flag(FlagReader& reader, BanWordsFlags& flags) {
  const std::string& f = reader.flag();
  if (f != "--ban-words" && f != "--no-ban-words") return false;
  if (flags.given == f) throw Error(f + " is given twice");
  if (!flags.given.empty())
    throw Error(flags.given + " and " + f + " conflict: use a list of your own or none, not both");
  flags.given = f;
  if (f == "--ban-words") {
    flags.mode = BanWordsFlags::Mode::kFile;
    flags.file = non_empty(f, reader.value());
  } else {
    reader.no_value();
    flags.mode = BanWordsFlags::Mode::kOff;
  }
  return true;
}

std::string ban_words_help() {
  return "  --ban-words FILE        banned-words stage with your own list: a plain text file,\n"
         "                          one word or phrase a line, blank lines and '#' comments\n"
         "                          ignored; the model can no longer generate an entry as\n"
         "                          written, with a leading space, capitalised or in lower\n"
         "                          case (Hugging Face's bad_words_ids rule; the prompt is\n"
         "                          never changed). Default: the shipped list\n"
         "                          (banned_words/en.txt) for the bundled model and in\n"
         "                          presentation mode, off for a --model of your own\n"
         "  --no-ban-words          switch the banned-words stage off\n";
}

std::filesystem::path shipped_banned_words_path() { return find_data("banned_words/en.txt"); }

std::shared_ptr<const BannedTokens> load_banned_words(const BanWordsFlags& flags,
                                                      const Tokenizer& tokenizer,
                                                      bool on_by_default) {
  std::filesystem::path file;
  switch (flags.mode) {
    case BanWordsFlags::Mode::kOff:
      return nullptr;
    case BanWordsFlags::Mode::kFile:
      file = flags.file;
      break;
    case BanWordsFlags::Mode::kDefault:
      if (!on_by_default) return nullptr;
      file = shipped_banned_words_path();
      if (file.empty())
        throw Error(
            "the shipped banned-words list banned_words/en.txt is in no data folder (set "
            "TOKENSCOPE_DATA_DIR, or use --ban-words FILE or --no-ban-words)");
      break;
  }
  const BannedWordList list = read_banned_word_list(file);
  return std::make_shared<const BannedTokens>(build_banned_tokens(
      list, [&tokenizer](std::string_view text) { return tokenizer.encode_ids(text); },
      tokenizer.vocab_size(), tokenizer.eot_id()));
}

std::string describe_banned_words(const BannedTokens* banned) {
  if (!banned) return "banned words: off";
  return "banned words: on, " + std::to_string(banned->entries) + " entries (" +
         std::to_string(banned->sequences.size()) + " token sequences) from " + banned->source;
}

SamplingParams parse_strategy_flag(const std::string& flag, const std::string& text) {
  SamplingParams p = parse_strategy(text);
  if (p.do_sample) return p;
  for (size_t pos = 0; pos <= text.size();) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    const size_t key_begin = item.find_first_not_of(" \t");
    if (key_begin != std::string::npos && item.compare(key_begin, 4, "seed") == 0 &&
        item.find_first_not_of(" \t", key_begin + 4) == item.find('='))
      throw Error(flag + " \"" + text +
                  "\": seed needs a sampling key (temperature, top_k, top_p or min_p): " +
                  kSeedDrawsNothing);
    pos = end + 1;
  }
  return p;
}

}  // namespace ts
