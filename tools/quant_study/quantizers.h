// The weight quantizers of qwen3-bpf-quant-study: every one rewrites a matrix
// in place (quantize -> dequantize, in float), keeping its exact columns.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/worker_pool.h"

namespace qwen3::quant_study {

// How the non-exact weights of a row are rounded, one scale per group.
struct RowFormat {
  int bits = 8;      // 8: codes -127..127, scale absmax/127
                     // 4: codes c - 8 (c in 0..15), scale = the group's largest-|w| value / -8 (Q4_0)
  int group = 64;
  bool mse = false;  // scale searched per group for the least squared error
};

// What is done to one matrix (its rows stacked as the engine converts them).
struct MatrixJob {
  RowFormat fmt;
  bool gptq = false;      // error-compensating rounding with the input Hessian
  bool awq = false;       // activation-aware column scales, alpha searched per matrix
  double noise_pct = 0;   // > 0: gaussian noise instead of rounding
  uint64_t seed = 0;      // of the noise
  std::vector<char> exact;  // per column: kept exact
  const std::vector<double>* xtx = nullptr;   // sum over calibration tokens of x x^T (cols x cols), or null
  const std::vector<double>* absx = nullptr;  // mean |x_k| over calibration tokens, or null
};

struct MatrixResult {
  double err2 = 0, w2 = 0;    // squared weight error, squared weights (non-exact entries)
  double oerr2 = 0, ow2 = 0;  // the same for the outputs on the calibration inputs (d^T H d)
  double awq_alpha = -1;      // the alpha awq chose (-1: none)
  std::vector<double> act_div;  // awq: the inputs are divided by these (the scales folded into the
                                // previous operation); empty: none
};

// Quantize-dequantize of w with scale s at the given bit width.
double quant_code(double w, double s, int bits);
// A group's scale (exact entries ignored): absmax, or the squared-error optimum near it.
double group_scale(const double* w, const char* exact, int n, const RowFormat& f);
// Upper Cholesky factor U of the damped H^-1 (H^-1 = U^T U), as GPTQ uses it.
std::vector<double> gptq_factor(std::vector<double> h, int n);
// Rounds one row in place; u: GPTQ factor (cols x cols) or null for plain rounding.
void quantize_row(const RowFormat& f, double* row, const char* exact, int64_t cols, const double* u);

// Rewrites w (rows x cols) as the job says.
MatrixResult quantize_matrix(const MatrixJob& job, float* w, int64_t rows, int64_t cols, WorkerPool& pool);

// Exactly what the engine's q8 conversion stores (convert_row), read back as float; `exact`
// receives the outlier columns it kept.
MatrixResult engine_q8_matrix(const std::string& what, float* w, int64_t rows, int64_t cols,
                              std::vector<uint32_t>& exact, WorkerPool& pool);

// Bytes one row of cols columns takes: q8 in the engine's layout (a 32-bit scale per 64 columns,
// QN_OUT_COLS int64 exact columns); other widths with the same scale and exact-column tail.
double row_bytes(const RowFormat& f, int64_t cols);

}  // namespace qwen3::quant_study
