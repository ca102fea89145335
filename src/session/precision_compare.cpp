#include "session/precision_compare.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "util/error.h"
#include "util/median.h"

namespace ts {

namespace {

constexpr const char* kFormatNames = "f32, bf16, f16, q8 or q4";

WeightFormat parse_one(const std::string& flag, const std::string& name) {
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kF16,
                         WeightFormat::kQ8, WeightFormat::kQ4})
    if (name == weight_format_name(f)) return f;
  throw Error(flag + ": unknown format '" + name + "' (expected " + kFormatNames + ")");
}

}  // namespace

PrecisionPair parse_precision_pair(const std::string& flag, const std::string& text,
                                   const std::string& device) {
  const size_t comma = text.find(',');
  if (comma == std::string::npos)
    throw Error(flag + ": expected two formats REF,FMT (e.g. f32,q8), got '" + text + "'");
  const std::string a = text.substr(0, comma), b = text.substr(comma + 1);
  if (b.find(',') != std::string::npos)
    throw Error(flag + ": expected two formats REF,FMT, got more in '" + text + "'");
  PrecisionPair pair;
  pair.reference = parse_one(flag, a);
  pair.compared = parse_one(flag, b);
  if (pair.reference == pair.compared)
    throw Error(flag + ": the same format twice ('" + text + "'); compare two different formats");
  if (device == "cuda")
    for (WeightFormat f : {pair.reference, pair.compared})
      if (is_block_format(f))
        throw Error(flag + ": " + weight_format_name(f) +
                    " weights run on the CPU only; use --device cpu (or auto) to compare them");
  return pair;
}

std::string precision_pair_name(const PrecisionPair& pair) {
  return std::string(weight_format_name(pair.reference)) + "," + weight_format_name(pair.compared);
}

double kl_divergence(const float* p_logits, const float* q_logits, size_t n) {
  if (n == 0) return 0;
  // log-softmax of each row in double: x - max - log(sum exp(x - max)).
  auto log_norm = [n](const float* x, double& mx) {
    mx = x[0];
    for (size_t i = 1; i < n; ++i) mx = std::max(mx, static_cast<double>(x[i]));
    double s = 0;
    for (size_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i]) - mx);
    return std::log(s);
  };
  double pm = 0, qm = 0;
  const double pz = log_norm(p_logits, pm), qz = log_norm(q_logits, qm);
  double kl = 0;
  for (size_t i = 0; i < n; ++i) {
    const double lp = static_cast<double>(p_logits[i]) - pm - pz;
    const double lq = static_cast<double>(q_logits[i]) - qm - qz;
    kl += std::exp(lp) * (lp - lq);
  }
  // Rounding can leave a tiny negative sum for near-equal rows; KL is never
  // below 0.
  return std::max(0.0, kl);
}

int argmax_token(const float* logits, size_t n) {
  size_t best = 0;
  for (size_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return static_cast<int>(best);
}

std::vector<int> top_k_tokens(const float* logits, size_t n, int k) {
  std::vector<int> ids(n);
  std::iota(ids.begin(), ids.end(), 0);
  const size_t kk = std::min(n, static_cast<size_t>(std::max(0, k)));
  std::partial_sort(
      ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(kk), ids.end(),
      [logits](int a, int b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; });
  ids.resize(kk);
  return ids;
}

int token_rank(const float* logits, size_t n, int token) {
  const float v = logits[token];
  int rank = 1;
  for (size_t i = 0; i < n; ++i)
    if (logits[i] > v || (logits[i] == v && static_cast<int>(i) < token)) ++rank;
  return rank;
}

int first_difference(const std::vector<int>& a, const std::vector<int>& b) {
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i)
    if (a[i] != b[i]) return static_cast<int>(i);
  return -1;
}

PrecisionCompare::PrecisionCompare(std::shared_ptr<const Tokenizer> tokenizer,
                                   std::shared_ptr<Engine> reference,
                                   std::shared_ptr<Engine> compared, CompareLabels labels)
    : tokenizer_(std::move(tokenizer)),
      reference_(std::move(reference)),
      compared_(std::move(compared)),
      labels_(std::move(labels)) {
  const int r = reference_->config().vocab_size, c = compared_->config().vocab_size;
  if (r != c || tokenizer_->vocab_size() != r)
    throw Error("comparison: the two models' vocabularies differ (" + std::to_string(r) + " and " +
                std::to_string(c) + " tokens)");
}

