// The memory report: each part agrees with the object that holds the memory
// (weights, KV pool, trace store, scratch) and with the kernel's view.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "model/model_loader.h"
#include "session/memory_report.h"
#include "session/model_setup.h"
#include "session/session.h"
#include "test_models.h"
#include "util/error.h"
#include "util/proc_fields.h"
#include "wrapped_backend.h"

namespace ts {
namespace {

// The bytes of the tiny fixture's tensors as its safetensors file declares
// them: the header's shapes, 4 bytes per F32 element. Read here with a plain
// JSON parse, not through the loader or ModelConfig::parameter_count(),
// which is what the loader sizes its own buffer by.
int64_t safetensors_f32_bytes(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  unsigned char size_le[8] = {};
  in.read(reinterpret_cast<char*>(size_le), 8);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = header_size << 8 | size_le[i];
  std::string header(header_size, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_size));
  EXPECT_TRUE(in) << "cannot read the fixture's safetensors header";
  int64_t bytes = 0;
  const nlohmann::json tensors = nlohmann::json::parse(header);
  for (const auto& [name, tensor] : tensors.items()) {
    if (name == "__metadata__") continue;
    EXPECT_EQ(tensor["dtype"], "F32") << name;
    int64_t elements = 1;
    for (const auto& d : tensor["shape"]) elements *= d.get<int64_t>();
    bytes += elements * 4;
  }
  return bytes;
}

int64_t fixture_tensor_bytes() {
  return safetensors_f32_bytes(test::tiny_model_dir() / "model.safetensors");
}

// The same over every .safetensors file of a model directory (the shards of
// a sharded checkpoint included).
int64_t directory_tensor_bytes(const std::filesystem::path& dir) {
  int64_t bytes = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.path().extension() == ".safetensors" && name.rfind("model", 0) == 0)
      bytes += safetensors_f32_bytes(entry.path());
  }
  return bytes;
}

// The kB fields of a /proc file, in bytes; any other line is left out.
TEST(ProcFields, ReadsKilobyteFieldsAndSkipsTheRest) {
  std::istringstream in(
      "Name:\ttokenscope\n"
      "VmHWM:\t  499712 kB\n"
      "VmRSS:\t  12 kB\n"
      "Threads:\t3\n"
      "MemAvailable:   24153280 kB\n"
      "Broken:   12x kB\n"
      "Negative:   -5 kB\n"
      "Huge:   99999999999999999999 kB\n"
      "TooBig:   9223372036854775807 kB\n"
      "Pages:   7 pages\n"
      ":   5 kB\n"
      "NoValue:\n"
      "Zero:  0 kB");
  const ProcFields f = ProcFields::parse(in);
  EXPECT_EQ(f.bytes("VmHWM"), 499712ll * 1024);
  EXPECT_EQ(f.bytes("VmRSS"), 12 * 1024);
  EXPECT_EQ(f.bytes("MemAvailable"), 24153280ll * 1024);
  EXPECT_EQ(f.bytes("Zero"), 0);
  for (const char* absent : {"Name", "Threads", "Broken", "Negative", "Huge", "TooBig", "Pages", "",
                             "NoValue", "RssAnon"})
    EXPECT_EQ(f.bytes(absent), -1) << absent;
  EXPECT_EQ(f.bytes("RssAnon", 0), 0);
  EXPECT_EQ(ProcFields::read("/nonexistent/status").bytes("VmRSS"), -1);
  // This process has a resident set, and it is not absurd.
  const int64_t rss = ProcFields::read("/proc/self/status").bytes("VmRSS");
  EXPECT_GT(rss, 0);
  EXPECT_LT(rss, int64_t(1) << 40);
}

