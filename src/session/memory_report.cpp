#include "session/memory_report.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <type_traits>
#include <utility>

#include "engine/backend.h"
#include "engine/engine.h"
#include "session/session.h"
#include "util/proc_fields.h"

namespace ts {
namespace {

size_t page_size() {
  static const size_t page = [] {
    const long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<size_t>(p) : size_t{4096};
  }();
  return page;
}

struct Range {
  uintptr_t begin = 0, end = 0;  // [begin, end)
};

// Page-aligned ranges covering `ranges`, sorted, overlaps merged (two
// tensors sharing a page count it once).
std::vector<Range> page_ranges(std::vector<Range> ranges) {
  const uintptr_t page = page_size();
  for (Range& r : ranges) {
    r.begin -= r.begin % page;
    r.end = (r.end + page - 1) / page * page;
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  std::vector<Range> merged;
  for (const Range& r : ranges) {
    if (r.end <= r.begin) continue;
    if (!merged.empty() && r.begin <= merged.back().end)
      merged.back().end = std::max(merged.back().end, r.end);
    else
      merged.push_back(r);
  }
  return merged;
}

// Resident bytes of page-aligned ranges, in chunks so that a 6 GB model
// needs no 1.5 M-entry vector.
int64_t resident_pages_bytes(const std::vector<Range>& aligned) {
  const size_t page = page_size();
  constexpr size_t kChunkPages = 1 << 16;
  std::vector<unsigned char> vec(kChunkPages);
  int64_t resident = 0;
  for (const Range& r : aligned) {
    for (uintptr_t at = r.begin; at < r.end;) {
      const size_t pages = std::min<size_t>(kChunkPages, (r.end - at) / page);
      if (::mincore(reinterpret_cast<void*>(at), pages * page, vec.data()) == 0)
        for (size_t i = 0; i < pages; ++i) resident += (vec[i] & 1) ? int64_t(page) : 0;
      at += pages * page;
    }
  }
  return resident;
}

// The tensors of the weights, as address ranges.
std::vector<Range> weight_ranges(const ModelWeights& w) {
  const ModelConfig& c = w.config;
  const int64_t C = c.n_embd;
  std::vector<Range> out;
  // A tensor of `count` values: fp32, or matmul weights in w.format (their
  // bytes are the values' and, for q8 / q4, the blocks' scales).
  auto add = [&]<class T>(const T* p, int64_t count) {
    if (p == nullptr || count <= 0) return;
    const auto b = reinterpret_cast<uintptr_t>(p);
    const size_t bytes = std::is_same_v<T, float> ? size_t(count) * sizeof(float)
                                                  : stored_bytes(w.format, size_t(count));
    out.push_back({b, b + static_cast<uintptr_t>(bytes)});
  };
  // The matrices' widths by family (GPT-2: qkv 3C, fc 4C; Llama: q + 2 kv
  // heads, gate | up; config.h).
  const int64_t qkv = c.qkv_dim(), q = c.q_dim(), fc = c.fc_dim(), mlp = c.mlp_dim();
  add(w.wte, int64_t(c.vocab_size) * C);
  add(w.wte_packed, int64_t(c.vocab_size) * C);
  add(w.lm_head, int64_t(c.vocab_size) * C);
  add(w.lm_head_packed, int64_t(c.vocab_size) * C);
  add(w.wpe, int64_t(c.n_ctx) * C);
  for (const LayerWeights& L : w.layers) {
    add(L.ln_1_weight, C);
    add(L.ln_1_bias, C);
    add(L.attn_qkv_weight, C * qkv);
    add(L.attn_qkv_bias, qkv);
    add(L.attn_proj_weight, q * C);
    add(L.attn_proj_bias, C);
    add(L.ln_2_weight, C);
    add(L.ln_2_bias, C);
    add(L.mlp_fc_weight, C * fc);
    add(L.mlp_fc_bias, fc);
    add(L.mlp_proj_weight, mlp * C);
    add(L.mlp_proj_bias, C);
    add(L.attn_qkv_packed, C * qkv);
    add(L.attn_proj_packed, q * C);
    add(L.mlp_fc_packed, C * fc);
    add(L.mlp_proj_packed, mlp * C);
  }
  add(w.ln_f_weight, C);
  add(w.ln_f_bias, C);
  return out;
}

// The file-backed mappings of this process (/proc/self/maps lines whose
// inode is not 0), sorted by address.
std::vector<Range> file_mappings() {
  std::vector<Range> out;
  std::ifstream in("/proc/self/maps");
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string span, perms, offset, dev;
    unsigned long long inode = 0;
    if (!(fields >> span >> perms >> offset >> dev >> inode) || inode == 0) continue;
    const auto dash = span.find('-');
    if (dash == std::string::npos) continue;
    try {
      out.push_back({static_cast<uintptr_t>(std::stoull(span.substr(0, dash), nullptr, 16)),
                     static_cast<uintptr_t>(std::stoull(span.substr(dash + 1), nullptr, 16))});
    } catch (const std::exception&) {
      continue;
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  return out;
}

bool inside_any(const std::vector<Range>& sorted, const Range& r) {
  auto it = std::upper_bound(sorted.begin(), sorted.end(), r.begin,
                             [](uintptr_t v, const Range& m) { return v < m.begin; });
  if (it == sorted.begin()) return false;
  --it;
  return r.begin >= it->begin && r.end <= it->end;
}

void read_process_status(MemoryReport& r) {
  const ProcFields f = ProcFields::read("/proc/self/status");
  r.rss_bytes = f.bytes("VmRSS", 0);
  r.rss_anon_bytes = f.bytes("RssAnon", 0);
  r.rss_file_bytes = f.bytes("RssFile", 0);
  r.rss_peak_bytes = f.bytes("VmHWM", 0);
}

// "0 B", "812 B", "4.0 KiB", "474.7 MiB", "5.80 GiB": a figure readable at
// every model size, with its unit.
std::string mib(int64_t bytes) {
  char buf[48];
  const double b = static_cast<double>(bytes);
  if (bytes > -1024 && bytes < 1024)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else if (b > -(1 << 20) && b < (1 << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else if (b > -(1ll << 30) && b < (1ll << 30))
    std::snprintf(buf, sizeof buf, "%.1f MiB", b / (1 << 20));
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / (1ll << 30));
  return buf;
}

// Whole MiB from 10 MiB up; below it one decimal, so that a small model's KV
// cache of a few hundred KiB does not read "0" ("<0.1" when even less).
std::string mib_number(int64_t bytes) {
  if (bytes == 0) return "0";
  const double mib = static_cast<double>(bytes) / (1 << 20);
  if (mib < 0.05) return "<0.1";
  char buf[32];
  std::snprintf(buf, sizeof buf, mib < 9.95 ? "%.1f" : "%.0f", mib);
  return buf;
}

}  // namespace

int64_t resident_bytes_of(const void* begin, size_t bytes) {
  const auto b = reinterpret_cast<uintptr_t>(begin);
  return resident_pages_bytes(page_ranges({{b, b + bytes}}));
}

int64_t MemoryReport::accounted_bytes() const {
  return weight_resident_bytes + kv_resident_bytes + std::max<int64_t>(0, trace_bytes) +
         draft_weight_resident_bytes + draft_kv_resident_bytes;
}

double MemoryReport::rss_ratio() const {
  const int64_t need = weight_bytes + kv_resident_bytes + std::max<int64_t>(0, trace_bytes) +
                       draft_weight_bytes + draft_kv_resident_bytes;
  return need > 0 ? static_cast<double>(rss_bytes) / static_cast<double>(need) : 0.0;
}

MemoryReport memory_report(const Engine& engine) {
  MemoryReport r;
  const ModelWeights& w = engine.weights();
  r.weight_dtype = w.storage_dtype;
  r.weight_format = weight_format_name(w.format);
  const std::vector<Range> tensors = weight_ranges(w);
  const std::vector<Range> files = file_mappings();
  for (const Range& t : tensors) {
    const int64_t n = static_cast<int64_t>(t.end - t.begin);
    r.weight_bytes += n;
    (inside_any(files, t) ? r.weight_mapped_bytes : r.weight_converted_bytes) += n;
  }
  r.weight_resident_bytes = resident_pages_bytes(page_ranges(tensors));

  const KvOccupancy kv = engine.cache().occupancy();
  r.kv_used_bytes = kv.bytes_per_layer_used * engine.config().n_layer;
  const KvCacheShape& shape = engine.cache().shape();
  r.kv_format = weight_format_name(shape.format);
  r.kv_bytes_per_token = shape.bytes_per_block_per_layer() / shape.block_size * shape.n_layer;
  const BackendMemory m = engine.backend().memory();
  r.kv_on_host = m.on_host;
  r.kv_reserved_bytes = m.kv_reserved_bytes;
  r.scratch_last_bytes = m.scratch_last_bytes;
  r.scratch_peak_bytes = m.scratch_peak_bytes;
  if (m.on_host) {
    std::vector<Range> pools;
    for (const BackendMemory::Range& p : m.kv_pools) {
      const auto b = reinterpret_cast<uintptr_t>(p.begin);
      pools.push_back({b, b + p.bytes});
    }
    r.kv_resident_bytes = resident_pages_bytes(page_ranges(pools));
  } else {
    r.device_memory = true;
    r.device_name = m.where;
    r.device_weight_bytes = m.weight_copy_bytes;
    r.device_total_bytes = m.total_bytes;
    r.device_free_bytes = m.free_bytes;
    r.pinned_host_bytes = m.pinned_host_bytes;
  }
  read_process_status(r);
  return r;
}

MemoryReport memory_report(const Session& session) {
  MemoryReport r = memory_report(session.engine());
  r.trace_bytes = session.trace_bytes();
  r.trace_budget_bytes = session.options().trace_budget_bytes;
  if (const std::shared_ptr<Engine>& draft = session.draft_engine()) {
    const MemoryReport d = memory_report(*draft);
    r.has_draft = true;
    r.draft_weight_bytes = d.weight_bytes;
    r.draft_weight_resident_bytes = d.weight_resident_bytes;
    r.draft_kv_reserved_bytes = d.kv_reserved_bytes;
    r.draft_kv_used_bytes = d.kv_used_bytes;
    r.draft_kv_resident_bytes = d.kv_resident_bytes;
  }
  return r;
}

std::vector<std::string> memory_report_lines(const MemoryReport& r) {
  std::vector<std::string> lines;
  const std::string format =
      r.weight_format == "f32" ? "fp32" : r.weight_format + " matmuls, fp32 rest";
  std::string weights = "weights  " + mib(r.weight_bytes) + " " + format + " (stored " +
                        (r.weight_dtype.empty() ? std::string("?") : r.weight_dtype) +
                        "): " + mib(r.weight_converted_bytes) + " read into memory at load, " +
                        mib(r.weight_mapped_bytes) + " read in place from the file map; " +
                        mib(r.weight_resident_bytes) + " resident";
  lines.push_back(weights);
  const std::string kv = "KV pool  " + mib(r.kv_reserved_bytes) + " " +
                         (r.kv_format == "f32" ? std::string("fp32") : r.kv_format) + " reserved, ";
  const std::string per_token =
      "; " + std::to_string(r.kv_bytes_per_token) + " B per token (K and V, every layer)";
  if (r.kv_on_host)
    lines.push_back(kv + mib(r.kv_used_bytes) + " held by sequences now, " +
                    mib(r.kv_resident_bytes) + " resident (pages written so far)" + per_token);
  else
    lines.push_back(kv + mib(r.kv_used_bytes) +
                    " held by sequences now, in device memory (not in this process's RSS)" +
                    per_token);
  if (r.trace_bytes >= 0)
    lines.push_back("trace    " + mib(r.trace_bytes) + " of a " + mib(r.trace_budget_bytes) +
                    " budget (attention and logits the history keeps)");
  else
    lines.push_back("trace    0 B (no session yet)");
  if (r.has_draft)
    lines.push_back("draft    weights " + mib(r.draft_weight_bytes) + " (" +
                    mib(r.draft_weight_resident_bytes) + " resident), KV pool " +
                    mib(r.draft_kv_reserved_bytes) + " reserved, " + mib(r.draft_kv_used_bytes) +
                    " held, " + mib(r.draft_kv_resident_bytes) +
                    " resident (the speculative lanes' draft model)");
  if (r.device_memory)
    lines.push_back("scratch  " + mib(r.scratch_last_bytes) +
                    " of device buffers (activations, results, cuBLAS workspace), kept between "
                    "steps");
  else if (r.scratch_last_bytes >= 0)
    lines.push_back("scratch  " + mib(r.scratch_last_bytes) +
                    " in the last forward (freed after it), largest so far " +
                    mib(r.scratch_peak_bytes));
  else
    lines.push_back("scratch  not reported by this backend");
  if (r.device_memory)
    lines.push_back("GPU      " + r.device_name + ": weights " + mib(r.device_weight_bytes) +
                    ", KV pool " + mib(r.kv_reserved_bytes) + ", scratch " +
                    mib(r.scratch_last_bytes) + "; " + mib(r.device_free_bytes) + " free of " +
                    mib(r.device_total_bytes) + " (cudaMemGetInfo); pinned host staging " +
                    mib(r.pinned_host_bytes));
  lines.push_back("process  " + mib(r.rss_bytes) + " resident (anonymous " + mib(r.rss_anon_bytes) +
                  ", file " + mib(r.rss_file_bytes) + "), peak " + mib(r.rss_peak_bytes) + "; " +
                  mib(r.other_bytes()) + " outside the parts above; from /proc/self/status");
  char ratio[96];
  std::snprintf(ratio, sizeof ratio, "%.2f", r.rss_ratio());
  lines.push_back("ratio    " + std::string(ratio) +
                  " = resident / (weights + KV pool resident + trace" +
                  (r.has_draft ? " + the draft's weights and KV pool)" : ")"));
  return lines;
}

std::string memory_report_short(const MemoryReport& r) {
  // A format other than f32 is named beside its figure: the line is where a
  // window run with --weights / --kv shows which one it loaded.
  const auto named = [](const std::string& format) {
    return format.empty() || format == "f32" ? std::string() : " (" + format + ")";
  };
  std::string s = "RSS " + mib_number(r.rss_bytes) + " MiB: weights " +
                  mib_number(r.weight_resident_bytes) + named(r.weight_format) + ", KV " +
                  mib_number(r.kv_on_host ? r.kv_resident_bytes : 0) + named(r.kv_format);
  if (r.trace_bytes >= 0) s += ", trace " + mib_number(r.trace_bytes);
  if (r.has_draft)
    s += ", draft " + mib_number(r.draft_weight_resident_bytes + r.draft_kv_resident_bytes);
  return s + " MiB";
}

nlohmann::json memory_report_json(const MemoryReport& r) {
  return {{"weights",
           {{"bytes", r.weight_bytes},
            {"mapped_bytes", r.weight_mapped_bytes},
            {"converted_bytes", r.weight_converted_bytes},
            {"resident_bytes", r.weight_resident_bytes},
            {"stored_as", r.weight_dtype},
            {"format", r.weight_format}}},
          {"kv_pool",
           {{"on_host", r.kv_on_host},
            {"format", r.kv_format},
            {"reserved_bytes", r.kv_reserved_bytes},
            {"used_bytes", r.kv_used_bytes},
            {"resident_bytes", r.kv_resident_bytes},
            {"bytes_per_token", r.kv_bytes_per_token}}},
          {"trace", {{"bytes", r.trace_bytes}, {"budget_bytes", r.trace_budget_bytes}}},
          {"draft", r.has_draft
                        ? nlohmann::json{{"weight_bytes", r.draft_weight_bytes},
                                         {"weight_resident_bytes", r.draft_weight_resident_bytes},
                                         {"kv_reserved_bytes", r.draft_kv_reserved_bytes},
                                         {"kv_used_bytes", r.draft_kv_used_bytes},
                                         {"kv_resident_bytes", r.draft_kv_resident_bytes}}
                        : nlohmann::json(nullptr)},
          {"scratch", {{"last_bytes", r.scratch_last_bytes}, {"peak_bytes", r.scratch_peak_bytes}}},
          {"device", r.device_memory ? nlohmann::json{{"name", r.device_name},
                                                      {"weight_bytes", r.device_weight_bytes},
                                                      {"kv_reserved_bytes", r.kv_reserved_bytes},
                                                      {"scratch_bytes", r.scratch_last_bytes},
                                                      {"free_bytes", r.device_free_bytes},
                                                      {"total_bytes", r.device_total_bytes},
                                                      {"pinned_host_bytes", r.pinned_host_bytes}}
                                     : nlohmann::json(nullptr)},
          {"process",
           {{"source", "/proc/self/status"},
            {"rss_bytes", r.rss_bytes},
            {"rss_anon_bytes", r.rss_anon_bytes},
            {"rss_file_bytes", r.rss_file_bytes},
            {"peak_rss_bytes", r.rss_peak_bytes},
            {"other_bytes", r.other_bytes()}}},
          {"rss_ratio", r.rss_ratio()}};
}

}  // namespace ts
