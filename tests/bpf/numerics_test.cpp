// The scalar fixed-point helpers of bpf_ops/numerics.h against double math,
// over their whole input ranges, with the stated maximum errors
// (docs/numerics.md). The BPF programs use the very same functions; the
// operator tests check that kernel and model agree bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "numerics.h"

namespace {

TEST(Numerics, BitsMatchesLog2) {
  EXPECT_EQ(qn_bits_u64(0), 0);
  for (int b = 0; b < 64; b++) {
    uint64_t v = uint64_t(1) << b;
    EXPECT_EQ(qn_bits_u64(v), b + 1);
    EXPECT_EQ(qn_bits_u64(v | (v - 1)), b + 1);
  }
}

TEST(Numerics, RsqrtRelativeErrorBelow5e9) {
  std::mt19937_64 rng(1);
  double worst = 0;
  for (int i = 0; i < 200000; i++) {
    int bits = 1 + static_cast<int>(rng() % 60);
    uint64_t v = (rng() >> (64 - bits)) | 1;
    int e = 0;
    int64_t r = qn_rsqrt_q30(v, &e);
    double got = std::ldexp(static_cast<double>(r), -e);
    double want = 1.0 / std::sqrt(static_cast<double>(v));
    worst = std::max(worst, std::fabs(got / want - 1.0));
  }
  std::printf("rsqrt max relative error %.3g\n", worst);
  EXPECT_LT(worst, 5e-9);
}

TEST(Numerics, ExpAbsoluteErrorBelow1e5) {
  double worst = 0;
  for (int64_t d = 0; d >= -40 * 65536; d -= 37) {
    double got = std::ldexp(static_cast<double>(qn_exp_neg_q30(d)), -30);
    double want = std::exp(d / 65536.0);
    worst = std::max(worst, std::fabs(got - want));
  }
  // The base-2 exponent is carried in Q16 (step 1.5e-5): relative error <= ~5e-6.
  std::printf("exp max absolute error %.3g\n", worst);
  EXPECT_LT(worst, 1e-5);
  EXPECT_EQ(qn_exp_neg_q30(0), int64_t(1) << 30);
  EXPECT_EQ(qn_exp_neg_q30(-300LL * 65536), 0);
}

TEST(Numerics, SigmoidAndSiluMatchFloat) {
  double worst_sig = 0, worst_silu = 0;
  for (int32_t g = -30 * 65536; g <= 30 * 65536; g += 101) {
    double x = g / 65536.0;
    double sig = std::ldexp(static_cast<double>(qn_sigmoid_q30(g)), -30);
    worst_sig = std::max(worst_sig, std::fabs(sig - 1.0 / (1.0 + std::exp(-x))));
    double silu = qn_silu_mul(g, 65536) / 65536.0;
    worst_silu = std::max(worst_silu, std::fabs(silu - x / (1.0 + std::exp(-x))));
  }
  std::printf("sigmoid max abs error %.3g, silu max abs error %.3g\n", worst_sig, worst_silu);
  EXPECT_LT(worst_sig, 5e-6);
  EXPECT_LT(worst_silu, 2e-5);  // Q16 output rounding (7.6e-6) dominates
}

TEST(Numerics, SiluMulSaturatesInsteadOfWrapping) {
  EXPECT_EQ(qn_silu_mul(2000 << 16, 2000 << 16), 2147483647);
  EXPECT_EQ(qn_silu_mul(2000 << 16, -(2000 << 16)), -2147483647);
}

TEST(Numerics, RmsFactorOverOutlierRanges) {
  // x / rms for vectors whose largest element spans 2^-10 .. 2^15 (Q16 up to 2^31).
  std::mt19937_64 rng(7);
  std::normal_distribution<double> nd;
  double worst = 0;
  for (int trial = 0; trial < 200; trial++) {
    const int n = 1024;
    double scale = std::ldexp(1.0, -10 + trial % 25);
    std::vector<int32_t> x(n);
    for (auto& v : x) v = static_cast<int32_t>(std::llround(nd(rng) * scale * 65536.0 / 4));
    x[17] = static_cast<int32_t>(std::min(2.1e9, scale * 65536.0 * 8));
    uint64_t mx = 0;
    for (int32_t v : x) mx = std::max<uint64_t>(mx, qn_abs64(v));
    int t = qn_rms_reduce_shift(mx);
    uint64_t ss = 0;
    double ssd = 0;
    for (int32_t v : x) {
      int64_t s = static_cast<int64_t>(v) >> t;
      ss += static_cast<uint64_t>(s * s);
      ssd += (v / 65536.0) * (v / 65536.0);
    }
    int sh = 0;
    int64_t r = qn_rms_factor(ss, n, t, 4295, &sh);
    double inv = 1.0 / std::sqrt(ssd / n + 1e-6);
    for (int i = 0; i < n; i += 7) {
      double got = qn_rms_apply(x[i], r, sh, 1 << QN_NORM_FRAC) / 65536.0;  // weight 1.0
      worst = std::max(worst, std::fabs(got - x[i] / 65536.0 * inv));
    }
  }
  std::printf("rmsnorm max abs error %.3g (output Q16 step 1.5e-5)\n", worst);
  EXPECT_LT(worst, 2e-4);
}

}  // namespace
