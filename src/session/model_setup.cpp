#include "session/model_setup.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <system_error>

#include "engine/backend_factory.h"
#include "model/model_loader.h"
#include "util/error.h"

namespace ts {
namespace fs = std::filesystem;

fs::path default_model_path() {
  if (const char* env = std::getenv("TOKENSCOPE_MODEL"); env && *env) return env;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path();
         dir = dir.parent_path()) {
      const fs::path candidate = dir / "assets/models/tokenscope-tiny";
      if (fs::exists(candidate / "config.json", ec)) return candidate;
    }
  }
  return TS_DEFAULT_MODEL_DIR;
}

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

LoadedModel load_model_setup(const ModelSetupOptions& options) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  LoadedModel out;
  out.path = options.model.empty() ? default_model_path() : options.model;
  std::error_code ec;
  if (!fs::exists(out.path, ec)) {
    if (options.model.empty())
      throw Error("bundled model not found at " + out.path.string() +
                  ": pass --model DIR (an HF GPT-2 directory)");
    throw Error(out.path.string() + ": no such file or directory");
  }
  fs::path tok_dir = options.tokenizer;
  if (tok_dir.empty()) tok_dir = fs::is_directory(out.path, ec) ? out.path : out.path.parent_path();
  out.tokenizer = std::make_shared<const Tokenizer>(Tokenizer::load(tok_dir));
  auto weights =
      std::make_shared<const ModelWeights>(load_model(out.path, out.tokenizer->vocab_size()));
  out.name = out.path.filename().string();
  if (out.name.empty()) out.name = out.path.parent_path().filename().string();
  BackendSelection sel = make_backend(options.device, weights, options.cpu_threads);
  out.backend_notice = sel.notice;
  const int cache_tokens = weights->config.n_ctx * std::max(2, options.cache_sequences);
  out.engine = std::make_shared<Engine>(weights, std::move(sel.backend), cache_tokens);
  const auto loaded = clock::now();
  warm_up(*out.engine);
  out.load_seconds = std::chrono::duration<double>(loaded - start).count();
  out.warmup_seconds = std::chrono::duration<double>(clock::now() - loaded).count();
  return out;
}

int cache_sequences_for(const std::vector<SamplingParams>& strategies) {
  int sequences = 2;
  for (const SamplingParams& p : strategies) sequences += std::max(1, p.num_beams);
  return sequences;
}

}  // namespace ts
