#pragma once
// Shared by the fuzz targets. A target feeds its bytes to the project's own
// parser: a refusal (ts::Error) is the expected answer to bad input; any
// other exception escapes the target and is reported as a crash, as are
// sanitizer reports and failed FUZZ_CHECKs (a property that must hold for
// every accepted input).
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                                 \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)
