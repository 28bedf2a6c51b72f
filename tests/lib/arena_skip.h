// Cases on the weight_path = arena path need a kernel that creates BPF arena
// maps. Where it refuses (engine/arena_probe.h), they are reported as skipped
// with the kernel's answer, not passed.
#pragma once

#include <gtest/gtest.h>

#include "engine/arena_probe.h"

#define QWEN3_SKIP_WITHOUT_ARENA()                                                                        \
  do {                                                                                                    \
    if (!qwen3::engine::arena_refusal().empty())                                                          \
      GTEST_SKIP() << "this kernel refuses BPF arena maps: " << qwen3::engine::arena_refusal();          \
  } while (0)