TEST(MemoryReport, ResidentBytesCountsTouchedPagesOnly) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* p = ::mmap(nullptr, 16 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* bytes = static_cast<unsigned char*>(p);
  EXPECT_EQ(resident_bytes_of(p, 16 * page), 0);
  bytes[0] = 1;
  bytes[5 * page + 7] = 1;
  bytes[15 * page + page - 1] = 1;
  EXPECT_EQ(resident_bytes_of(p, 16 * page), int64_t(3 * page));
  // A range that starts and ends inside pages counts those whole pages.
  EXPECT_EQ(resident_bytes_of(bytes + 5 * page + 100, 10), int64_t(page));
  ::munmap(p, 16 * page);
}

// Llama-family checkpoints (grouped-query attention, an explicit head_dim,
// Qwen2's biases, an untied head, two shards): the report's weights are the
// files' tensors, whatever shape the loader fuses and transposes them into.
TEST(MemoryReport, LlamaFamilyWeightsAreTheirFilesTensors) {
  for (const char* name : {"llama-gqa2", "llama-gqa4-theta", "qwen2-mha", "qwen2-sharded"}) {
    SCOPED_TRACE(name);
    const auto dir = test::fixture_dir() / "llama" / name;
    const LoadedModel m = test::load_model(dir);
    const int64_t tensors = directory_tensor_bytes(dir);
    ASSERT_GT(tensors, 0);
    EXPECT_EQ(memory_report(*m.engine).weight_bytes, tensors);
  }
}

// The KV cache is sized for the key/value heads: config.json's
// num_key_value_heads x head_dim per token for K and for V, not hidden_size.
TEST(MemoryReport, TheKvCacheIsSizedForTheKeyValueHeads) {
  const auto dir = test::fixture_dir() / "llama" / "llama-gqa4-theta";
  std::ifstream in(dir / "config.json");
  const nlohmann::json cfg = nlohmann::json::parse(in);
  const int64_t per_token_per_layer =
      2 * cfg["num_key_value_heads"].get<int64_t>() * cfg["head_dim"].get<int64_t>() * 4;
  const int64_t blocks_per_sequence = (cfg["max_position_embeddings"].get<int64_t>() + 15) / 16;
  const LoadedModel m = test::load_model(dir);
  const KvCacheSize size = kv_cache_size_for(m.engine->config(), 3, 16, nullptr);
  EXPECT_EQ(size.bytes, 3 * blocks_per_sequence * 16 * per_token_per_layer *
                            cfg["num_hidden_layers"].get<int64_t>());
  EXPECT_NE(cfg["hidden_size"].get<int64_t>(),
            cfg["num_key_value_heads"].get<int64_t>() * cfg["head_dim"].get<int64_t>());
}

TEST(MemoryReport, WeightsAreTheModelsTensors) {
  const LoadedModel m = test::load_tiny();
  const MemoryReport r = memory_report(*m.engine);
  const int64_t tensors = fixture_tensor_bytes();
  ASSERT_GT(tensors, 0);
  EXPECT_EQ(r.weight_bytes, tensors);
  EXPECT_EQ(r.weight_mapped_bytes + r.weight_converted_bytes, r.weight_bytes);
  // The fixture is small F32 safetensors: every tensor is copied into memory.
  EXPECT_EQ(r.weight_dtype, "F32");
  EXPECT_EQ(r.weight_converted_bytes, r.weight_bytes);
  // Read in at load: every page of every tensor is in memory.
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  EXPECT_GE(r.weight_resident_bytes, r.weight_bytes);
  EXPECT_LE(r.weight_resident_bytes, r.weight_bytes + 2 * page);
  // No session: no trace store.
  EXPECT_EQ(r.trace_bytes, -1);
  EXPECT_GT(r.rss_bytes, 0);
  EXPECT_GE(r.rss_peak_bytes, r.rss_bytes);
  EXPECT_EQ(r.rss_bytes - r.accounted_bytes(), r.other_bytes());
}

