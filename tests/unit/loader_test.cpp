// Loader tests: HF safetensors directories (F32 / F16 / BF16), llm.c .bin
// (v3 fp32, v5 bf16), the dispatcher, and every malformed input the loaders
// must refuse with one clear line naming the file and the field or tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "model/config_json.h"
#include "model/half_float.h"
#include "model/llmc_loader.h"
#include "model/model_loader.h"
#include "model/safetensors.h"
#include "test_model_writer.h"
#include "util/error.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
using test::HfWriteOptions;
using test::LlmcWriteOptions;
using test::RandomGpt2;
using test::TempDir;
using json = nlohmann::json;

// Runs f, which must throw ts::Error; returns its message (empty on failure).
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-ts::Error exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "did not throw";
  return {};
}

// f must throw a one-line ts::Error containing every part.
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  const std::string msg = error_of(f);
  if (msg.empty()) return;
  if (std::getenv("TS_PRINT_ERRORS") != nullptr) std::printf("  error: %s\n", msg.c_str());
  EXPECT_EQ(msg.find('\n'), std::string::npos) << "multi-line message: " << msg;
  for (const std::string& part : parts) {
    EXPECT_NE(msg.find(part), std::string::npos) << "message lacks \"" << part << "\": " << msg;
  }
}

#define EXPECT_LOAD_ERROR(expr, ...)                    \
  do {                                                  \
    SCOPED_TRACE(#expr);                                \
    expect_error([&] { (void)(expr); }, {__VA_ARGS__}); \
  } while (0)

// Every tensor of `w` equals round_trip(model, dtype) bit for bit.
void expect_weights(const ModelWeights& w, const RandomGpt2& m, DType dtype) {
  EXPECT_EQ(w.config.vocab_size, m.config.vocab_size);
  EXPECT_EQ(w.config.n_ctx, m.config.n_ctx);
  EXPECT_EQ(w.config.n_embd, m.config.n_embd);
  EXPECT_EQ(w.config.n_head, m.config.n_head);
  EXPECT_EQ(w.config.n_layer, m.config.n_layer);
  ASSERT_EQ(w.layers.size(), size_t(m.config.n_layer));
  for (const auto& [name, values] : m.tensors) {
    const float* p = test::find_weight(w, name);
    ASSERT_NE(p, nullptr) << name;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % alignof(float), 0u) << name;
    const std::vector<float> want = test::round_trip(values, dtype);
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      if (std::memcmp(&p[i], &want[i], 4) != 0 && bad++ < 3) {
        ADD_FAILURE() << name << "[" << i << "] = " << p[i] << ", want " << want[i];
      }
    }
    EXPECT_EQ(bad, 0u) << name;
  }
}

// Two loads hold identical numbers.
void expect_same_weights(const ModelWeights& a, const ModelWeights& b, const RandomGpt2& m) {
  for (const auto& [name, values] : m.tensors) {
    const float* pa = test::find_weight(a, name);
    const float* pb = test::find_weight(b, name);
    ASSERT_NE(pa, nullptr);
    ASSERT_NE(pb, nullptr);
    EXPECT_EQ(std::memcmp(pa, pb, values.size() * sizeof(float)), 0) << name;
  }
}

// True if p lies in a memory mapping of `file` (Linux /proc/self/maps).
bool maps_file(const void* p, const fs::path& file) {
  const std::string want = fs::canonical(file).string();
  std::ifstream maps("/proc/self/maps");
  std::string line;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  while (std::getline(maps, line)) {
    std::istringstream ls(line);
    std::string range, perms, offset, dev, inode, path;
    ls >> range >> perms >> offset >> dev >> inode;
    std::getline(ls >> std::ws, path);
    const size_t dash = range.find('-');
    const uintptr_t lo = std::stoull(range.substr(0, dash), nullptr, 16);
    const uintptr_t hi = std::stoull(range.substr(dash + 1), nullptr, 16);
    if (addr >= lo && addr < hi) return path == want;
  }
  return false;
}

class LoaderTest : public ::testing::Test {
 protected:
  LoaderTest() : model_(test::make_random_gpt2(test::tiny_config(), 1234)) {}

  // Writes an HF dir under the temp dir and returns its path.
  fs::path hf(const HfWriteOptions& options = {}, const std::string& name = "model") {
    const fs::path dir = tmp_ / name;
    test::write_hf_dir(model_, dir, options);
    return dir;
  }
  fs::path llmc(const LlmcWriteOptions& options = {}, const std::string& name = "gpt2_tiny.bin") {
    const fs::path file = tmp_ / name;
    test::write_llmc_bin(model_, file, options);
    return file;
  }
  // Edits one tensor entry of the safetensors header.
  static HfWriteOptions edit_tensor(const std::string& tensor, std::function<void(json&)> edit) {
    HfWriteOptions o;
    o.safetensors.edit_header = [tensor, edit](json& h) { edit(h.at(tensor)); };
    return o;
  }
  static HfWriteOptions edit_config(std::function<void(json&)> edit) {
    HfWriteOptions o;
    o.edit_config = std::move(edit);
    return o;
  }

  RandomGpt2 model_;
  TempDir tmp_;
};

// ---------------------------------------------------------------- half floats

TEST(HalfFloat, Fp16EveryValueRoundTrips) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(uint16_t(h));
    const bool nan = (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
    if (nan) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(f)))) << h;
    } else {
      ASSERT_EQ(fp32_to_fp16(f), h) << "half 0x" << std::hex << h << " -> " << f;
    }
  }
}

TEST(HalfFloat, Fp16KnownValuesAndRounding) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xC000);
  EXPECT_EQ(fp32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65519.0f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65520.0f), 0x7C00);  // ties to even: infinity
  EXPECT_EQ(fp32_to_fp16(1e30f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-INFINITY), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -25)), 0x0000);  // tie -> even (0)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.0f, -25)), 0x0002);  // 1.5 * 2^-24: tie -> even (2)
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie -> even
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(NAN))));
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(fp16_to_fp32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(fp16_to_fp32(0xFC00), -INFINITY);
}

