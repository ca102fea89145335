#include "session/model_setup.h"

#include <algorithm>
#include <cstdlib>
#include <system_error>

#include "engine/backend_factory.h"
#include "model/model_loader.h"
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

LoadedModel load_model_setup(const ModelSetupOptions& options) {
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
  return out;
}

int cache_sequences_for(const std::vector<SamplingParams>& strategies) {
  int sequences = 2;
  for (const SamplingParams& p : strategies) sequences += std::max(1, p.num_beams);
  return sequences;
}

}  // namespace ts