TEST(MemoryReport, KvResidentGrowsWithTokensWrittenNotWithTheReservation) {
  const LoadedModel m = test::load_tiny();
  const ModelConfig& cfg = m.engine->config();
  const KvCacheShape& shape = m.engine->cache().shape();
  const int64_t bytes_per_token = int64_t(2) * cfg.n_layer * cfg.n_embd * 4;  // K and V
  const MemoryReport loaded = memory_report(*m.engine);
  ASSERT_TRUE(loaded.kv_on_host);
  EXPECT_EQ(loaded.kv_reserved_bytes,
            int64_t(shape.num_blocks) * shape.block_size * bytes_per_token);
  EXPECT_EQ(loaded.kv_used_bytes, 0);  // the warm-up's sequence was released
  EXPECT_EQ(loaded.kv_bytes_per_token, bytes_per_token);
  EXPECT_EQ(memory_report_json(loaded)["kv_pool"]["bytes_per_token"].get<int64_t>(),
            bytes_per_token);
  // Only the warm-up's block was written: far below the reservation.
  EXPECT_LT(loaded.kv_resident_bytes, loaded.kv_reserved_bytes / 4);

  Session s(m.tokenizer, m.engine, SessionOptions{});
  s.set_prompt(
      "The cat sat on the mat, and then the dog sat on the cat, and then the bird sat on the "
      "dog.");
  s.prefill();
  const int tokens = static_cast<int>(s.prompt_tokens().size());
  ASSERT_GT(tokens, 2 * shape.block_size);
  const MemoryReport after = memory_report(s);
  const int blocks = (tokens + shape.block_size - 1) / shape.block_size;
  EXPECT_EQ(after.kv_used_bytes, int64_t(blocks) * shape.block_size * bytes_per_token);
  // Every written slot's K and V rows are in resident pages.
  EXPECT_GE(after.kv_resident_bytes, int64_t(tokens) * bytes_per_token);
  EXPECT_GT(after.kv_resident_bytes, loaded.kv_resident_bytes);
  EXPECT_LE(after.kv_resident_bytes, after.kv_reserved_bytes);
  EXPECT_EQ(after.kv_reserved_bytes, loaded.kv_reserved_bytes);
}

TEST(MemoryReport, TraceBytesAreTheSessionsHistory) {
  const LoadedModel m = test::load_tiny();
  SessionOptions o;
  o.trace_budget_bytes = 3 << 20;
  Session s(m.tokenizer, m.engine, o);
  s.set_prompt("Once upon a time");
  s.prefill();
  for (int i = 0; i < 4; ++i) s.step();
  const MemoryReport r = memory_report(s);
  int64_t history = 0;
  for (const StepTracePtr& t : s.history()) history += t->memory_bytes();
  EXPECT_GT(history, 0);
  EXPECT_EQ(r.trace_bytes, history);
  EXPECT_EQ(r.trace_bytes, s.trace_bytes());
  EXPECT_EQ(r.trace_budget_bytes, 3 << 20);
}

TEST(MemoryReport, ScratchOfADecodeStepIsItsActivationsAndLogitsRow) {
  const LoadedModel m = test::load_tiny();
  const ModelConfig& cfg = m.engine->config();
  Session s(m.tokenizer, m.engine, SessionOptions{});
  s.set_prompt("Once upon a time");
  s.prefill();
  const int prompt = static_cast<int>(s.prompt_tokens().size());
  const MemoryReport after_prefill = memory_report(s);
  s.step();
  const MemoryReport r = memory_report(s);
  // One row: x, ln, attn, proj (C each), qkv (3C), hidden (4C); the logits
  // input row (C) and the logits (vocab).
  const int64_t c = cfg.n_embd;
  EXPECT_EQ(r.scratch_last_bytes, 4 * (11 * c + c + cfg.vocab_size));
  // The prefill's rows were the largest forward so far.
  EXPECT_EQ(after_prefill.scratch_last_bytes, 4 * (11 * c * prompt + c + cfg.vocab_size));
  EXPECT_GE(r.scratch_peak_bytes, after_prefill.scratch_last_bytes);
}