#if defined(__FLT16_MAX__)
TEST(HalfFloat, Fp16MatchesCompilerConversion) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    _Float16 x;
    const uint16_t hb = uint16_t(h);
    std::memcpy(&x, &hb, 2);
    const float want = static_cast<float>(x);
    const float got = fp16_to_fp32(hb);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << h;
    } else {
      ASSERT_EQ(float_to_bits(got), float_to_bits(want)) << h;
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = rng();
    const float f = bits_to_float(bits);
    if (std::isnan(f)) continue;
    const _Float16 h = static_cast<_Float16>(f);
    uint16_t hb;
    std::memcpy(&hb, &h, 2);
    ASSERT_EQ(fp32_to_fp16(f), hb) << f;
  }
}
#endif

TEST(HalfFloat, Bf16RoundTripAndRounding) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_fp32(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(f))));
    } else {
      ASSERT_EQ(fp32_to_bf16(f), h);
    }
  }
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3F80);      // tie -> even
  EXPECT_EQ(fp32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3F82);  // tie -> even
  EXPECT_EQ(fp32_to_bf16(1.0f + std::ldexp(1.0f, -7)), 0x3F81);
  EXPECT_EQ(fp32_to_bf16(3.4028235e38f), 0x7F80);  // rounds to infinity
}

// ---------------------------------------------------------------- safetensors

TEST_F(LoaderTest, SafetensorsParsesTensorsAndMetadata) {
  const fs::path dir = hf();
  SafetensorsFile st(dir / "model.safetensors");
  EXPECT_EQ(st.metadata().at("format"), "pt");
  EXPECT_EQ(st.tensors().size(), 4u + 12u * 2u);
  const TensorInfo* t = st.find("h.1.attn.c_attn.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::F32);
  EXPECT_EQ(t->shape, (std::vector<int64_t>{24, 72}));
  EXPECT_EQ(t->nbytes(), 24u * 72u * 4u);
  EXPECT_EQ(st.find("nope"), nullptr);
  std::vector<float> v(t->numel());
  SafetensorsFile::to_f32(*t, v.data());
  EXPECT_EQ(v, model_.at("h.1.attn.c_attn.weight"));
}

TEST_F(LoaderTest, SafetensorsEmptyHeaderObjectIsValid) {
  const fs::path f = tmp_ / "empty.safetensors";
  test::SafetensorsWriteOptions o;
  o.metadata.clear();
  test::write_safetensors(f, {}, o);
  SafetensorsFile st(f);
  EXPECT_TRUE(st.tensors().empty());
  // Scalars and zero-sized tensors are fine too.
  test::write_safetensors(
      f, {{"scalar", "F32", {}, test::encode({3.5f}, DType::F32)}, {"empty", "F16", {0, 4}, {}}});
  SafetensorsFile st2(f);
  ASSERT_EQ(st2.tensors().size(), 2u);
  float x = 0;
  SafetensorsFile::to_f32(*st2.find("scalar"), &x);
  EXPECT_EQ(x, 3.5f);
  EXPECT_EQ(st2.find("empty")->numel(), 0u);
}

// ---------------------------------------------------------------- good HF dirs

// The smaps field of the mapping that holds p, e.g. "THPeligible"; -1 when
// the kernel does not report it.
long smaps_field(const void* p, const std::string& field) {
  std::ifstream smaps("/proc/self/smaps");
  const auto addr = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    const size_t dash = line.find('-');
    const size_t space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space &&
        line.find(':') > space) {  // a mapping's first line: "lo-hi perms ..."
      const uintptr_t lo = std::stoull(line.substr(0, dash), nullptr, 16);
      const uintptr_t hi = std::stoull(line.substr(dash + 1, space - dash - 1), nullptr, 16);
      inside = addr >= lo && addr < hi;
    } else if (inside && line.rfind(field + ":", 0) == 0) {
      return std::stol(line.substr(field.size() + 1));
    }
  }
  return -1;
}

bool file_is_mapped(const fs::path& file) {
  const std::string want = fs::canonical(file).string();
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);)
    if (line.size() >= want.size() &&
        line.compare(line.size() - want.size(), want.size(), want) == 0)
      return true;
  return false;
}

TEST_F(LoaderTest, LoadsF32IntoItsOwnAlignedMemoryAndLetsTheFileGo) {
  const fs::path dir = hf();
  const ModelWeights w = load_model_dir(dir, -1, WeightPlacement::kCopy);
  expect_weights(w, model_, DType::F32);
  EXPECT_EQ(w.storage_dtype, "F32");
  EXPECT_EQ(w.source, dir.string());
  EXPECT_FLOAT_EQ(w.config.layer_norm_epsilon, 1e-5f);
  // Copied out of the map, which is gone once loading returns.
  EXPECT_FALSE(maps_file(w.wte, dir / "model.safetensors"));
  EXPECT_FALSE(maps_file(w.layers[1].mlp_proj_weight, dir / "model.safetensors"));
  EXPECT_FALSE(file_is_mapped(dir / "model.safetensors"));
  // Every tensor starts on a 64-byte boundary, the buffer on a 2 MB one.
  for (const LayerWeights& l : w.layers)
    for (const float* p : {l.attn_qkv_weight, l.attn_qkv_bias, l.mlp_proj_weight, l.ln_2_bias})
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
  // Advised for huge pages: where the kernel has them (THP "always" or
  // "madvise"), the mapping is eligible; where it has none, nothing to check.
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string mode;
  std::getline(thp, mode);
  const long eligible = smaps_field(w.wte, "THPeligible");
  if (eligible >= 0 && mode.find("[never]") == std::string::npos) {
    EXPECT_EQ(eligible, 1) << mode;
  }
}

