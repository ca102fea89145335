#pragma once
// Skips a GPU test, naming the reason, when no CUDA device answers.
#include <gtest/gtest.h>

#include <string>

#include "engine/cuda/cuda_backend.h"

#define TS_REQUIRE_CUDA()                                                                \
  do {                                                                                   \
    std::string why_;                                                                    \
    if (!::ts::cuda_device_available(&why_)) GTEST_SKIP() << "no CUDA device: " << why_; \
  } while (0)
