// safetensors: the 8-byte length, the JSON header (tensor table, dtypes,
// shapes, data_offsets, __metadata__) and the data section it points into.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "fuzz_check.h"
#include "model/safetensors.h"
#include "util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ts;
  try {
    const SafetensorsHeader h = parse_safetensors(data, size, "fuzz.safetensors");
    FUZZ_CHECK(h.data_offset == 8 + h.header_length);
    FUZZ_CHECK(h.data_offset + h.data_size == size);
    for (size_t i = 0; i < h.tensors.size(); ++i) {
      const TensorInfo& t = h.tensors[i];
      if (i > 0) FUZZ_CHECK(h.tensors[i - 1].name < t.name);  // sorted, unique
      FUZZ_CHECK(t.begin <= t.end && t.end <= h.data_size);
      FUZZ_CHECK(t.data == data + h.data_offset + t.begin);
      FUZZ_CHECK(t.nbytes() == t.numel() * t.element_size);
      FUZZ_CHECK(!t.shape_string().empty());
      // Reading every value must stay inside the bytes the parser vouched for.
      if (t.dtype != DType::Unsupported && t.numel() <= (uint64_t{1} << 20)) {
        std::vector<float> out(static_cast<size_t>(t.numel()) + 1);
        SafetensorsFile::to_f32(t, out.data());
        if (const float* in_place = SafetensorsFile::f32_in_place(t)) {
          FUZZ_CHECK(reinterpret_cast<const uint8_t*>(in_place) == t.data);
        }
      }
    }
    // No two non-empty tensors share a byte.
    std::vector<const TensorInfo*> order;
    for (const TensorInfo& t : h.tensors)
      if (t.nbytes() > 0) order.push_back(&t);
    std::sort(order.begin(), order.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
    for (size_t i = 1; i < order.size(); ++i) FUZZ_CHECK(order[i - 1]->end <= order[i]->begin);
  } catch (const Error&) {
  }
  return 0;
}
