#pragma once
// This process's resident memory, from /proc/self/status (Linux).
#include "util/proc_fields.h"

namespace ts::soak {

struct ResidentMemory {
  long long rss_kb = 0;   // VmRSS: everything resident
  long long anon_kb = 0;  // RssAnon: heap, stacks, anonymous maps (weights, KV pool)
  long long file_kb = 0;  // RssFile: file-backed pages (code; weights read in place)
  long long hwm_kb = 0;   // VmHWM: peak VmRSS so far
};

inline ResidentMemory resident_memory() {
  const ProcFields f = ProcFields::read("/proc/self/status");
  ResidentMemory m;
  m.rss_kb = f.bytes("VmRSS", 0) / 1024;
  m.anon_kb = f.bytes("RssAnon", 0) / 1024;
  m.file_kb = f.bytes("RssFile", 0) / 1024;
  m.hwm_kb = f.bytes("VmHWM", 0) / 1024;
  return m;
}

}  // namespace ts::soak
