#include "quantizers.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>

#include "common/error.h"
#include "engine/model_plan.h"
#include "engine/weight_format.h"
#include "op_args.h"

namespace qwen3::quant_study {

double quant_code(double w, double s, int bits) {
  if (s == 0) return 0;
  const double lo = bits == 4 ? -8.0 : -127.0, hi = bits == 4 ? 7.0 : 127.0;
  return std::clamp(std::nearbyint(w / s), lo, hi) * s;
}

namespace {

double group_err(const double* w, const char* exact, int n, double s, int bits) {
  double err = 0;
  for (int k = 0; k < n; k++)
    if (!exact[k]) {
      const double d = w[k] - quant_code(w[k], s, bits);
      err += d * d;
    }
  return err;
}

}  // namespace

double group_scale(const double* w, const char* exact, int n, const RowFormat& f) {
  double top = 0;  // the non-exact entry of largest magnitude, with its sign
  for (int k = 0; k < n; k++)
    if (!exact[k] && std::fabs(w[k]) > std::fabs(top)) top = w[k];
  if (top == 0) return 0;
  if (f.bits == 8) {
    const double s0 = std::fabs(top) / 127.0;
    if (!f.mse) return s0;
    double best = s0, best_err = 1e300;
    for (int t = -40; t <= 40; t++) {
      const double s = s0 * (1.0 + 0.0005 * t);
      const double err = group_err(w, exact, n, s, 8);
      if (err < best_err) best_err = err, best = s;
    }
    return best;
  }
  // 4 bits: the Q4_0 scale maps the extreme onto code -8, so all 16 codes are used.
  const double s0 = top / -8.0;
  if (!f.mse) return s0;
  // Clipping pays at 4 bits: search shrunken scales, and the other sign (extreme onto +7).
  double best = s0, best_err = group_err(w, exact, n, s0, 4);
  for (int t = 0; t <= 40; t++) {
    const double shrink = 0.6 + 0.0125 * t;  // 0.6 .. 1.1
    for (double s : {s0 * shrink, -s0 * 8.0 / 7.0 * shrink}) {
      const double err = group_err(w, exact, n, s, 4);
      if (err < best_err) best_err = err, best = s;
    }
  }
  return best;
}

// Upper Cholesky factor U of H^-1 (H^-1 = U^T U), as GPTQ uses it; H damped by
// 1% of its mean diagonal, dead inputs get a unit diagonal.
std::vector<double> gptq_factor(std::vector<double> h, int n) {
  double mean = 0;
  for (int i = 0; i < n; i++) mean += h[size_t(i) * n + i];
  mean /= n;
  for (int i = 0; i < n; i++) {
    double& d = h[size_t(i) * n + i];
    if (d <= 0) d = 1;
    d += 0.01 * mean;
  }
  // Cholesky H = L L^T (lower, in place)
  auto chol = [n](std::vector<double>& a) {
    for (int j = 0; j < n; j++) {
      double s = a[size_t(j) * n + j];
      for (int k = 0; k < j; k++) s -= a[size_t(j) * n + k] * a[size_t(j) * n + k];
      if (!(s > 0)) throw Error("gptq: Hessian not positive definite");
      const double d = std::sqrt(s);
      a[size_t(j) * n + j] = d;
      for (int i = j + 1; i < n; i++) {
        double t = a[size_t(i) * n + j];
        for (int k = 0; k < j; k++) t -= a[size_t(i) * n + k] * a[size_t(j) * n + k];
        a[size_t(i) * n + j] = t / d;
      }
      for (int i = 0; i < j; i++) a[size_t(i) * n + j] = 0;
    }
  };
  chol(h);
  // inverse of L, then H^-1 = L^-T L^-1
  std::vector<double> li(size_t(n) * n, 0.0);
  for (int i = 0; i < n; i++) {
    li[size_t(i) * n + i] = 1.0 / h[size_t(i) * n + i];
    for (int j = 0; j < i; j++) {
      double s = 0;
      for (int k = j; k < i; k++) s += h[size_t(i) * n + k] * li[size_t(k) * n + j];
      li[size_t(i) * n + j] = -s / h[size_t(i) * n + i];
    }
  }
  std::vector<double> hinv(size_t(n) * n, 0.0);
  for (int i = 0; i < n; i++)
    for (int j = 0; j <= i; j++) {
      double s = 0;
      for (int k = i; k < n; k++) s += li[size_t(k) * n + i] * li[size_t(k) * n + j];
      hinv[size_t(i) * n + j] = hinv[size_t(j) * n + i] = s;
    }
  // GPTQ's upper factor U (H^-1 = U^T U) is the transpose of the lower Cholesky factor.
  chol(hinv);
  std::vector<double> u(size_t(n) * n, 0.0);
  for (int i = 0; i < n; i++)
    for (int j = i; j < n; j++) u[size_t(i) * n + j] = hinv[size_t(j) * n + i];
  return u;
}

void quantize_row(const RowFormat& f, double* row, const char* exact, int64_t cols, const double* u) {
  if (!u) {
    for (int64_t c0 = 0; c0 < cols; c0 += f.group) {
      const int n = int(std::min<int64_t>(f.group, cols - c0));
      const double s = group_scale(&row[c0], &exact[c0], n, f);
      for (int k = 0; k < n; k++)
        if (!exact[c0 + k]) row[c0 + k] = quant_code(row[c0 + k], s, f.bits);
    }
    return;
  }
  // GPTQ: quantize column by column, pushing each rounding error onto the columns
  // not yet quantized through the inverse Hessian's factor; a group's scale is
  // taken when the group starts, from the row as the earlier errors left it.
  double s = 0;
  for (int64_t i = 0; i < cols; i++) {
    if (i % f.group == 0) s = group_scale(&row[i], &exact[i], int(std::min<int64_t>(f.group, cols - i)), f);
    if (exact[i]) continue;
    const double q = quant_code(row[i], s, f.bits);
    const double e = (row[i] - q) / u[size_t(i) * cols + i];
    row[i] = q;
    const double* ui = &u[size_t(i) * cols];
    for (int64_t j = i + 1; j < cols; j++) row[j] -= e * ui[j];
  }
}

namespace {

double quad(const std::vector<double>& h, const double* x, int64_t n) {  // x^T H x
  double q = 0;
  for (int64_t i = 0; i < n; i++) {
    const double* hi = &h[size_t(i) * n];
    double t = 0;
    for (int64_t j = 0; j < n; j++) t += hi[j] * x[j];
    q += x[i] * t;
  }
  return q;
}

void add_noise(const MatrixJob& job, double* row, int64_t r, int64_t cols) {
  std::mt19937_64 rng(job.seed + uint64_t(r) * 0x9e3779b97f4a7c15ull);
  std::normal_distribution<double> nd(0.0, 1.0);
  const int g = job.fmt.group;
  for (int64_t c0 = 0; c0 < cols; c0 += g) {  // noise scaled per group, as the scales are
    const int64_t n = std::min<int64_t>(g, cols - c0);
    double ss = 0;
    int cnt = 0;
    for (int64_t k = 0; k < n; k++)
      if (!job.exact[c0 + k]) ss += row[c0 + k] * row[c0 + k], cnt++;
    const double sd = cnt ? job.noise_pct / 100.0 * std::sqrt(ss / cnt) : 0;
    for (int64_t k = 0; k < n; k++)
      if (!job.exact[c0 + k]) row[c0 + k] += sd * nd(rng);
  }
}

// One pass over the rows [every `stride`th]: scale columns by s (awq), round, scale back, and
// tally the errors; writes the rows back into w when `write`.
MatrixResult pass(const MatrixJob& job, float* w, int64_t rows, int64_t cols, const std::vector<double>& s,
                  const std::vector<double>& u, int64_t stride, bool write, WorkerPool& pool) {
  std::vector<MatrixResult> part(pool.size());
  std::atomic<int> next_slot{0};
  const int64_t n = (rows + stride - 1) / stride;
  pool.parallel_for(n, 1, [&](int64_t i0, int64_t i1) {
    MatrixResult& pr = part[next_slot++];
    std::vector<double> row(cols), orig(cols);
    for (int64_t i = i0; i < i1; i++) {
      const int64_t r = i * stride;
      for (int64_t c = 0; c < cols; c++) orig[c] = w[r * cols + c], row[c] = orig[c] * (s.empty() ? 1.0 : s[c]);
      if (job.noise_pct > 0) add_noise(job, row.data(), r, cols);
      else quantize_row(job.fmt, row.data(), job.exact.data(), cols, u.empty() ? nullptr : u.data());
      for (int64_t c = 0; c < cols; c++) {
        if (!s.empty()) row[c] /= s[c];
        if (job.exact[c]) row[c] = orig[c];
        const double d = row[c] - orig[c];
        pr.err2 += d * d;
        pr.w2 += job.exact[c] ? 0.0 : orig[c] * orig[c];
        if (write) w[r * cols + c] = static_cast<float>(row[c]);
      }
      if (job.xtx) {
        pr.ow2 += quad(*job.xtx, orig.data(), cols);
        for (int64_t c = 0; c < cols; c++) orig[c] = row[c] - orig[c];
        pr.oerr2 += quad(*job.xtx, orig.data(), cols);
      }
    }
  });
  MatrixResult res;
  for (auto& p : part) res.err2 += p.err2, res.w2 += p.w2, res.oerr2 += p.oerr2, res.ow2 += p.ow2;
  return res;
}

// AWQ's column scales s_k = (mean |x_k|)^alpha, normalised so the non-exact ones straddle 1.
std::vector<double> awq_scales(const MatrixJob& job, int64_t cols, double alpha) {
  std::vector<double> s(cols, 1.0);
  double lo = 1e300, hi = 0;
  for (int64_t c = 0; c < cols; c++) {
    s[c] = std::pow(std::max((*job.absx)[c], 1e-8), alpha);
    if (!job.exact[c]) lo = std::min(lo, s[c]), hi = std::max(hi, s[c]);
  }
  const double norm = hi > 0 ? std::sqrt(lo * hi) : 1.0;
  for (auto& x : s) x /= norm;
  return s;
}

// GPTQ's factor for the inputs x / s: H' = S^-1 H S^-1.
std::vector<double> scaled_factor(const std::vector<double>& h, const std::vector<double>& s, int64_t n) {
  if (s.empty()) return gptq_factor(h, int(n));
  std::vector<double> hs(h.size());
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) hs[size_t(i) * n + j] = h[size_t(i) * n + j] / (s[i] * s[j]);
  return gptq_factor(std::move(hs), int(n));
}

}  // namespace

