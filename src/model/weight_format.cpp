#include "model/weight_format.h"

#include "model/half_float.h"
#include "util/error.h"

namespace ts {

const char* weight_format_name(WeightFormat format) {
  switch (format) {
    case WeightFormat::kBF16:
      return "bf16";
    case WeightFormat::kF16:
      return "f16";
    case WeightFormat::kF32:
      break;
  }
  return "f32";
}

namespace {

// `text` as one of the names, in the order `expected` lists them.
WeightFormat parse_format(const std::string& flag, const std::string& text,
                          const std::string& expected) {
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kF16})
    if (text == weight_format_name(f)) return f;
  throw Error(flag + ": expected " + expected + ", got '" + text + "'");
}

}  // namespace

WeightFormat parse_weight_format(const std::string& text) {
  return parse_format("--weights", text, "f32, bf16 or f16");
}

WeightFormat parse_kv_format(const std::string& text) {
  return parse_format("--kv", text, "f32, f16 or bf16");
}

float round_to_format(float value, WeightFormat format) {
  switch (format) {
    case WeightFormat::kBF16:
      return bf16_to_fp32(fp32_to_bf16(value));
    case WeightFormat::kF16:
      return fp16_to_fp32(fp32_to_fp16(value));
    case WeightFormat::kF32:
      break;
  }
  return value;
}

}  // namespace ts
