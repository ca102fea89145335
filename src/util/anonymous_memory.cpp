#include "util/anonymous_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "util/error.h"

namespace ts {
namespace {
constexpr size_t kHugePage = size_t(2) << 20;
}

AnonymousMemory::AnonymousMemory(size_t floats, std::string_view what, Pages pages)
    : floats_(floats) {
  const size_t bytes = std::max<size_t>(floats, 1) * sizeof(float);
  // Huge pages need 2 MB-aligned addresses: map one huge page more than the
  // rounded size and start at the first boundary inside.
  const size_t rounded = pages == Pages::kHuge ? (bytes + kHugePage - 1) & ~(kHugePage - 1) : bytes;
  map_bytes_ = pages == Pages::kHuge ? rounded + kHugePage : bytes;
  void* p = ::mmap(nullptr, map_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw Error(std::string(what) + ": cannot allocate " + std::to_string(bytes) + " bytes (" +
                std::strerror(errno) + ")");
  map_ = p;
  data_ = static_cast<float*>(p);
  if (pages == Pages::kHuge) {
    const auto at = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~uintptr_t(kHugePage - 1);
    data_ = reinterpret_cast<float*>(at);
#ifdef MADV_HUGEPAGE
    // Advice only: refused (no THP in this kernel) the pages are 4 KB.
    ::madvise(data_, rounded, MADV_HUGEPAGE);
#endif
  }
}

AnonymousMemory::AnonymousMemory(AnonymousMemory&& o) noexcept
    : map_(std::exchange(o.map_, nullptr)),
      map_bytes_(std::exchange(o.map_bytes_, 0)),
      data_(std::exchange(o.data_, nullptr)),
      floats_(std::exchange(o.floats_, 0)) {}

AnonymousMemory::~AnonymousMemory() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
}

}  // namespace ts
