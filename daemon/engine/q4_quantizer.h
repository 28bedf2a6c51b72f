// How a q4 matrix's rows are quantized: per group of QN_Q4_GROUP columns an
// int32 scale and 16-level codes c (w = (c - 8) * scale / 2^frac).
// weight_format.cpp writes the result in the kernels' byte layout; this file
// only chooses. Outlier columns (pick_outlier_columns) are stored exactly,
// outside the codes, as in q8.
//
// A group already on a 4-bit grid (a checkpoint rounded offline, e.g. by the
// GPTQ of tools/quant_study) keeps exactly its codes and step. Otherwise the
// scale is searched per group for the least squared rounding error: the
// Q4_0 scale (the largest |w| onto code -8) shrunk by 0.6 .. 1.1, and the
// other sign (the largest |w| onto +7). At 4 bits clipping a few large
// weights pays; docs/numerics.md has the measured agreement, and
// tools/quant_study the float simulation (whose GPTQ rounding needs
// calibration data the daemon does not have at load).
#pragma once

#include <cstddef>
#include <cstdint>

#include "layout.h"

namespace qwen3::engine {

struct Q4Group {
  int32_t scale = 0;                // may be negative (the extreme onto code -8)
  uint8_t codes[QN_Q4_GROUP] = {};  // 0 .. 15; exact and padding entries 8 (weight 0)
};

// Quantizes w[0, n) (n <= QN_Q4_GROUP); entries with exact[k] set get code 8
// and do not influence the scale. `p2` is 2^frac of the matrix; the caller
// has checked that max|w| * p2 fits int32 (weight_frac_for): no scale is
// larger than the group's largest |w| (a kept grid step may be max|w| / 1).
void q4_quantize_group(const float* w, const bool* exact, size_t n, double p2, Q4Group& out);

// Whether w[0, n) already lies on a 4-bit grid (a checkpoint rounded offline):
// what q4_quantize_group keeps exactly. No exact entries are assumed.
bool q4_on_grid(const float* w, size_t n);

}  // namespace qwen3::engine
