// Conversion of float weights (exact BF16 values) into the integer row
// layouts the BPF kernels read (bpf_ops/ops_weights.h):
//   q24: per group of 64 columns, 64 int32 = round(w * 2^24)
//   q8 : per group, int32 scale = round(max|w| / 127 * 2^30), then 64 int8
//        q = round(w * 2^30 / scale), clamped to [-127, 127]
// Padding columns are zero. The per-row L1 norm of the integer weights decides
// how many bits the matmul input may have without int64 overflow (act_bits).
#pragma once

#include <cstdint>
#include <span>

namespace qwen3::engine {

// |w| must stay below 128 (Q24 int32 range); throws qwen3::Error naming `what` otherwise.
int32_t to_q24(float w, const char* what);

// Converts one row (cols floats) into `out` (row_bytes_for(cols, q8) bytes).
// Returns the row's L1 norm in weight-fraction units (sum |w_q|, Q24 or Q30).
uint64_t convert_row(std::span<const float> w, bool q8, uint8_t* out, const char* what);

// act_bits such that max_l1 * 2^act_bits < 2^62.
uint32_t act_bits_for(uint64_t max_l1);

// Reads back column c of a converted row as float (tests, embedding checks).
double dequant(const uint8_t* row, uint32_t c, bool q8);

}  // namespace qwen3::engine
