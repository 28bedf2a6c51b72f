// How a q8 matrix is quantized: which columns stay exact, and per group of
// QN_GROUP columns the int32 scale and the int8 codes. weight_format.cpp
// writes the result in the kernels' byte layout; this file only chooses.
//
// The scale of a group is the one that minimises the group's squared rounding
// error among absmax (max|w| / 127) and a few slightly larger candidates, so
// no group gets worse. For the generated models' uniform weights this cuts
// the rms weight error from 0.385% to 0.364% of the weights' rms; see
// docs/numerics.md and tools/quant_study for what else was measured (error
// compensation, smaller groups, exact columns by activation) and why no int8
// quantizer reaches the 98% agreement bar on those models.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "numerics.h"

namespace qwen3::engine {

// The few columns of a matrix whose magnitude dwarfs the rest (planted or real
// outlier channels) are stored exactly so they do not flatten the int8 scale
// of their group: up to QN_OUT_COLS columns whose max |w| exceeds 16x the
// median column max, largest first.
std::vector<uint32_t> pick_outlier_columns(std::span<const float> col_max);

struct Q8Group {
  int32_t scale = 0;          // weight = code * scale / 2^frac
  int8_t codes[QN_GROUP] = {};
};

// Quantizes w[0, n) (n <= QN_GROUP) of one group; entries with exact[k] set
// (stored elsewhere) get code 0 and do not influence the scale. `p2` is
// 2^frac of the matrix; the caller has checked that max|w| / 127 * p2 fits
// int32 (candidate scales above it are capped at INT32_MAX).
void q8_quantize_group(const float* w, const bool* exact, size_t n, double p2, Q8Group& out);

}  // namespace qwen3::engine
