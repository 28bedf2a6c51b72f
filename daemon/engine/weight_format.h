// Conversion of float weights (exact BF16 values) into the integer row
// row format of bpf_ops/layout.h that the BPF kernels read, with F fraction bits
// per matrix (q24: F = 24, q8: F = 30; one bit less per doubling of max|w|
// beyond what int32 holds, e.g. embeddings with planted outliers):
//   q24: per group of 64 columns, 64 int32 = round(w * 2^F)
//   q8 : per group, int32 scale, then 64 int8 codes q (weight = q * scale / 2^F),
//        both chosen by q8_quantizer.h (scale near max|w| / 127 * 2^F)
//   q4 : per half group of 32, int32 scale, then 32 codes c (weight = (c - 8) *
//        scale / 2^F), chosen by q4_quantizer.h; F as q8
// Padding columns are zero. The per-row L1 norm of the integer weights decides
// how many bits the matmul input may have without int64 overflow (act_bits).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/model_plan.h"
#include "engine/precision.h"
#include "engine/q8_quantizer.h"  // pick_outlier_columns

namespace qwen3::engine {

// round(w * 2^frac) as int32; throws qwen3::Error naming `what` when it does not fit.
int32_t to_fixed(float w, int frac, const char* what);

// Fraction bits for a matrix whose largest |w| is max_abs; throws when even
// 16 bits (the activation format) would not hold it.
int weight_frac_for(double max_abs, Precision p, const char* what);

// Converts one row (cols floats) into `out` (row_bytes_for(cols, p) bytes);
// `ocols` (q8, q4) are the matrix's outlier columns.
// Returns the row's L1 norm in weight units (sum |w| * 2^frac, as stored).
uint64_t convert_row(std::span<const float> w, Precision p, int frac, uint8_t* out, const char* what,
                     std::span<const uint32_t> ocols = {});

// Stores a row image (row_bytes_for(cols) bytes, as convert_row makes it) as
// row r of matrix mp in the weights region, in the stored layout of layout.h
// (q8: interleaved into its block of 8 rows; q4: 16 rows, a nibble each).
// Storing the matrix's last row also writes the padding rows of its block
// (weight 0). Workers may store different rows of one block at once (q4
// replaces its nibbles atomically).
void store_row(uint8_t* weights, const MatrixPlan& mp, uint32_t r, const uint8_t* image);
// Reads row r of mp back as a row image.
void load_row(const uint8_t* weights, const MatrixPlan& mp, uint32_t r, uint8_t* image);
// convert_row, then store_row: converts row r of mp straight into the weights region.
uint64_t convert_row_into(uint8_t* weights, const MatrixPlan& mp, uint32_t r, std::span<const float> w, int frac,
                          const char* what, std::span<const uint32_t> ocols = {});

// act_bits such that max_l1 * 2^act_bits < 2^62; at most QN_Q8_ACT_BITS for
// q8 (the packed kernel's lanes, kernel_q8.h) and q4 (the 8-bit input scale).
uint32_t act_bits_for(uint64_t max_l1, Precision p);

// Reads back column c of a converted row as float (tests, embedding checks).
double dequant(const uint8_t* row, uint32_t c, Precision p, int frac, uint32_t cols = 0,
               std::span<const uint32_t> ocols = {});

}  // namespace qwen3::engine
