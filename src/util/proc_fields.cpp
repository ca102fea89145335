#include "util/proc_fields.h"

#include <charconv>
#include <fstream>
#include <limits>

namespace ts {

ProcFields ProcFields::parse(std::istream& in) {
  ProcFields f;
  for (std::string line; std::getline(in, line);) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos || colon == 0) continue;
    const std::string_view rest = std::string_view(line).substr(colon + 1);
    const size_t begin = rest.find_first_not_of(" \t");
    if (begin == std::string_view::npos) continue;
    int64_t kib = 0;
    const char* first = rest.data() + begin;
    const char* last = rest.data() + rest.size();
    const auto [end, ec] = std::from_chars(first, last, kib);
    if (ec != std::errc() || kib < 0 || kib > std::numeric_limits<int64_t>::max() / 1024) continue;
    if (std::string_view(end, static_cast<size_t>(last - end)) != " kB") continue;
    f.bytes_[line.substr(0, colon)] = kib * 1024;
  }
  return f;
}

ProcFields ProcFields::read(const std::string& path) {
  std::ifstream in(path);
  return parse(in);
}

int64_t ProcFields::bytes(std::string_view key, int64_t missing) const {
  const auto it = bytes_.find(key);
  return it == bytes_.end() ? missing : it->second;
}

}  // namespace ts
