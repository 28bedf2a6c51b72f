// y[t][r] = sum_i x[t][i] * w[r][i]: the matrix products of the reference,
// for weights kept as BF16 (straight from the mmapped checkpoint) or float.
// The summation order is fixed (8 partial sums, then the tail), so every
// build and every CPU gives the same bits.
#pragma once

#include <cstdint>

namespace qwen3::reference {

// Rows [row_begin, row_end) of w (each `cols` long), all `tokens` rows of x;
// y has `ldy` floats per token.
void matmul_bf16(const float* x, int64_t tokens, int64_t cols, const uint16_t* w, int64_t row_begin,
                 int64_t row_end, float* y, int64_t ldy);
void matmul_f32(const float* x, int64_t tokens, int64_t cols, const float* w, int64_t row_begin, int64_t row_end,
                float* y, int64_t ldy);

}  // namespace qwen3::reference