MatrixResult quantize_matrix(const MatrixJob& job, float* w, int64_t rows, int64_t cols, WorkerPool& pool) {
  if (job.gptq && !job.xtx) throw invalid_argument("gptq needs calibration inputs");
  std::vector<double> s, u;
  double alpha = -1;
  if (job.awq && job.absx && job.xtx && job.noise_pct == 0) {
    // alpha on a grid, judged by the output error on the calibration inputs of <= 1024 rows
    const int64_t stride = std::max<int64_t>(1, rows / 1024);
    double best_err = 1e300;
    for (int a = 0; a <= 10; a++) {
      auto sa = awq_scales(job, cols, a / 10.0);
      auto ua = job.gptq ? scaled_factor(*job.xtx, sa, cols) : std::vector<double>{};
      const double err = pass(job, w, rows, cols, sa, ua, stride, false, pool).oerr2;
      if (err < best_err) best_err = err, alpha = a / 10.0, s = std::move(sa);
    }
  }
  if (job.gptq) u = scaled_factor(*job.xtx, s, cols);
  MatrixResult res = pass(job, w, rows, cols, s, u, 1, true, pool);
  res.awq_alpha = alpha;
  res.act_div = std::move(s);
  return res;
}

MatrixResult engine_q8_matrix(const std::string& what, float* w, int64_t rows, int64_t cols,
                              std::vector<uint32_t>& exact, WorkerPool& pool) {
  std::vector<float> col_max(cols, 0.0f);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < cols; c++) col_max[c] = std::max(col_max[c], std::fabs(w[r * cols + c]));
  exact = engine::pick_outlier_columns(col_max);
  std::vector<char> is_exact(cols, 0);
  for (uint32_t c : exact) is_exact[c] = 1;
  double max_abs = 0;
  for (int64_t c = 0; c < cols; c++)
    if (!is_exact[c]) max_abs = std::max(max_abs, double(col_max[c]));
  const int frac = engine::weight_frac_for(max_abs, Precision::q8, what.c_str());
  const size_t rb = engine::row_bytes_for(uint32_t(cols), Precision::q8);
  std::vector<MatrixResult> part(pool.size());
  std::atomic<int> next_slot{0};
  pool.parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    MatrixResult& pr = part[next_slot++];
    std::vector<uint8_t> buf(rb);
    for (int64_t r = r0; r < r1; r++) {
      std::span<float> row(&w[r * cols], cols);
      engine::convert_row(row, Precision::q8, frac, buf.data(), what.c_str(), exact);
      for (int64_t c = 0; c < cols; c++) {
        const double q = engine::dequant(buf.data(), uint32_t(c), Precision::q8, frac, uint32_t(cols), exact);
        if (!is_exact[c]) pr.err2 += (q - row[c]) * (q - row[c]), pr.w2 += double(row[c]) * row[c];
        row[c] = static_cast<float>(q);
      }
    }
  });
  MatrixResult res;
  for (auto& p : part) res.err2 += p.err2, res.w2 += p.w2;
  return res;
}

double row_bytes(const RowFormat& f, int64_t cols) {
  const int64_t groups = (cols + f.group - 1) / f.group;
  return double(groups) * (QN_Q8_SCALE_BYTES + f.group * f.bits / 8.0) + QN_OUT_TAIL_BYTES;
}

}  // namespace qwen3::quant_study