// With less memory available than twice the weights (forced here), aligned
// F32 is used straight from the populated memory map, as before huge pages.
TEST_F(LoaderTest, LoadsF32InPlaceWhenMemoryIsShort) {
  const fs::path dir = hf();
  const ModelWeights w = load_model_dir(dir, -1, WeightPlacement::kInPlace);
  expect_weights(w, model_, DType::F32);
  EXPECT_TRUE(maps_file(w.wte, dir / "model.safetensors"));
  EXPECT_TRUE(maps_file(w.layers[1].mlp_proj_weight, dir / "model.safetensors"));
}

// Automatic placement copies with at least twice the weights available (or
// when available memory is unknown), else reads in place; the forced modes
// ignore the figure.
TEST(WeightPlacementRule, CopiesWithTwiceTheWeightsAvailable) {
  const int64_t w = 498'000'000;
  EXPECT_TRUE(copies_weights(WeightPlacement::kAuto, 2 * w, w));
  EXPECT_TRUE(copies_weights(WeightPlacement::kAuto, 24'000'000'000, w));
  EXPECT_FALSE(copies_weights(WeightPlacement::kAuto, 2 * w - 1, w));
  EXPECT_FALSE(copies_weights(WeightPlacement::kAuto, 0, w));
  EXPECT_TRUE(copies_weights(WeightPlacement::kAuto, -1, w));
  EXPECT_TRUE(copies_weights(WeightPlacement::kAuto, INT64_MAX, INT64_MAX / 2));
  EXPECT_FALSE(copies_weights(WeightPlacement::kAuto, INT64_MAX - 1, INT64_MAX / 2 + 1));
  EXPECT_TRUE(copies_weights(WeightPlacement::kCopy, 0, w));
  EXPECT_FALSE(copies_weights(WeightPlacement::kInPlace, 24'000'000'000, w));
}

TEST_F(LoaderTest, LoadsMisalignedF32ByCopying) {
  HfWriteOptions o;
  o.safetensors.misalign_data = true;
  const fs::path dir = hf(o);
  SafetensorsFile st(dir / "model.safetensors");
  EXPECT_EQ(st.header().data_offset % 4, 2u);
  const ModelWeights w = load_model_dir(dir, -1, WeightPlacement::kInPlace);
  expect_weights(w, model_, DType::F32);
  EXPECT_FALSE(maps_file(w.wte, dir / "model.safetensors"));
}

TEST_F(LoaderTest, LoadsF16) {
  HfWriteOptions o;
  o.dtype = DType::F16;
  const ModelWeights w = load_model_dir(hf(o));
  expect_weights(w, model_, DType::F16);
  EXPECT_EQ(w.storage_dtype, "F16");
  // And within half precision of the originals.
  const auto& wte = model_.at("wte.weight");
  for (size_t i = 0; i < wte.size(); ++i)
    EXPECT_NEAR(w.wte[i], wte[i], std::abs(wte[i]) * 1e-3 + 1e-7);
}

TEST_F(LoaderTest, LoadsBF16) {
  HfWriteOptions o;
  o.dtype = DType::BF16;
  const ModelWeights w = load_model_dir(hf(o));
  expect_weights(w, model_, DType::BF16);
  EXPECT_EQ(w.storage_dtype, "BF16");
  const auto& ln = model_.at("h.0.ln_1.weight");
  for (size_t i = 0; i < ln.size(); ++i)
    EXPECT_NEAR(w.layers[0].ln_1_weight[i], ln[i], std::abs(ln[i]) * 4e-3);
}

TEST_F(LoaderTest, LoadsWithTransformerPrefixBuffersAndTiedLmHead) {
  HfWriteOptions o;
  o.transformer_prefix = true;
  o.attn_bias_buffers = true;
  o.tied_lm_head = true;
  const fs::path dir = hf(o);
  SafetensorsFile st(dir / "model.safetensors");
  EXPECT_NE(st.find("transformer.h.0.attn.bias"), nullptr);
  EXPECT_NE(st.find("transformer.h.1.attn.masked_bias"), nullptr);
  EXPECT_NE(st.find("lm_head.weight"), nullptr);
  const ModelWeights w = load_model_dir(dir);
  expect_weights(w, model_, DType::F32);
  expect_same_weights(w, load_model_dir(hf({}, "plain")), model_);
}

TEST_F(LoaderTest, TiedLmHeadInOtherDtypeAccepted) {
  HfWriteOptions o;
  o.dtype = DType::BF16;
  o.tied_lm_head = true;
  expect_weights(load_model_dir(hf(o)), model_, DType::BF16);
}

TEST_F(LoaderTest, IgnoredBuffersMayUseNonFloatDtypes) {
  HfWriteOptions o;
  o.attn_bias_buffers = true;
  o.safetensors.edit_header = [](json& h) {
    // A BOOL causal mask: 1 byte per element.
    for (const char* name : {"h.0.attn.bias", "h.1.attn.bias"}) {
      json& e = h.at(name);
      const uint64_t begin = e["data_offsets"][0];
      e["dtype"] = "BOOL";
      e["shape"] = {1, 1, 16, 4};  // 64 bytes inside the original 16*16*4
      e["data_offsets"] = {begin, begin + 64};
    }
  };
  expect_weights(load_model_dir(hf(o)), model_, DType::F32);
}

TEST_F(LoaderTest, EveryFormatGivesTheSameWeights) {
  const ModelWeights f32 = load_model_dir(hf());
  const ModelWeights v3 = load_llmc_checkpoint(llmc());
  expect_weights(v3, model_, DType::F32);
  expect_same_weights(f32, v3, model_);

  HfWriteOptions bf;
  bf.dtype = DType::BF16;
  const ModelWeights hf_bf16 = load_model_dir(hf(bf, "bf16"));
  LlmcWriteOptions v5o;
  v5o.version = 5;
  const ModelWeights v5 = load_llmc_checkpoint(llmc(v5o, "gpt2_tiny_bf16.bin"));
  EXPECT_EQ(v5.storage_dtype, "BF16");
  expect_same_weights(hf_bf16, v5, model_);

  expect_same_weights(f32, test::as_model_weights(model_), model_);
}

TEST_F(LoaderTest, WeightsOutliveEveryOtherHandle) {
  ModelWeights copy;
  {
    const ModelWeights w = load_model_dir(hf());
    copy = w;
  }
  fs::remove_all(tmp_ / "model");  // the mapping stays valid after unlink
  expect_weights(copy, model_, DType::F32);
}

TEST_F(LoaderTest, DispatcherPicksTheFormat) {
  const fs::path dir = hf();
  expect_weights(load_model(dir), model_, DType::F32);
  expect_weights(load_model(dir / "model.safetensors"), model_, DType::F32);
  expect_weights(load_model(dir / "config.json"), model_, DType::F32);
  const fs::path bin = llmc();
  EXPECT_TRUE(is_llmc_checkpoint(bin));
  EXPECT_FALSE(is_llmc_checkpoint(dir / "model.safetensors"));
  expect_weights(load_model(bin), model_, DType::F32);
  EXPECT_EQ(load_model(bin).source, bin.string());
}

TEST_F(LoaderTest, DispatcherRefusesOtherThings) {
  EXPECT_LOAD_ERROR(load_model(tmp_ / "missing"), "missing", "no such file or directory");
  test::write_file(tmp_ / "notes.txt", std::string("hello"));
  EXPECT_LOAD_ERROR(load_model(tmp_ / "notes.txt"), "notes.txt", "not a model");
  test::write_file(tmp_ / "pytorch_model.bin", std::string("PK\x03\x04 pickle"));
  EXPECT_LOAD_ERROR(load_model(tmp_ / "pytorch_model.bin"), "pytorch_model.bin", "safetensors");
  test::write_file(tmp_ / "weights.bin", std::vector<uint8_t>(2048, 7));
  EXPECT_LOAD_ERROR(load_model(tmp_ / "weights.bin"), "weights.bin", "bad magic", "header[0]");
  test::write_file(tmp_ / "empty.bin", std::vector<uint8_t>{});
  EXPECT_LOAD_ERROR(load_model(tmp_ / "empty.bin"), "empty.bin", "too short");
}

// ---------------------------------------------------------------- directory errors

TEST_F(LoaderTest, DirectoryLevelErrors) {
  EXPECT_LOAD_ERROR(load_model_dir(tmp_ / "nope"), "nope", "no such directory");
  const fs::path file = tmp_ / "file";
  test::write_file(file, std::string("x"));
  EXPECT_LOAD_ERROR(load_model_dir(file), "file", "not a directory");

  HfWriteOptions no_config;
  no_config.write_config = false;
  EXPECT_LOAD_ERROR(load_model_dir(hf(no_config, "noconfig")), "config.json", "not found");

  const fs::path pt = tmp_ / "pt";
  fs::create_directories(pt);
  test::write_file(pt / "config.json", test::make_config_json(model_.config).dump());
  test::write_file(pt / "pytorch_model.bin", std::string("pickle"));
  EXPECT_LOAD_ERROR(load_model_dir(pt), "model.safetensors", "pytorch_model.bin",
                    "convert it to safetensors");
  fs::remove(pt / "pytorch_model.bin");
  EXPECT_LOAD_ERROR(load_model_dir(pt), "model.safetensors", "not found");
  test::write_file(pt / "model.safetensors.index.json", std::string("{}"));
  EXPECT_LOAD_ERROR(load_model_dir(pt), "model.safetensors", "sharded");
}

TEST_F(LoaderTest, VocabMustMatchTheTokenizer) {
  const fs::path dir = hf();
  EXPECT_NO_THROW(load_model_dir(dir, 61));
  EXPECT_NO_THROW(load_model(dir, 61));
  EXPECT_LOAD_ERROR(load_model_dir(dir, 50257), "config.json", "vocab_size 61", "the tokenizer",
                    "50257 tokens");
  test::write_file(dir / "vocab.json", std::string("{}"));
  EXPECT_LOAD_ERROR(load_model_dir(dir, 60), "config.json", "vocab_size 61", "vocab.json",
                    "60 tokens");
  EXPECT_LOAD_ERROR(load_model(llmc(), 50257), "gpt2_tiny.bin", "vocab_size 61", "50257");
}

// ---------------------------------------------------------------- safetensors errors

TEST_F(LoaderTest, HeaderLengthTooBig) {
  HfWriteOptions o;
  o.safetensors.header_length = 1'000'000'000'000ull;
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors", "header length 1000000000000",
                    "limit");
  o.safetensors.header_length = uint64_t(-1);
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors", "header length");
}

TEST_F(LoaderTest, HeaderLengthBeyondTheFile) {
  const fs::path dir = hf();
  const uint64_t size = fs::file_size(dir / "model.safetensors");
  HfWriteOptions o;
  o.safetensors.header_length = size - 7;
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors",
                    "header length " + std::to_string(size - 7), "truncated");
}

TEST_F(LoaderTest, HeaderLengthTooSmall) {
  for (uint64_t n : {0ull, 1ull}) {
    HfWriteOptions o;
    o.safetensors.header_length = n;
    EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors",
                      "header length " + std::to_string(n), "too small");
  }
}

TEST_F(LoaderTest, FileTooShortForTheLength) {
  const fs::path dir = hf();
  for (size_t n : {0u, 1u, 7u}) {
    test::write_file(dir / "model.safetensors", std::vector<uint8_t>(n, 1));
    EXPECT_LOAD_ERROR(load_model_dir(dir), "model.safetensors",
                      "file is " + std::to_string(n) + " bytes", "too short");
  }
}

TEST_F(LoaderTest, TruncatedData) {
  HfWriteOptions o;
  o.safetensors.truncate_bytes = 10;
  // The last tensor written is ln_f.bias.
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors", "tensor ln_f.bias",
                    "outside data section");
}

