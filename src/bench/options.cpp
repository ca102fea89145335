#include "bench/options.h"

#include <algorithm>
#include <string_view>

#include "engine/batch_sweep.h"
#include "session/model_flags.h"
#include "session/session.h"
#include "util/error.h"

namespace ts::bench {
namespace {

// Calls item(text) for each comma-separated item of a list, in order;
// refuses an empty list and empty items.
template <typename F>
void for_each_item(const std::string& flag, const std::string& s, F&& item) {
  if (s.empty()) throw ts::Error(flag + ": the list is empty");
  size_t pos = 0;
  for (;;) {
    const size_t comma = s.find(',', pos);
    const std::string text =
        s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (text.empty()) throw ts::Error(flag + ": empty item in '" + s + "'");
    item(text);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
}

// "1,2,4": whole numbers in [lo, hi], no empty items.
// A list of sizes each measured once: one given twice is refused (it would
// be timed twice and printed as two rows of the same size).
std::vector<int> parse_list(const std::string& flag, const std::string& s, int lo, int hi) {
  std::vector<int> out;
  for_each_item(flag, s, [&](const std::string& item) {
    const int v = static_cast<int>(ts::parse_whole_number(flag, item, lo, hi));
    if (std::find(out.begin(), out.end(), v) != out.end())
      throw ts::Error(flag + ": " + std::to_string(v) + " is given twice");
    out.push_back(v);
  });
  return out;
}

// "2,4,auto": draft lengths, whole numbers and "auto" (adaptive).
std::vector<int> parse_gamma_list(const std::string& flag, const std::string& s) {
  std::vector<int> out;
  for_each_item(flag, s, [&](const std::string& item) {
    out.push_back(item == "auto" ? ts::kSpecGammaAuto
                                 : static_cast<int>(ts::parse_whole_number(
                                       flag, item, ts::kMinSpecGamma, ts::kMaxSpecGamma)));
  });
  return out;
}

// "f32,bf16,q8": two or more weight formats, each once.
std::vector<ts::WeightFormat> parse_format_list(const std::string& flag, const std::string& s) {
  std::vector<ts::WeightFormat> out;
  for_each_item(flag, s, [&](const std::string& item) {
    ts::WeightFormat f;
    try {
      f = ts::parse_weight_format(item);
    } catch (const ts::Error& e) {
      // Its own message, under this flag's name instead of "--weights".
      const std::string what = e.what();
      throw ts::Error(flag + what.substr(what.find(':')));
    }
    if (std::find(out.begin(), out.end(), f) != out.end())
      throw ts::Error(flag + ": " + item + " is given twice");
    out.push_back(f);
  });
  if (out.size() < 2)
    throw ts::Error(flag + ": list two or more formats to compare (e.g. f32,bf16,q8,q4)");
  return out;
}

// Sizes are bounded here, before anything is allocated; the model's context
// bounds them again once it is known.
constexpr int kMaxTokens = 1 << 20;

}  // namespace

std::string help_text() {
  return R"(tokenscope-bench: prefill and decode speed, printed as JSON with the bounds
measured in the same run (memory read bandwidth, peak FMA throughput), the
load time, and where memory goes after loading and after the run.

)" + ts::model_flags_help() +
         R"(  --write-random-124m DIR write a random GPT-2-124M-shaped checkpoint to DIR (created
                          if missing) and benchmark it, instead of --model; with a
                          byte-level tokenizer, so tokenscope-cli runs it too
  --write-random-1.5b DIR the same in GPT-2 XL's shape (48 layers, 1600 dims: 6.2 GB)
  --prefill-tokens N      prompt length of the prefill measurement (default 128, or
                          the model's context when that is shorter)
  --context N             cached tokens before the decode measurement (default 64, or
                          half the model's context when that is shorter)
  --decode-steps N        decode steps measured (median reported; default 20), run
                          twice on new sequences: the second pass is reported, the
                          first (its KV cache pages possibly new to the process: a
                          page fault each) beside it as first_pass_*
  --lanes LIST            lane counts for the batched decode, each 1 to )" +
         std::to_string(ts::kMaxLanes) + R"(, e.g. 1,2,4,8
                          (default); ratio_to_one_lane divides by the 1-lane time,
                          measured even when 1 is not listed
  --batch-sweep LIST      the batch sweep: for each batch size B in LIST (each 1 to )" +
         std::to_string(ts::kMaxSweepBatch) + R"(,
                          e.g. 1,2,4,8,16,32,64), B sequences with the same )" +
         std::to_string(ts::BatchSweepOptions{}.context) + R"( cached
                          tokens (fewer on a model whose context is short) decoded
                          together, one token each, in one batched step (median of )" +
         std::to_string(ts::BatchSweepOptions{}.steps) + R"(
                          steps): step time, tokens/s, the step's FLOPs and bytes
                          (cost model: weights once, every sequence's KV), intensity,
                          achieved FLOP/s, the roof there (bandwidth x intensity or
                          peak, measured in this run) and the fraction of it reached;
                          plus the ridge, the batch where the cost model's intensity
                          crosses it, and the first measured B that is compute bound;
                          on an engine and KV cache of its own sharing the loaded
                          weights; off by default (it adds about 10 s on a 124M
                          model on 2 CPU cores, a 64-sequence step 0.7 s of it)
  --formats LIST          the formats section: the checkpoint converted to each weight
                          format in LIST (two or more of f32, bf16, f16, q8, q4, e.g.
                          f32,bf16,q8,q4; --weights does not apply to it, --kv does),
                          one engine each with --context cached tokens, then
                          --decode-steps rounds of one decode step per format, taken
                          in turn (round r starting at the r-th format, a bandwidth
                          probe pass before each round on the CPU): per format the
                          median step, its bytes, its read bound and the step over
                          it, and the step over the first format's (medians, and
                          the median of the same-round ratios); on the CPU when a
                          block format is listed and --device is auto (with --device cuda
                          a block format is refused)
  --cache-compare LIST    generation lengths for KV cache on vs off, e.g. 64,256 (a run
                          stops at the end of the model's context; its steps are listed;
                          as in every LIST, a number given twice is refused)
  --draft-model DIR       also measure speculative decoding (greedy) with this draft
                          against plain greedy decoding of the model, same prompt and
                          number of new tokens: tokens/s of both (the decode steps'
                          measured time, best of three runs), the acceptance rate
                          alpha = accepted / drafted, the cost ratio c = one draft pass
                          over one plain decode step of the model (both measured in this
                          run), the speed-up predicted by
                          (1 - alpha^(g+1)) / ((1 - alpha)(g c + 1)) beside the measured
                          one (spec=auto: g = the mean drafted per round), and whether
                          each speculative output equals plain greedy's token for token
                          (a summary per pair on stderr, "outputs identical: yes/no");
                          the formula counts a verify pass (g + 1 tokens) as one plain
                          step: verify_pass_to_target_step says how far that holds;
                          the model needs tokenizer files (an llm.c .bin: --tokenizer
                          DIR), the draft the model's tokens id for id (an llm.c .bin
                          draft without tokenizer files beside it uses the model's)
  --spec-self-draft       also the model drafting for itself (alpha = 1, c about 1);
                          an llm.c .bin model needs --tokenizer DIR for the prompt
  --lookahead N           also measure lookahead decoding and prompt lookup (default
                          strategies) against plain greedy, N new tokens each, on an
                          ordinary prompt and three that repeat themselves (a list, a
                          poem with a refrain, code): time per token (medians of three
                          alternated runs), tokens per pass, fed tokens per pass, the
                          speed-up measured and the one the step cost model predicts
                          for the passes that ran (their FLOPs and bytes on the
                          measured roofs), and whether each output equals greedy's
                          (exit code 1 if not); on random weights nothing is accepted
                          and the speed-up is below 1
  --cpu-vectors auto|avx2 auto (default): a CPU decode step's matrix products read the
                          weights with AVX-512 (q8 / q4: AVX-VNNI) where the CPU has
                          it; avx2: with AVX2 only, to compare the two on one machine
                          (the layers give the same bits either way, the fp32 logits
                          differ in the last bits); machine.cpu_decode_kernel says
                          which ran (avx512, avx2, or scalar in a build without
                          AVX2); with --weights bf16|f16 that format's kernels' (avx2
                          or scalar), with q8|q4 the block kernel's (avxvnni, avx2 or
                          scalar), and each step's bound counts that format's bytes
                          (q8 and q4: values and block scales)
  --spec-gamma LIST       draft lengths g measured, each 1 to 16 or auto (adaptive);
                          default 4,auto
  --spec-tokens N         new tokens generated per measurement, at least 2 (default 64,
                          or what the model's context holds after the prompt)
  --spec-only             only the speculative measurement (no prefill, decode or lanes)
  --spec-random-pairs DIR write random GPT-2-shaped checkpoints to DIR (about 2.3 GB;
                          created if missing) and measure speculative decoding on
                          three pairs with a 355M-shaped target (24 layers, 1024 dims):
                          a 124M-shaped draft (independent random weights: alpha near
                          chance), a draft made of the target's own embeddings and first
                          layers (the same tensors, )" +
         std::to_string(kFirstLayersDraft) + R"( of 24), and the target
                          drafting for itself; slow on a CPU (a 355M decode step takes
                          0.1 s or more); the other sections are not run
  --help                  this text

Flags are written "--flag value" or "--flag=value"; a flag given twice is
refused. Exit codes: 0 done, 1 a
speculative or lookahead greedy output differed from plain greedy's, 2 bad
input (one line on stderr), 3 internal error.
)";
}