PrecisionCompare::PrecisionCompare(std::shared_ptr<const Tokenizer> tokenizer,
                                   std::shared_ptr<Engine> reference,
                                   std::shared_ptr<Engine> compared, PrecisionPair pair)
    : PrecisionCompare(
          std::move(tokenizer), std::move(reference), std::move(compared),
          CompareLabels{weight_format_name(pair.reference), weight_format_name(pair.compared)}) {
  pair_ = pair;
  const ModelConfig& r = reference_->config();
  const ModelConfig& c = compared_->config();
  if (r.n_ctx != c.n_ctx || r.n_layer != c.n_layer || r.n_embd != c.n_embd)
    throw Error("precision comparison: the two engines are not the same model");
}

PrecisionCompare::~PrecisionCompare() { release_sequences(); }

std::unique_ptr<PrecisionCompare> PrecisionCompare::load(const ModelSetupOptions& setup,
                                                         PrecisionPair pair) {
  ModelSetupOptions o = setup;
  // Both engines on one kind of device, so that their step times compare:
  // the CPU when either format is a block one (the CUDA backend reads only
  // f32, bf16 and f16).
  if (o.device == "auto" && (is_block_format(pair.reference) || is_block_format(pair.compared)))
    o.device = "cpu";
  // KV room for the reference's sequence, the compared engine's two (the
  // teacher-forced and the free-running one), and the warm-up's scratch.
  o.cache_sequences = 2;
  o.weights = pair.reference;
  LoadedModel ref = load_model_setup(o);
  o.cache_sequences = 3;
  o.weights = pair.compared;
  LoadedModel cmp = load_model_setup(o);
  return std::make_unique<PrecisionCompare>(ref.tokenizer, ref.engine, cmp.engine, pair);
}

std::unique_ptr<PrecisionCompare> PrecisionCompare::load_models(
    const ModelSetupOptions& setup, const std::filesystem::path& compared) {
  ModelSetupOptions o = setup;
  o.cache_sequences = 2;
  LoadedModel ref = load_model_setup(o);
  // The draft model's loading and its id-by-id vocabulary check, worded for
  // a comparison.
  const VocabRoles roles{"compared model", "reference", "comparing two models needs one"};
  LoadedModel cmp = load_draft_model(setup, compared, 3, ref.tokenizer, roles);
  CompareLabels labels{ref.name, cmp.name};
  // Two copies of one model under one name: which is which still shows.
  if (labels.reference == labels.compared) labels.compared += " (compared)";
  return std::make_unique<PrecisionCompare>(ref.tokenizer, ref.engine, cmp.engine,
                                            std::move(labels));
}

int PrecisionCompare::context() const {
  return std::min(reference_->config().n_ctx, compared_->config().n_ctx);
}

void PrecisionCompare::release_sequences() {
  for (auto [engine, seq] :
       {std::pair{reference_.get(), &ref_seq_}, std::pair{compared_.get(), &forced_seq_},
        std::pair{compared_.get(), &free_seq_}}) {
    if (*seq >= 0 && engine->cache().contains(*seq)) engine->cache().release(*seq);
    *seq = -1;
  }
}

void PrecisionCompare::set_prompt(const std::string& text) {
  std::vector<int> ids;
  for (const TokenSpan& t : tokenizer_->encode_prompt(text)) ids.push_back(t.id);
  if (ids.empty()) throw Error("prompt is empty");
  const int n_ctx = context();
  if (static_cast<int>(ids.size()) > n_ctx)
    throw Error("prompt has " + std::to_string(ids.size()) + " tokens; the model's context holds " +
                std::to_string(n_ctx));
  release_sequences();
  prompt_ = std::move(ids);
  ref_tokens_.clear();
  free_tokens_.clear();
  steps_.clear();
}

bool PrecisionCompare::can_step() const {
  if (prompt_.empty()) return false;
  // Row i feeds the prompt (i = 0) or the newest token; its context then
  // holds prompt + i tokens, which must fit.
  return static_cast<int>(prompt_.size() + steps_.size()) <= context();
}