TEST_F(LoaderTest, TruncatedInsideTheHeader) {
  const fs::path dir = hf();
  std::vector<uint8_t> bytes = test::read_file(dir / "model.safetensors");
  bytes.resize(100);
  test::write_file(dir / "model.safetensors", bytes);
  EXPECT_LOAD_ERROR(load_model_dir(dir), "model.safetensors", "header length", "truncated");
}

TEST_F(LoaderTest, BadJsonHeader) {
  HfWriteOptions o;
  o.safetensors.raw_header = "{\"wte.weight\": {\"dtype\": \"F32\",\n\"shape\": [61,";
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors", "not valid JSON");
  o.safetensors.raw_header = std::string("{\"a\xff\xfe\": 1}");
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors", "not valid JSON");
  o.safetensors.raw_header = "[1, 2, 3]";
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors", "not a JSON object");
  o.safetensors.raw_header = "{\"__metadata__\": [1]}";
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors", "__metadata__");
  o.safetensors.raw_header = "{\"__metadata__\": {\"format\": 3}}";
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors", "__metadata__", "format");
}

TEST_F(LoaderTest, MalformedTensorEntries) {
  const std::string t = "h.0.attn.c_attn.weight";
  auto o = edit_tensor(t, [](json& e) { e = 5; });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors", t, "not a JSON object");
  o = edit_tensor(t, [](json& e) { e.erase("dtype"); });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), t, "missing field dtype");
  o = edit_tensor(t, [](json& e) { e["dtype"] = 32; });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), t, "dtype is not a string");
  o = edit_tensor(t, [](json& e) { e.erase("shape"); });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), t, "missing field shape");
  o = edit_tensor(t, [](json& e) { e["shape"] = "24x72"; });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), t, "shape is not an array");
  o = edit_tensor(t, [](json& e) { e["shape"] = {24.5, 72}; });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), t, "shape[0]", "non-negative integer");
  o = edit_tensor(t, [](json& e) { e.erase("data_offsets"); });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), t, "missing field data_offsets");
  o = edit_tensor(t, [](json& e) { e["data_offsets"] = {1, 2, 3}; });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), t, "data_offsets must be an array of two");
  o = edit_tensor(t, [](json& e) { e["data_offsets"][0] = -4; });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), t, "data_offsets[0] is -4");
}

