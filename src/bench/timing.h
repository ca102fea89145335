#pragma once
// The bench's timing helpers: medians, random prompts, page-fault counts,
// and the timed decode steps the decode and lanes sections are made of.
#include <cstdint>
#include <vector>

#include "engine/cpu/machine_probe.h"
#include "engine/engine.h"
#include "util/median.h"

namespace ts::bench {

// n token ids below vocab, drawn from a generator seeded with `seed`.
std::vector<int> random_tokens(int n, int vocab, uint32_t seed);

// Forward options recording attention and residuals when `trace` is set.
ts::ForwardOptions trace_options(bool trace);

struct DecodeTiming {
  double median = 0;  // seconds
  double best = 0;    // fastest step: the least disturbed by other work on a shared machine
  ts::StepCost cost;
  // With a probe: its best pass, one pass run before every step, and the
  // passes' median (bytes/s).
  double bandwidth_best = 0;
  double bandwidth_median = 0;
  // The untimed first pass: its median step and the page faults its steps took.
  double first_pass_median = 0;
  long first_pass_page_faults = 0;
  long page_faults = 0;  // the timed pass's
};

// Minor page faults this process has taken so far.
long minor_page_faults();

// Seconds of one decode step for `lanes` sequences forked from a shared
// context, and the step's analytic cost. The steps run twice, each time on
// new sequences: the first pass may write KV pool pages this process has not
// touched yet, and the first write to each such 4 KB page is a page fault
// (enough of them to slow that pass: docs/performance.md); the
// second pass gets the same blocks back (the cache hands out the lowest free
// blocks first), as does every later generation to the same length. The
// figures are the second pass's; the first pass's median and the page faults
// of both are reported beside them.
// `context` cached tokens, then up to `decode_steps` steps (fewer where the
// model's context ends first).
DecodeTiming decode_step_time(ts::Engine& engine, int context, int decode_steps, int lanes,
                              bool trace, ts::cpu::ReadBandwidthProbe* probe = nullptr);

}  // namespace ts::bench