const PrecisionStep& PrecisionCompare::step() {
  if (prompt_.empty()) throw Error("precision comparison: no prompt");
  if (!can_step()) throw Error("precision comparison: the model's context is full");
  const bool prefill = steps_.empty();
  if (prefill) {
    ref_seq_ = reference_->cache().create();
    forced_seq_ = compared_->cache().create();
    free_seq_ = compared_->cache().create();
  }
  const std::vector<int> ref_in = prefill ? prompt_ : std::vector<int>{ref_tokens_.back()};
  const std::vector<int> free_in = prefill ? prompt_ : std::vector<int>{free_tokens_.back()};
  const ForwardOptions fo;  // logits of the last token only
  // A forward that fails leaves its own sequence as it was; the ones before
  // it in this row are cut back, so the row can be run again.
  const int before = static_cast<int>(prompt_.size() + steps_.size()) - (prefill ? 0 : 1);
  ForwardResult r, c, f;
  try {
    r = reference_->forward({ForwardRequest{ref_seq_, ref_in}}, fo);
    c = compared_->forward({ForwardRequest{forced_seq_, ref_in}}, fo);
    f = compared_->forward({ForwardRequest{free_seq_, free_in}}, fo);
  } catch (...) {
    if (prefill) {
      release_sequences();
    } else {
      for (auto [engine, seq] :
           {std::pair{reference_.get(), ref_seq_}, std::pair{compared_.get(), forced_seq_},
            std::pair{compared_.get(), free_seq_}})
        if (engine->cache().length(seq) > before) engine->cache().truncate(seq, before);
    }
    throw;
  }
  const std::vector<float>& rl = r.outputs.front().logits;
  const std::vector<float>& cl = c.outputs.front().logits;
  const std::vector<float>& fl = f.outputs.front().logits;
  const size_t n = rl.size();

  PrecisionStep s;
  s.index = static_cast<int>(steps_.size());
  s.kl = kl_divergence(rl.data(), cl.data(), n);
  s.reference_token = argmax_token(rl.data(), n);
  s.compared_token = argmax_token(cl.data(), n);
  s.free_token = argmax_token(fl.data(), n);
  std::vector<int> union_ids = top_k_tokens(rl.data(), n, kPrecisionTopK);
  for (int t : top_k_tokens(cl.data(), n, kPrecisionTopK))
    if (std::find(union_ids.begin(), union_ids.end(), t) == union_ids.end()) union_ids.push_back(t);
  for (int t : union_ids) {
    const int a = token_rank(rl.data(), n, t), b = token_rank(cl.data(), n, t);
    if (a != b) s.changed.push_back({t, a, b});
  }
  std::sort(s.changed.begin(), s.changed.end(), [](const RankChange& x, const RankChange& y) {
    return x.reference_rank < y.reference_rank;
  });
  s.reference_bytes = r.cost.bytes();
  s.compared_bytes = c.cost.bytes();
  s.reference_seconds = r.seconds;
  s.compared_seconds = c.seconds;
  const double fed = static_cast<double>(ref_in.size());
  s.reference_weight_bytes = r.cost.weight_bytes;
  s.compared_weight_bytes = c.cost.weight_bytes;
  s.reference_kv_token_bytes = r.cost.kv_write_bytes / fed;
  s.compared_kv_token_bytes = c.cost.kv_write_bytes / fed;
  ref_tokens_.push_back(s.reference_token);
  free_tokens_.push_back(s.free_token);
  steps_.push_back(std::move(s));
  return steps_.back();
}

PrecisionSummary PrecisionCompare::summary() const {
  PrecisionSummary out;
  out.steps = static_cast<int>(steps_.size());
  if (steps_.empty()) return out;
  int agree = 0;
  double kl_sum = 0;
  for (const PrecisionStep& s : steps_) {
    kl_sum += s.kl;
    out.max_kl = std::max(out.max_kl, s.kl);
    agree += s.top1_agrees() ? 1 : 0;
  }
  out.mean_kl = kl_sum / static_cast<double>(steps_.size());
  out.top1_agreement = static_cast<double>(agree) / static_cast<double>(steps_.size());
  out.first_divergence = first_difference(ref_tokens_, free_tokens_);
  const size_t first = steps_.size() > 1 ? 1 : 0;
  std::vector<double> rt, ct;
  double rb = 0, cb = 0;
  for (size_t i = first; i < steps_.size(); ++i) {
    rt.push_back(steps_[i].reference_seconds);
    ct.push_back(steps_[i].compared_seconds);
    rb += steps_[i].reference_bytes;
    cb += steps_[i].compared_bytes;
  }
  const double count = static_cast<double>(steps_.size() - first);
  out.reference_bytes = rb / count;
  out.compared_bytes = cb / count;
  out.reference_median_seconds = median(rt);
  out.compared_median_seconds = median(ct);
  const PrecisionStep& last = steps_.back();
  out.reference_weight_bytes = last.reference_weight_bytes;
  out.compared_weight_bytes = last.compared_weight_bytes;
  out.reference_kv_token_bytes = last.reference_kv_token_bytes;
  out.compared_kv_token_bytes = last.compared_kv_token_bytes;
  return out;
}

}  // namespace ts