TEST_F(LoaderTest, UnknownDtype) {
  auto o = edit_tensor("wte.weight", [](json& e) { e["dtype"] = "Q4_K"; });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors", "tensor wte.weight",
                    "unknown dtype Q4_K");
}

TEST_F(LoaderTest, UnsupportedDtypeOfAUsedTensor) {
  // I32 has F32's size, so the header is consistent; the loader refuses it.
  auto o = edit_tensor("h.1.mlp.c_fc.bias", [](json& e) { e["dtype"] = "I32"; });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors", "tensor h.1.mlp.c_fc.bias",
                    "unsupported dtype I32");
}

TEST_F(LoaderTest, ShapeMismatchAgainstConfig) {
  HfWriteOptions o;
  o.reshape["h.0.attn.c_attn.weight"] = {24, 71};
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors", "tensor h.0.attn.c_attn.weight",
                    "shape [24, 71]", "expected [24, 72]");
  // A PyTorch Linear orientation ([out, in]) is refused, not silently transposed.
  o.reshape = {{"h.1.mlp.c_fc.weight", {96, 24}}};
  EXPECT_LOAD_ERROR(load_model_dir(hf(o, "m2")), "h.1.mlp.c_fc.weight", "shape [96, 24]",
                    "expected [24, 96]");
  o.reshape = {{"wpe.weight", {17, 24}}};
  EXPECT_LOAD_ERROR(load_model_dir(hf(o, "m3")), "wpe.weight", "expected [16, 24]");
  // Config disagreeing with the file.
  auto c = edit_config([](json& j) { j["n_embd"] = 32; });
  EXPECT_LOAD_ERROR(load_model_dir(hf(c, "m4")), "model.safetensors", "wte.weight",
                    "expected [61, 32]");
}

TEST_F(LoaderTest, ShapeDisagreesWithByteSize) {
  auto o = edit_tensor("wte.weight", [](json& e) { e["shape"] = {61, 25}; });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors", "tensor wte.weight",
                    "hold 5856 bytes", "needs 6100");
  o = edit_tensor("wte.weight", [](json& e) { e["shape"] = {-61, 24}; });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "tensor wte.weight", "shape[0] is -61", "non-negative");
  o = edit_tensor("wte.weight", [](json& e) {
    e["shape"] = {uint64_t(1) << 62, uint64_t(1) << 62};
  });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "tensor wte.weight", "overflows");
  o = edit_tensor("wte.weight", [](json& e) { e["shape"] = {uint64_t(1) << 62, 2}; });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "tensor wte.weight", "overflows");
}

TEST_F(LoaderTest, DataOffsetsOutOfRange) {
  auto o = edit_tensor("h.0.attn.c_attn.weight", [](json& e) {
    const uint64_t b = e["data_offsets"][0];
    e["data_offsets"] = {b + 1'000'000, b + 1'000'000 + 24 * 72 * 4};
  });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors",
                    "tensor h.0.attn.c_attn.weight: data_offsets [", "outside data section (size");
  o = edit_tensor("wte.weight", [](json& e) { e["data_offsets"][1] = uint64_t(-1); });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "tensor wte.weight", "data_offsets");
  o = edit_tensor("wte.weight", [](json& e) { e["data_offsets"] = {8, 4}; });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "tensor wte.weight", "begin after end");
}

