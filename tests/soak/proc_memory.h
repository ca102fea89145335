#pragma once
// This process's resident memory, from /proc/self/status (Linux).
#include <fstream>
#include <string>

namespace ts::soak {

struct ResidentMemory {
  long long rss_kb = 0;   // VmRSS: everything resident
  long long anon_kb = 0;  // RssAnon: heap, stacks, anonymous maps (weights, KV pool)
  long long file_kb = 0;  // RssFile: file-backed pages (code; weights read in place)
  long long hwm_kb = 0;   // VmHWM: peak VmRSS so far
};

inline ResidentMemory resident_memory() {
  ResidentMemory m;
  std::ifstream in("/proc/self/status");
  for (std::string line; std::getline(in, line);) {
    const auto value = [&] { return std::stoll(line.substr(line.find(':') + 1)); };
    if (line.rfind("VmRSS:", 0) == 0) m.rss_kb = value();
    if (line.rfind("RssAnon:", 0) == 0) m.anon_kb = value();
    if (line.rfind("RssFile:", 0) == 0) m.file_kb = value();
    if (line.rfind("VmHWM:", 0) == 0) m.hwm_kb = value();
  }
  return m;
}

}  // namespace ts::soak
