#pragma once
// The number format of the matmul weights (attention qkv and proj, MLP fc and
// proj, and wte, which is also the tied lm_head), chosen when a model is
// loaded (--weights). The KV cache's values take the same formats (--kv,
// KvCacheShape::format). Biases, layer norms and wpe stay fp32 whatever it is.
// A 16-bit format halves the bytes a decode step reads; the CPU kernels read
// it directly and accumulate in fp32 (engine/cpu/matmul.h).
#include <cstdint>
#include <string>

namespace ts {

enum class WeightFormat { kF32, kBF16, kF16 };

// "f32", "bf16", "f16".
const char* weight_format_name(WeightFormat format);

// The name above back to its format; throws ts::Error in one line for any
// other text: "--weights: expected f32, bf16 or f16, got 'x'".
WeightFormat parse_weight_format(const std::string& text);

// The KV cache's format (--kv) takes the same three names; any other text is
// refused in one line: "--kv: expected f32, f16 or bf16, got 'x'".
WeightFormat parse_kv_format(const std::string& text);

inline int bytes_per_weight(WeightFormat format) { return format == WeightFormat::kF32 ? 4 : 2; }

// A value as `format` holds it: rounded to nearest even (and decoded back).
float round_to_format(float value, WeightFormat format);

}  // namespace ts