TEST_F(LoaderTest, OverlappingOffsets) {
  auto o = edit_tensor("wpe.weight", [](json& e) {
    // wte occupies [0, 5856); put wpe (1536 bytes) at its end.
    e["data_offsets"] = {5000, 5000 + 16 * 24 * 4};
  });
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors",
                    "tensors wte.weight and wpe.weight overlap");
  // Identical ranges overlap too (no aliasing).
  o.safetensors.edit_header = [](json& h) {
    h["h.1.ln_2.bias"]["data_offsets"] = h["h.1.ln_1.bias"]["data_offsets"];
  };
  EXPECT_LOAD_ERROR(load_model_dir(hf(o, "m2")), "overlap", "h.1.ln_1.bias", "h.1.ln_2.bias");
}

TEST_F(LoaderTest, MissingTensor) {
  HfWriteOptions o;
  o.drop = {"h.1.mlp.c_proj.bias"};
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors",
                    "missing tensor h.1.mlp.c_proj.bias");
  o.transformer_prefix = true;
  o.drop = {"ln_f.weight"};
  EXPECT_LOAD_ERROR(load_model_dir(hf(o, "p")), "missing tensor transformer.ln_f.weight");
  // A config asking for more layers than the file has.
  auto c = edit_config([](json& j) { j["n_layer"] = 3; });
  EXPECT_LOAD_ERROR(load_model_dir(hf(c, "c")), "missing tensor h.2.");
}

TEST_F(LoaderTest, UnexpectedTensor) {
  HfWriteOptions o;
  o.extra = {{"h.0.attn.rotary.weight", {4}}};
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors",
                    "unexpected tensor h.0.attn.rotary.weight");
  o.extra = {{"h.2.ln_1.weight", {24}}};
  EXPECT_LOAD_ERROR(load_model_dir(hf(o, "l")), "unexpected tensor h.2.ln_1.weight", "n_layer 2");
  o.extra = {{"h.5.attn.bias", {1}}};  // buffers only for layers that exist
  EXPECT_LOAD_ERROR(load_model_dir(hf(o, "b")), "unexpected tensor h.5.attn.bias");
  o.extra = {{"transformer.wte.weight", {61, 24}}};  // present with and without prefix
  EXPECT_LOAD_ERROR(load_model_dir(hf(o, "d")), "wte.weight", "appears twice");
}

TEST_F(LoaderTest, LmHeadMustBeTiedAndShaped) {
  HfWriteOptions o;
  o.tied_lm_head = true;
  std::vector<float> other = model_.at("wte.weight");
  other[17] += 1.0f;
  o.replace = {{"lm_head.weight", other}};
  EXPECT_LOAD_ERROR(load_model_dir(hf(o)), "model.safetensors", "lm_head.weight",
                    "untied lm_head not supported");
  o.replace.clear();
  o.reshape = {{"lm_head.weight", {60, 24}}};
  EXPECT_LOAD_ERROR(load_model_dir(hf(o, "s")), "lm_head.weight", "shape [60, 24]",
                    "expected [61, 24]");
}

// ---------------------------------------------------------------- config.json errors

TEST_F(LoaderTest, ConfigValues) {
  struct Case {
    std::function<void(json&)> edit;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j["n_head"] = 5; }, {"n_embd 24 is not divisible by field n_head 5"}},
      {[](json& j) { j["n_layer"] = 0; }, {"field n_layer is 0", "positive"}},
      {[](json& j) { j["vocab_size"] = -3; }, {"field vocab_size is -3", "positive"}},
      {[](json& j) { j["n_embd"] = -24; }, {"field n_embd is -24"}},
      {[](json& j) { j.erase("n_head"); }, {"missing field n_head"}},
      {[](json& j) { j.erase("vocab_size"); }, {"missing field vocab_size"}},
      {[](json& j) { j["n_embd"] = "24"; }, {"field n_embd", "positive integer"}},
      {[](json& j) { j["n_embd"] = 24.5; }, {"field n_embd", "positive integer"}},
      {[](json& j) { j["n_embd"] = 1 << 20; }, {"field n_embd", "larger than"}},
      {[](json& j) { j["n_embd"] = 1e300; }, {"field n_embd"}},
      {[](json& j) {
         j.erase("n_positions");
         j.erase("n_ctx");
       },
       {"missing field n_positions (or n_ctx)"}},
      {[](json& j) { j["n_positions"] = 0; }, {"field n_positions is 0"}},
      {[](json& j) { j["layer_norm_epsilon"] = -1e-5; }, {"field layer_norm_epsilon"}},
      {[](json& j) { j["layer_norm_epsilon"] = "small"; }, {"field layer_norm_epsilon"}},
      {[](json& j) { j["activation_function"] = "relu"; },
       {"field activation_function", "relu", "gelu_new"}},
      {[](json& j) { j["model_type"] = "mistral"; }, {"field model_type", "mistral"}},
      {[](json& j) { j["tie_word_embeddings"] = false; }, {"field tie_word_embeddings"}},
      {[](json& j) { j["scale_attn_by_inverse_layer_idx"] = true; },
       {"field scale_attn_by_inverse_layer_idx"}},
  };
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE("case " + std::to_string(i));
    const fs::path dir = hf(edit_config(c.edit), "c" + std::to_string(i++));
    std::vector<std::string> parts = c.parts;
    parts.push_back((dir / "config.json").string());
    expect_error([&] { load_model_dir(dir); }, parts);
  }
}

TEST_F(LoaderTest, ConfigAliasesAndDefaults) {
  auto o = edit_config([](json& j) {
    j.erase("n_positions");
    j.erase("layer_norm_epsilon");
    j.erase("activation_function");
    j["activation_function"] = "gelu_pytorch_tanh";
  });
  const ModelWeights w = load_model_dir(hf(o));
  EXPECT_EQ(w.config.n_ctx, 16);
  EXPECT_EQ(w.config.layer_norm_epsilon, 1e-5f);
  o = edit_config([](json& j) { j["layer_norm_epsilon"] = 1e-6; });
  EXPECT_EQ(load_model_dir(hf(o, "eps")).config.layer_norm_epsilon, 1e-6f);
}

