#include "session/model_setup.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <system_error>

#include "engine/backend_factory.h"
#include "model/config_json.h"
#include "model/llmc_loader.h"
#include "model/model_loader.h"
#include "model/tokenizer_json.h"
#include "session/speculative_lane.h"
#include "util/error.h"
#include "util/paths.h"

namespace ts {
namespace fs = std::filesystem;

fs::path default_model_path() {
  if (const char* env = std::getenv("TOKENSCOPE_MODEL"); env && *env) return env;
  // Found beside the executable at run time (install or build tree), so the
  // binaries can be moved; when absent, the first place searched is named.
  const fs::path rel = "models/tokenscope-tiny";
  if (fs::path found = find_data(rel); !found.empty()) return found;
  const auto dirs = data_dirs();
  return dirs.empty() ? rel : dirs.front() / rel;
}

namespace {

// Whether dir's tokenizer is read from its Hugging Face tokenizer.json. A
// Llama-family model reads it whenever it is there: it carries the split
// regex, the added tokens and BOS, which vocab.json + merges.txt lack. GPT-2
// reads its vocab.json + merges.txt (or OpenAI's encoder.json + vocab.bpe)
// first when present (the bundled models have both forms).
bool reads_tokenizer_json(const fs::path& dir, bool llama_family) {
  std::error_code ec;
  if (!fs::exists(dir / "tokenizer.json", ec)) return false;
  if (llama_family) return true;
  for (const char* f : {"vocab.json", "merges.txt", "encoder.json", "vocab.bpe"})
    if (fs::exists(dir / f, ec)) return false;
  return true;
}

// The vocabulary file the tokenizer is read from in dir, for messages.
fs::path tokenizer_vocab_file(const fs::path& dir, bool llama_family) {
  std::error_code ec;
  if (reads_tokenizer_json(dir, llama_family)) return dir / "tokenizer.json";
  if (fs::exists(dir / "vocab.json", ec) || fs::exists(dir / "merges.txt", ec))
    return dir / "vocab.json";
  return dir / "encoder.json";
}

bool has_tokenizer_files(const fs::path& dir) {
  std::error_code ec;
  for (const char* f : {"vocab.json", "merges.txt", "encoder.json", "vocab.bpe", "tokenizer.json"})
    if (fs::exists(dir / f, ec)) return true;
  return false;
}

Tokenizer load_tokenizer_dir(const fs::path& dir, bool llama_family) {
  return reads_tokenizer_json(dir, llama_family) ? load_tokenizer_json(dir / "tokenizer.json")
                                                 : Tokenizer::load(dir);
}

}  // namespace

void warm_up(Engine& engine) {
  const int n = std::min(5, engine.config().n_ctx - 1);
  if (n < 1) return;
  ForwardOptions o;
  o.record_attention = true;
  o.record_residuals = true;
  const SeqId seq = engine.cache().create();
  try {
    engine.forward({ForwardRequest{seq, std::vector<int>(n, 0)}}, o);
    engine.forward({ForwardRequest{seq, {0}}}, o);
  } catch (...) {
    engine.cache().release(seq);
    throw;
  }
  engine.cache().release(seq);
}

namespace {

// load_model_setup; `given` (when set) is the tokenizer, no files read.
LoadedModel load_with_tokenizer(const ModelSetupOptions& options,
                                std::shared_ptr<const Tokenizer> given) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  LoadedModel out;
  out.path = options.model.empty() ? default_model_path() : options.model;
  std::error_code ec;
  const fs::file_status status = fs::status(out.path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)  // e.g. a symlink loop
    throw Error(out.path.string() + ": " + ec.message());
  if (!fs::exists(status)) {
    if (options.model.empty())
      throw Error("bundled model not found at " + out.path.string() +
                  ": pass --model DIR (an HF GPT-2 directory)");
    throw Error(out.path.string() + ": no such file or directory");
  }
  const bool is_dir = fs::is_directory(status);
  if (!is_dir && !fs::is_regular_file(status))
    throw Error(out.path.string() +
                ": not a regular file or directory (expected a Hugging Face GPT-2 directory "
                "or an llm.c gpt2_*.bin file)");
  fs::path tok_dir = options.tokenizer;
  if (given) {
    out.tokenizer = std::move(given);
  } else if (tok_dir.empty()) {
    // A file's directory; "gpt2_124M.bin" (no directory part) is in ".".
    tok_dir = is_dir ? out.path : out.path.parent_path();
    if (tok_dir.empty()) tok_dir = ".";
    if (!is_dir && !has_tokenizer_files(tok_dir)) {
      if (is_llmc_checkpoint(out.path))
        throw Error(out.path.string() +
                    ": an llm.c checkpoint holds no tokenizer; pass --tokenizer DIR (a "
                    "directory with GPT-2's vocab.json + merges.txt)");
      throw Error(out.path.string() + ": no tokenizer files beside it in " + tok_dir.string() +
                  "; pass --tokenizer DIR");
    }
  }
  const fs::path config_path = is_dir ? out.path / "config.json" : fs::path();
  std::optional<ModelConfig> cfg;
  if (is_dir && fs::exists(config_path, ec)) cfg = load_config_json(config_path);
  const bool llama_family = cfg && !cfg->is_gpt2();
  if (!out.tokenizer)
    out.tokenizer = std::make_shared<const Tokenizer>(load_tokenizer_dir(tok_dir, llama_family));
  // A vocabulary mismatch names both sides: the model's config.json and the
  // tokenizer's own file (which may be in another directory). A Llama-family
  // vocab_size may be larger than the tokenizer (Qwen2 pads its embedding and
  // lm_head): those ids become padding no text encodes to.
  if (cfg && !tok_dir.empty()) {
    const int have = out.tokenizer->token_count();
    if (llama_family ? have > cfg->vocab_size : have != cfg->vocab_size)
      throw Error(config_path.string() + ": vocab_size " + std::to_string(cfg->vocab_size) +
                  (llama_family ? " is smaller than" : " does not match") + " the tokenizer " +
                  tokenizer_vocab_file(tok_dir, llama_family).string() + " (" +
                  std::to_string(have) + " tokens)");
  }
  if (llama_family && out.tokenizer->vocab_size() < cfg->vocab_size) {
    Tokenizer padded = *out.tokenizer;
    padded.pad_to(cfg->vocab_size);
    out.tokenizer = std::make_shared<const Tokenizer>(std::move(padded));
  }
  auto weights = std::make_shared<const ModelWeights>(
      convert_weights(load_model(out.path, out.tokenizer->vocab_size()), options.weights));
  out.name = out.path.filename().string();
  if (out.name.empty()) out.name = out.path.parent_path().filename().string();
  BackendSelection sel = make_backend(options.device, weights, options.cpu_threads, options.kv);
  out.backend_notice = sel.notice;
  const KvCacheSize kv = kv_cache_size_for(weights->config, std::max(2, options.cache_sequences),
                                           16, sel.backend.get(), options.kv);
  out.engine = std::make_shared<Engine>(weights, std::move(sel.backend), kv.tokens, 16, options.kv);
  const auto loaded = clock::now();
  warm_up(*out.engine);
  out.load_seconds = std::chrono::duration<double>(loaded - start).count();
  out.warmup_seconds = std::chrono::duration<double>(clock::now() - loaded).count();
  return out;
}

}  // namespace