BenchOptions parse_options(int argc, char** argv) {
  BenchOptions o;
  for (int i = 1; i < argc; ++i)
    if (std::string_view(argv[i]) == "--help" || std::string_view(argv[i]) == "-h") {
      o.help = true;
      return o;
    }
  ts::FlagReader r(argc, argv);
  std::vector<std::string> given;
  while (r.next()) {
    const std::string a = r.flag();
    // A second value is never silently taken over the first.
    if (std::find(given.begin(), given.end(), a) != given.end())
      throw ts::Error(a + " is given twice");
    given.push_back(a);
    if (ts::parse_model_flag(r, o.setup)) continue;
    if (ts::parse_draft_model_flag(r, o.draft_model)) continue;
    if (a == "--write-random-124m" || a == "--write-random-1.5b") {
      if (!o.write_random.empty())
        throw ts::Error(o.random_shape + " and " + a + " conflict: give one model");
      o.write_random = ts::non_empty(a, r.value());
      o.random_shape = a;
    } else if (a == "--prefill-tokens") {
      o.prefill_tokens = static_cast<int>(ts::parse_whole_number(a, r.value(), 1, kMaxTokens));
      o.prefill_given = true;
    } else if (a == "--context") {
      o.context = static_cast<int>(ts::parse_whole_number(a, r.value(), 1, kMaxTokens));
      o.context_given = true;
    } else if (a == "--decode-steps")
      o.decode_steps = static_cast<int>(ts::parse_whole_number(a, r.value(), 1, kMaxTokens));
    else if (a == "--lanes")
      o.lanes = parse_list(a, r.value(), 1, ts::kMaxLanes);
    else if (a == "--batch-sweep")
      o.batch_sweep = parse_list(a, r.value(), 1, ts::kMaxSweepBatch);
    else if (a == "--formats")
      o.formats = parse_format_list(a, r.value());
    else if (a == "--cache-compare")
      o.cache_compare = parse_list(a, r.value(), 1, kMaxTokens);
    else if (a == "--spec-gamma")
      o.spec_gammas = parse_gamma_list(a, r.value());
    else if (a == "--spec-self-draft") {
      r.no_value();
      o.spec_self_draft = true;
    } else if (a == "--cpu-vectors") {
      const std::string v = r.value();
      if (v != "auto" && v != "avx2")
        throw ts::Error("--cpu-vectors: '" + v + "' is not auto or avx2");
      o.avx2_only = v == "avx2";
    } else if (a == "--spec-only") {
      r.no_value();
      o.spec_only = true;
    } else if (a == "--lookahead") {
      o.lookahead_tokens = static_cast<int>(ts::parse_whole_number(a, r.value(), 1, kMaxTokens));
    } else if (a == "--spec-random-pairs")
      o.spec_random_dir = ts::non_empty(a, r.value());
    else if (a == "--spec-tokens") {  // at least one decode step after the prefill's token
      o.spec_tokens = static_cast<int>(ts::parse_whole_number(a, r.value(), 2, kMaxTokens));
      o.spec_tokens_given = true;
    } else
      throw ts::Error("unknown option '" + a + "' (see --help)");
  }
  if (!o.spec_random_dir.empty()) {
    if (!o.setup.model.empty() || !o.setup.tokenizer.empty() || !o.write_random.empty() ||
        !o.draft_model.empty() || o.spec_self_draft || !o.formats.empty())
      throw ts::Error(
          "--spec-random-pairs writes and benchmarks its own pairs: give no --model, "
          "--tokenizer, --write-random-*, --draft-model, --spec-self-draft or --formats with it");
    return o;
  }
  const bool speculative = !o.draft_model.empty() || o.spec_self_draft;
  // Only the speculative section reads text (its prompt); an llm.c --model
  // holds no tokenizer, so it needs --tokenizer DIR there.
  if (!o.setup.tokenizer.empty() && !speculative)
    throw ts::Error(
        "--tokenizer: only the speculative section (--draft-model, --spec-self-draft) reads "
        "text; the other sections run the model on random token ids");
  for (const std::string& g : given)
    if ((g == "--spec-gamma" || g == "--spec-tokens" || g == "--spec-only") && !speculative)
      throw ts::Error(g + " needs --draft-model DIR or --spec-self-draft");
  for (ts::WeightFormat f : o.formats)
    if (o.setup.device == "cuda" && ts::is_block_format(f))
      throw ts::Error(std::string("--formats: ") + ts::weight_format_name(f) +
                      " runs on the CPU only (the CUDA backend reads f32, bf16 or f16); use "
                      "--device cpu, or list only those three with --device cuda");
  if (o.spec_only && !o.formats.empty())
    throw ts::Error(
        "--formats and --spec-only conflict: --spec-only runs the speculative section alone");
  if (!o.setup.model.empty() && !o.write_random.empty())
    throw ts::Error("--model and " + o.random_shape + " conflict: give one model");
  return o;
}

void fit_to_context(BenchOptions& o, int n_ctx, const std::string& model_dir) {
  // The defaults fit the model; the sizes given are checked below.
  if (n_ctx < 2)
    throw ts::Error(model_dir + ": a context of " + std::to_string(n_ctx) +
                    " leaves no room for a decode step after a cached token");
  if (!o.context_given) o.context = std::min(o.context, n_ctx / 2);
  if (!o.prefill_given) o.prefill_tokens = std::min(o.prefill_tokens, n_ctx);
  // Checked before the KV cache is allocated.
  if (o.context + 1 > n_ctx)
    throw ts::Error("--context: " + std::to_string(o.context) + " is out of range, at most " +
                    std::to_string(n_ctx - 1) + " (the model's context minus the decoded token)");
  if (o.prefill_tokens > n_ctx)
    throw ts::Error("--prefill-tokens: " + std::to_string(o.prefill_tokens) +
                    " is out of range, at most the model's context of " + std::to_string(n_ctx));
}

}  // namespace ts::bench