TEST(MemoryReport, LinesNameEveryPartWithUnits) {
  const LoadedModel m = test::load_tiny();
  Session s(m.tokenizer, m.engine, SessionOptions{});
  const std::vector<std::string> lines = memory_report_lines(memory_report(s));
  ASSERT_GE(lines.size(), 5u);
  const char* parts[] = {"weights", "KV pool", "trace", "scratch", "process"};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(lines[i].rfind(parts[i], 0), 0u) << lines[i];
    EXPECT_NE(lines[i].find("iB"), std::string::npos) << lines[i];  // KiB, MiB or GiB
  }
  const nlohmann::json j = memory_report_json(memory_report(s));
  EXPECT_EQ(j["weights"]["bytes"].get<int64_t>(), fixture_tensor_bytes());
  EXPECT_EQ(j["trace"]["budget_bytes"].get<int64_t>(), SessionOptions{}.trace_budget_bytes);
}

// A backend that passes everything to the CPU backend and keeps the
// options of the last forward.
class OptionsSpy final : public test::WrappedBackend {
 public:
  using WrappedBackend::WrappedBackend;
  void forward(const std::vector<BatchEntry>& batch, const ForwardOptions& options,
               std::vector<EntryOutput>& outputs) override {
    last = options;
    WrappedBackend::forward(batch, options, outputs);
  }
  ForwardOptions last;
};

// A backend that computes on a GPU: the report takes every figure from its
// memory() (no name switch), shows the device's memory, and the KV cache is
// sized against the device's free memory, not the host's RAM.
class DeviceLike final : public test::WrappedBackend {
 public:
  using WrappedBackend::WrappedBackend;
  BackendMemory memory() const override {
    BackendMemory m;
    m.where = "Test GPU memory";
    m.on_host = false;
    m.kv_reserved_bytes = 3 << 20;
    m.weight_copy_bytes = 5 << 20;
    m.scratch_last_bytes = m.scratch_peak_bytes = 7 << 20;
    m.pinned_host_bytes = 1 << 20;
    m.total_bytes = int64_t{80} << 30;
    m.free_bytes = int64_t{70} << 30;
    return m;
  }
  int64_t kv_budget_bytes() const override { return budget; }
  std::string kv_budget_name() const override { return "the GPU's free"; }
  int64_t budget = int64_t{1} << 30;
};

// The status bar's line: a tiny model's few hundred KiB of KV cache is not
// rounded to "0"; whole MiB from 10 MiB up; the weights' and the cache's
// formats are named when not f32.
TEST(MemoryReport, ShortLineKeepsSmallFiguresVisible) {
  MemoryReport r;
  r.rss_bytes = int64_t{334} << 20;
  r.weight_resident_bytes = int64_t{19} << 20;
  r.kv_on_host = true;
  r.kv_resident_bytes = int64_t{288} << 10;
  r.trace_bytes = 20 << 10;
  EXPECT_EQ(memory_report_short(r), "RSS 334 MiB: weights 19, KV 0.3, trace <0.1 MiB");
  r.kv_resident_bytes = 0;
  r.trace_bytes = (int64_t{5} << 20) + (int64_t{1} << 19);
  EXPECT_EQ(memory_report_short(r), "RSS 334 MiB: weights 19, KV 0, trace 5.5 MiB");
  // Formats other than f32 are named beside their figures.
  r.weight_format = "q4";
  r.kv_format = "bf16";
  EXPECT_EQ(memory_report_short(r), "RSS 334 MiB: weights 19 (q4), KV 0 (bf16), trace 5.5 MiB");
}