TEST_F(LoaderTest, ConfigNotJson) {
  const fs::path dir = hf();
  test::write_file(dir / "config.json", std::string("{\"n_embd\": 24,\n oops}"));
  EXPECT_LOAD_ERROR(load_model_dir(dir), "config.json", "not valid JSON");
  test::write_file(dir / "config.json", std::string(""));
  EXPECT_LOAD_ERROR(load_model_dir(dir), "config.json", "not valid JSON");
  test::write_file(dir / "config.json", std::string("[24]"));
  EXPECT_LOAD_ERROR(load_model_dir(dir), "config.json", "not a JSON object");
  EXPECT_LOAD_ERROR(parse_config_json("{}", "cfg"), "cfg: missing field vocab_size");
}

// A NaN or an infinity in any tensor is refused at load, naming the file,
// the tensor (as the file spells it) and what it holds, in every dtype and
// placement; llm.c names the tensor by its Hugging Face name.
TEST_F(LoaderTest, NonFiniteWeightsAreRefusedNamingTheTensor) {
  std::vector<float> fc = model_.at("h.1.mlp.c_fc.weight");
  fc[100] = std::nanf("");
  fc[101] = std::nanf("");
  HfWriteOptions o;
  o.replace["h.1.mlp.c_fc.weight"] = fc;
  const fs::path nan_dir = hf(o, "nan");
  const std::string st = (nan_dir / "model.safetensors").string();
  for (WeightPlacement placement : {WeightPlacement::kCopy, WeightPlacement::kInPlace})
    EXPECT_LOAD_ERROR(load_model_dir(nan_dir, -1, placement), st + ": tensor h.1.mlp.c_fc.weight",
                      "2 NaN values", "element 100 of 2304");
  EXPECT_LOAD_ERROR(load_model(nan_dir), "h.1.mlp.c_fc.weight");

  // An infinity in F16, with the "transformer." prefix the file uses.
  std::vector<float> ln = model_.at("ln_f.bias");
  ln[3] = -INFINITY;
  HfWriteOptions f16;
  f16.dtype = DType::F16;
  f16.transformer_prefix = true;
  f16.replace["ln_f.bias"] = ln;
  EXPECT_LOAD_ERROR(load_model_dir(hf(f16, "inf16")), "tensor transformer.ln_f.bias",
                    "1 infinite value", "element 3 of 24");
  // A finite value F16 cannot hold becomes an infinity: refused too.
  ln[3] = 1e6f;
  f16.replace["ln_f.bias"] = ln;
  EXPECT_LOAD_ERROR(load_model_dir(hf(f16, "big16")), "tensor transformer.ln_f.bias", "infinite");

  // llm.c, fp32 and bf16: the first tensor with one, in the HF names.
  std::vector<float> wpe = model_.at("wpe.weight");
  wpe[5] = INFINITY;
  RandomGpt2 broken = model_;
  broken.tensors["wpe.weight"] = wpe;
  broken.tensors["h.0.attn.c_attn.bias"][0] = std::nanf("");
  for (int version : {3, 5}) {
    LlmcWriteOptions lo;
    lo.version = version;
    const fs::path bin = tmp_ / ("broken" + std::to_string(version) + ".bin");
    test::write_llmc_bin(broken, bin, lo);
    EXPECT_LOAD_ERROR(load_llmc_checkpoint(bin), bin.string() + ": tensor wpe.weight",
                      "1 infinite value");
    EXPECT_LOAD_ERROR(load_model(bin), "tensor wpe.weight");
  }
  // The padding rows of an llm.c wte are never used: anything there is fine.
  LlmcWriteOptions pad;
  pad.pad_value = std::nanf("");
  expect_weights(load_llmc_checkpoint(llmc(pad)), model_, DType::F32);
}

// ---------------------------------------------------------------- llm.c

TEST_F(LoaderTest, LlmcV3TransposesAndDropsPadding) {
  const fs::path bin = llmc();
  EXPECT_EQ(fs::file_size(bin),
            1024u + 4u * (128u * 24u + uint64_t(model_.config.parameter_count()) - 61u * 24u));
  const ModelWeights w = load_llmc_checkpoint(bin);
  expect_weights(w, model_, DType::F32);
  EXPECT_EQ(w.storage_dtype, "F32");
  // Spot check the orientation: qkv weight [C, 3C], element (in=2, out=70).
  EXPECT_EQ(w.layers[1].attn_qkv_weight[2 * 72 + 70],
            model_.at("h.1.attn.c_attn.weight")[2 * 72 + 70]);
}

TEST_F(LoaderTest, LlmcV5Bf16) {
  LlmcWriteOptions o;
  o.version = 5;
  const ModelWeights w = load_llmc_checkpoint(llmc(o));
  expect_weights(w, model_, DType::BF16);
}

TEST_F(LoaderTest, LlmcUnpaddedVocab) {
  LlmcWriteOptions o;
  o.padded_vocab = 61;
  expect_weights(load_llmc_checkpoint(llmc(o)), model_, DType::F32);
}

