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

WeightFormat parse_weight_format(const std::string& text) {
  for (WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16, WeightFormat::kF16})
    if (text == weight_format_name(f)) return f;
  throw Error("--weights: expected f32, bf16 or f16, got '" + text + "'");
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