TEST(MemoryReport, AGpuBackendsMemoryIsReportedFromTheBackend) {
  auto w = std::make_shared<const ModelWeights>(load_model_dir(test::tiny_model_dir()));
  Engine engine(w, std::make_unique<DeviceLike>(make_cpu_backend(w, 2)), 256);
  const MemoryReport r = memory_report(engine);
  EXPECT_FALSE(r.kv_on_host);
  EXPECT_TRUE(r.device_memory);
  EXPECT_EQ(r.kv_reserved_bytes, 3 << 20);
  EXPECT_EQ(r.kv_resident_bytes, 0);
  EXPECT_EQ(r.device_weight_bytes, 5 << 20);
  EXPECT_EQ(r.device_free_bytes, int64_t{70} << 30);
  std::string all;
  for (const std::string& l : memory_report_lines(r)) all += l + "\n";
  EXPECT_NE(all.find("GPU      Test GPU memory: weights 5.0 MiB, KV pool 3.0 MiB, scratch 7.0 MiB; "
                     "70.00 GiB free of 80.00 GiB"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("pinned host staging 1.0 MiB"), std::string::npos) << all;
  const nlohmann::json j = memory_report_json(r);
  EXPECT_EQ(j["device"]["total_bytes"].get<int64_t>(), int64_t{80} << 30);
  EXPECT_EQ(j["kv_pool"]["reserved_bytes"].get<int64_t>(), 3 << 20);
  // A CPU backend's report has no device part.
  Engine cpu(w, make_cpu_backend(w, 2), 256);
  EXPECT_TRUE(memory_report_json(memory_report(cpu))["device"].is_null());
}

TEST(MemoryReport, TheKvCacheIsSizedAgainstTheBackendsMemory) {
  auto w = std::make_shared<const ModelWeights>(load_model_dir(test::tiny_model_dir()));
  DeviceLike device(make_cpu_backend(w, 2));
  const ModelConfig& cfg = w->config;
  const int64_t per_sequence =
      int64_t{(cfg.n_ctx + 15) / 16 * 16} * 2 * cfg.n_embd * cfg.n_layer * 4;
  device.budget = per_sequence * 4;
  EXPECT_NO_THROW(kv_cache_size_for(cfg, 4, 16, &device));
  try {
    kv_cache_size_for(cfg, 5, 16, &device);
    ADD_FAILURE() << "5 sequences do not fit a budget of 4";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than the GPU's free"), std::string::npos)
        << e.what();
  }
  // Without a backend: this machine's physical memory, as before.
  EXPECT_NO_THROW(kv_cache_size_for(cfg, 5, 16));
}

// A prompt's attention (n_layer x n_head x n^2) is recorded only for the
// layers the trace budget keeps, so a long prompt never holds it all; the
// trace is the same as when every layer was recorded and the budget cut it.
TEST(MemoryReport, PrefillRecordsOnlyTheAttentionTheBudgetKeeps) {
  const LoadedModel m = test::load_tiny();
  const ModelConfig& cfg = m.engine->config();
  auto weights = std::shared_ptr<const ModelWeights>(m.engine, &m.engine->weights());
  auto spy_owner = std::make_unique<OptionsSpy>(make_cpu_backend(weights, 2));
  OptionsSpy* spy = spy_owner.get();
  auto engine = std::make_shared<Engine>(weights, std::move(spy_owner), 4 * cfg.n_ctx);
  // Long enough (most of the 64-token context) that one layer's attention
  // outweighs the rest of the step's trace (logits, residuals, tables).
  std::string prompt = "The cat sat on the mat.";
  while (m.tokenizer->encode_ids(prompt + " The dog sat.").size() < 60) prompt += " The dog sat.";
  const int n = static_cast<int>(m.tokenizer->encode_ids(prompt).size());
  ASSERT_GE(n, 48);
  const int64_t per_layer = int64_t{cfg.n_head} * n * n * 4;
  ASSERT_GE(cfg.n_layer, 2);

  SessionOptions o;
  o.trace_budget_bytes = per_layer + per_layer / 2;  // one layer and the logits fit, not two
  Session s(m.tokenizer, engine, o);
  s.set_prompt(prompt);
  const StepTrace& pre = s.prefill();
  ASSERT_EQ(spy->last.attention_layers.size(), static_cast<size_t>(cfg.n_layer));
  EXPECT_TRUE(spy->last.attention_layers[0]);
  for (int l = 1; l < cfg.n_layer; ++l) EXPECT_FALSE(spy->last.attention_layers[l]) << l;
  ASSERT_EQ(pre.lanes[0].attention.size(), static_cast<size_t>(cfg.n_layer));
  ASSERT_TRUE(pre.lanes[0].attention[0]);
  EXPECT_FALSE(pre.lanes[0].attention[1]);
  EXPECT_LE(s.trace_bytes(), o.trace_budget_bytes);

  // The same prompt with room for everything: layer 0 is the same numbers,
  // and a layer left out is recomputed to the same numbers on demand.
  Session all(m.tokenizer, m.engine, SessionOptions{});
  all.set_prompt(prompt);
  const StepTrace& full = all.prefill();
  ASSERT_TRUE(full.lanes[0].attention[1]);
  EXPECT_EQ(*pre.lanes[0].attention[0], *full.lanes[0].attention[0]);
  EXPECT_EQ(s.attention(0, 0, 1), *full.lanes[0].attention[1]);

  // Nothing fits: no layer is recorded, and the trace still has one entry per layer.
  SessionOptions none;
  none.trace_budget_bytes = 1;
  Session empty(m.tokenizer, engine, none);
  empty.set_prompt(prompt);
  const StepTrace& bare = empty.prefill();
  for (int l = 0; l < cfg.n_layer; ++l) EXPECT_FALSE(spy->last.attention_layers[l]) << l;
  ASSERT_EQ(bare.lanes[0].attention.size(), static_cast<size_t>(cfg.n_layer));
  for (int l = 0; l < cfg.n_layer; ++l) EXPECT_FALSE(bare.lanes[0].attention[l]) << l;
}

// A session with a draft model: the draft's weights and KV pool are their own
// line, counted in the accounted bytes and the ratio; without one, nothing.
TEST(MemoryReport, TheDraftModelIsItsOwnPart) {
  const LoadedModel target = test::load_tiny();
  const LoadedModel draft = test::load_tiny();  // a model may draft for itself
  Session s(target.tokenizer, target.engine, SessionOptions{});
  const MemoryReport without = memory_report(s);
  EXPECT_FALSE(without.has_draft);
  EXPECT_TRUE(memory_report_json(without)["draft"].is_null());
  s.set_draft_engine(draft.engine);
  SamplingParams spec;
  spec.spec_gamma = 3;
  s.set_prompt("Once upon a time there was");
  s.set_strategies({spec});
  s.prefill();
  s.step();
  const MemoryReport r = memory_report(s);
  const MemoryReport d = memory_report(*draft.engine);
  ASSERT_TRUE(r.has_draft);
  EXPECT_EQ(r.draft_weight_bytes, fixture_tensor_bytes());
  EXPECT_EQ(r.draft_weight_resident_bytes, d.weight_resident_bytes);
  EXPECT_EQ(r.draft_kv_reserved_bytes, d.kv_reserved_bytes);
  EXPECT_EQ(r.draft_kv_used_bytes, d.kv_used_bytes);
  EXPECT_GT(r.draft_kv_used_bytes, 0) << "the draft's sequence holds the prompt and the drafts";
  EXPECT_EQ(r.draft_kv_resident_bytes, d.kv_resident_bytes);
  EXPECT_EQ(r.accounted_bytes(), r.weight_resident_bytes + r.kv_resident_bytes + r.trace_bytes +
                                     r.draft_weight_resident_bytes + r.draft_kv_resident_bytes);
  bool named = false;
  for (const std::string& line : memory_report_lines(r))
    named = named || line.rfind("draft", 0) == 0;
  EXPECT_TRUE(named);
  EXPECT_NE(memory_report_short(r).find(", draft "), std::string::npos);
  EXPECT_EQ(memory_report_json(r)["draft"]["weight_bytes"].get<int64_t>(), r.draft_weight_bytes);
}

}  // namespace
}  // namespace ts