LoadedModel load_model_setup(const ModelSetupOptions& options) {
  return load_with_tokenizer(options, nullptr);
}

LoadedModel load_draft_model(const ModelSetupOptions& target, const fs::path& path, int sequences,
                             std::shared_ptr<const Tokenizer> target_tokenizer,
                             const VocabRoles& roles) {
  ModelSetupOptions o;
  o.model = path;
  o.device = target.device;
  o.weights = target.weights;
  o.kv = target.kv;
  o.cpu_threads = target.cpu_threads;
  o.cache_sequences = std::max(2, sequences);
  // An llm.c file holds no tokenizer: with none beside it, the draft reads
  // the target's (the loader checks the file's vocabulary size against it).
  std::shared_ptr<const Tokenizer> given;
  std::error_code ec;
  if (target_tokenizer && fs::is_regular_file(path, ec) && is_llmc_checkpoint(path)) {
    fs::path dir = path.parent_path();
    if (dir.empty()) dir = ".";
    if (!has_tokenizer_files(dir)) given = target_tokenizer;
  }
  LoadedModel draft;
  try {
    draft = load_with_tokenizer(o, given);
  } catch (const Error& e) {
    // Said of the draft: the target loaded, so a broken file is the draft's.
    throw Error(roles.model + ": " + e.what());
  }
  if (target_tokenizer) {
    const std::string mismatch = spec_vocab_mismatch(*target_tokenizer, *draft.tokenizer, roles);
    if (!mismatch.empty()) throw Error(mismatch);
  }
  return draft;
}

KvCacheSize kv_cache_size_for(const ModelConfig& config, int sequences, int block_size,
                              const Backend* backend, WeightFormat kv_format) {
  KvCacheSize size;
  size.sequences = sequences;
  const int64_t blocks_per_sequence = (int64_t{config.n_ctx} + block_size - 1) / block_size;
  const int64_t blocks = blocks_per_sequence * sequences;
  const int64_t tokens = blocks * block_size;
  // K and V of the key/value heads only (fewer than the query heads under
  // grouped-query attention).
  const int64_t bytes =
      tokens * 2 * int64_t(stored_bytes(kv_format, size_t(config.kv_dim()))) * config.n_layer;
  int64_t physical = 0;
  std::string memory_name = "this machine's";
  if (backend) {
    physical = backend->kv_budget_bytes();
    memory_name = backend->kv_budget_name();
  } else {
    const long pages = ::sysconf(_SC_PHYS_PAGES);
    const long page = ::sysconf(_SC_PAGESIZE);
    physical = pages > 0 && page > 0 ? int64_t{pages} * page : 0;
  }
  auto gib = [](int64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f GiB", static_cast<double>(b) / (1ll << 30));
    return std::string(buf);
  };
  const std::string what = "KV cache for " + std::to_string(sequences) + " sequences of " +
                           std::to_string(config.n_ctx) + " tokens";
  if (sequences < 1 || tokens > INT_MAX || (physical > 0 && bytes > physical))
    throw Error(what + " needs " + gib(bytes) + ", more than " +
                (tokens > INT_MAX ? std::string("the cache can address")
                                  : memory_name + " " + gib(physical) + " of memory") +
                "; use fewer lanes or beams");
  size.blocks = static_cast<int>(blocks);
  size.tokens = static_cast<int>(tokens);
  size.bytes = bytes;
  return size;
}

int cache_sequences_for(const std::vector<SamplingParams>& strategies) {
  int sequences = 2;
  for (const SamplingParams& p : strategies) sequences += std::max(1, p.num_beams);
  return sequences;
}

}  // namespace ts