TEST_F(LoaderTest, LlmcHeaderErrors) {
  struct Case {
    std::function<void(std::array<int32_t, 256>&)> edit;
    std::vector<std::string> parts;
  };
  const std::vector<Case> cases = {
      {[](auto& h) { h[0] = 20240325; }, {"bad magic 20240325", "header[0]"}},
      {[](auto& h) { h[1] = 4; }, {"header[1] version 4", "not supported"}},
      {[](auto& h) { h[1] = 1; }, {"header[1] version 1"}},
      {[](auto& h) { h[2] = 0; }, {"header[2] max_seq_len 0", "positive"}},
      {[](auto& h) { h[3] = -5; }, {"header[3] vocab_size -5"}},
      {[](auto& h) { h[4] = 0; }, {"header[4] num_layers 0"}},
      {[](auto& h) { h[5] = 5; },
       {"header[6] channels 24 is not divisible by header[5] num_heads 5"}},
      {[](auto& h) { h[6] = 1 << 30; }, {"header[6] channels", "larger than"}},
      {[](auto& h) { h[7] = 60; }, {"header[7] padded_vocab_size 60", "smaller than"}},
      {[](auto& h) { h[4] = 3; }, {"implies", "truncated"}},
      {[](auto& h) { h[4] = 1; }, {"implies", "trailing data"}},
      {[](auto& h) { h[7] = 0x7FFFFFFF; }, {"header[7]"}},
  };
  int i = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE("case " + std::to_string(i));
    LlmcWriteOptions o;
    o.edit_header = c.edit;
    const fs::path bin = llmc(o, "bad" + std::to_string(i++) + ".bin");
    std::vector<std::string> parts = c.parts;
    parts.push_back(bin.string());
    expect_error([&] { load_llmc_checkpoint(bin); }, parts);
    expect_error([&] { load_model(bin); }, parts);
  }
}

TEST_F(LoaderTest, LlmcFileLengthMustBeExact) {
  LlmcWriteOptions o;
  o.truncate_bytes = 4;
  EXPECT_LOAD_ERROR(load_llmc_checkpoint(llmc(o)), "gpt2_tiny.bin", "truncated");
  o.truncate_bytes = 0;
  o.extra_bytes = 1;
  EXPECT_LOAD_ERROR(load_llmc_checkpoint(llmc(o, "x.bin")), "x.bin", "trailing data");
  o.extra_bytes = 0;
  o.version = 5;
  o.truncate_bytes = 2;
  EXPECT_LOAD_ERROR(load_llmc_checkpoint(llmc(o, "y.bin")), "y.bin", "truncated");
  const fs::path shortf = tmp_ / "short.bin";
  std::vector<uint8_t> bytes = test::read_file(llmc());
  bytes.resize(1000);
  test::write_file(shortf, bytes);
  EXPECT_LOAD_ERROR(load_llmc_checkpoint(shortf), "short.bin", "too short", "1024-byte");
  EXPECT_LOAD_ERROR(load_llmc_checkpoint(tmp_ / "absent.bin"), "absent.bin", "cannot open");
  EXPECT_LOAD_ERROR(load_llmc_checkpoint(tmp_.path()), "is a directory");
}

// ---------------------------------------------------------------- robustness

// Any prefix of a good file must be refused cleanly (never loaded, never a crash).
TEST_F(LoaderTest, EveryTruncationIsRefused) {
  const fs::path dir = hf();
  const std::vector<uint8_t> good = test::read_file(dir / "model.safetensors");
  SafetensorsFile st(dir / "model.safetensors");
  const size_t header_end = size_t(st.header().data_offset);
  // In memory: every prefix through the header and a little beyond, then a
  // sample of the data section (each cut leaves some tensor out of range).
  std::vector<size_t> lengths;
  for (size_t n = 0; n < header_end + 64; ++n) lengths.push_back(n);
  for (size_t n = header_end + 64; n < good.size(); n += 61) lengths.push_back(n);
  lengths.push_back(good.size() - 1);
  for (size_t n : lengths) {
    const std::vector<uint8_t> prefix(good.begin(), good.begin() + n);  // exact size for ASan
    const std::string msg = error_of([&] { parse_safetensors(prefix.data(), n, "m.safetensors"); });
    ASSERT_EQ(msg.rfind("m.safetensors: ", 0), 0u) << "length " << n << ": " << msg;
  }
  // Through the file loader: a sample of prefixes.
  for (size_t n : {size_t(0), size_t(8), size_t(9), header_end - 1, header_end, header_end + 1,
                   good.size() / 2, good.size() - 1}) {
    test::write_file(dir / "model.safetensors",
                     std::vector<uint8_t>(good.begin(), good.begin() + n));
    const std::string msg = error_of([&] { load_model_dir(dir); });
    ASSERT_NE(msg.find("model.safetensors"), std::string::npos) << "length " << n << ": " << msg;
  }
}

// Random byte corruption of the header: loads or a clean ts::Error, nothing else.
TEST_F(LoaderTest, RandomHeaderCorruptionNeverCrashes) {
  const fs::path dir = hf();
  const std::vector<uint8_t> good = test::read_file(dir / "model.safetensors");
  SafetensorsFile st(dir / "model.safetensors");
  const size_t header_end = size_t(st.header().data_offset);
  std::mt19937 rng(99);
  int refused = 0;
  for (int iter = 0; iter < 400; ++iter) {
    std::vector<uint8_t> bytes = good;
    const int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      const size_t at = rng() % header_end;
      bytes[at] = (rng() % 2) ? uint8_t(rng()) : uint8_t(bytes[at] ^ (1u << (rng() % 8)));
    }
    test::write_file(dir / "model.safetensors", bytes);
    try {
      const ModelWeights w = load_model_dir(dir);
      ASSERT_NE(w.wte, nullptr);
    } catch (const Error& e) {
      ++refused;
      ASSERT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
  EXPECT_GT(refused, 200);
}

TEST_F(LoaderTest, RandomLlmcHeaderCorruptionNeverCrashes) {
  const fs::path bin = llmc();
  const std::vector<uint8_t> good = test::read_file(bin);
  std::mt19937 rng(5);
  for (int iter = 0; iter < 300; ++iter) {
    std::vector<uint8_t> bytes = good;
    const size_t at = rng() % 32;
    bytes[at] = uint8_t(rng());
    test::write_file(bin, bytes);
    try {
      load_model(bin);
    } catch (const Error& e) {
      ASSERT_NE(std::string(e.what()).find("gpt2_tiny.bin"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ts
