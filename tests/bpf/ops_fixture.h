// The fixture of the forward-pass operator tests (ops_test.cpp: the matrix
// products, embedding and vocabulary; ops_attention_test.cpp: attention and the
// K/V cache): the programs loaded on a small synthetic shape (padding included:
// hidden 200) with seeded weights, for both weight paths and both precisions.
#pragma once

#include <bpf/bpf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "arena_skip.h"
#include "common/error.h"
#include "engine/attention_args.h"
#include "engine/bpf_backend.h"  // precision_name
#include "engine/bpf_kv_cache.h"
#include "engine/bpf_programs.h"
#include "engine/model_plan.h"
#include "engine/rope_table.h"
#include "engine/weight_format.h"
#include "common/worker_pool.h"
#include "fixed_model.h"
#include "presets.h"

namespace qwen3::engine::opstest {

namespace fm = qwen3::fixed_model;

struct Param {
  bool arena;
  Precision precision;
  uint32_t kv_bits = 16;
};

// How ctest lists a case (without it gtest prints the struct's bytes, padding included).
inline void PrintTo(const Param& p, std::ostream* os) {
  *os << (p.arena ? "arena " : "map ") << precision_name(p.precision) << " kv" << p.kv_bits;
}

inline std::string param_name(const testing::TestParamInfo<Param>& i) {
  return std::string(i.param.arena ? "arena" : "map") + "_" + precision_name(i.param.precision) + "_kv" +
         std::to_string(i.param.kv_bits);
}

// Hidden 200: the padding paths run too.
inline ModelConfig small_config() { return mkmodel::model_shape(200, 2, 4, 2, 64, 320, 1000); }

inline double q16(int32_t v) { return v / 65536.0; }


class OpsTest : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (GetParam().arena) QWEN3_SKIP_WITHOUT_ARENA();
    cfg_ = small_config();
    plan_ = make_model_plan(cfg_, GetParam().precision, GetParam().arena, 2, 64, GetParam().kv_bits);
    progs_ = std::make_unique<BpfPrograms>(plan_.layout);
    std::mt19937_64 rng(42);
    std::normal_distribution<float> nd(0.0f, 0.08f);
    for (size_t mi = 0; mi < plan_.matrices.size(); mi++) {
      MatrixPlan& mp = plan_.matrices[mi];
      // o_proj carries one weight of 300 (its matrix drops to fewer fraction
      // bits); the embedding has an outlier column of 150 in every row (q8
      // stores it exactly, outside the int8 groups)
      const bool huge = mp.kind == MatrixKind::o, embed = mp.kind == MatrixKind::embed;
      std::vector<float> all(size_t(mp.rows) * mp.cols);
      for (uint32_t r = 0; r < mp.rows; r++) {
        float* row = &all[size_t(r) * mp.cols];
        for (uint32_t c = 0; c < mp.cols; c++) row[c] = nd(rng);
        if (r % 17 == 3) row[r % mp.cols] = 1.75f;  // a few large weights
        if (huge && r == 7) row[1] = 300.0f;
        if (embed) row[7] = 150.0f;
      }
      std::vector<float> col_max(mp.cols, 0.0f);
      for (size_t i = 0; i < all.size(); i++) col_max[i % mp.cols] = std::max(col_max[i % mp.cols], std::fabs(all[i]));
      const bool packed = mp.precision != Precision::q24;  // q8 and q4 keep outlier columns exact
      std::vector<uint32_t> ocols = packed ? pick_outlier_columns(col_max) : std::vector<uint32_t>{};
      if (packed && embed) {
        EXPECT_EQ(ocols, std::vector<uint32_t>{7});
      }
      double mx = 0;
      for (uint32_t c = 0; c < mp.cols; c++)
        if (std::find(ocols.begin(), ocols.end(), c) == ocols.end()) mx = std::max(mx, double(col_max[c]));
      mp.m.wfrac = weight_frac_for(mx, mp.precision, "test");
      for (int k = 0; k < QN_OUT_COLS; k++) mp.m.ocol[k] = k < int(ocols.size()) ? ocols[k] : 0;
      ocols_[mi] = ocols;
      uint64_t max_l1 = 0;
      for (uint32_t r = 0; r < mp.rows; r++) {
        std::span<const float> row(&all[size_t(r) * mp.cols], mp.cols);
        max_l1 = std::max(max_l1, convert_row_into(progs_->weights(), mp, r, row, mp.m.wfrac, "test", ocols));
      }
      mp.m.act_bits = act_bits_for(max_l1, mp.precision);
    }
    std::uniform_real_distribution<float> ud(0.5f, 1.5f);
    for (uint32_t i = 0; i < plan_.layout.shape.norms_len; i++)
      progs_->norms()[i] = to_fixed(ud(rng), QN_NORM_FRAC, "norm");
    progs_->norms()[plan_.norms[0].input + 5] = to_fixed(20.0f, QN_NORM_FRAC, "norm");
    // padding columns of the hidden-size norms stay zero, as the engine writes them
    for (auto& n : plan_.norms)
      for (uint32_t i = cfg_.hidden_size; i < plan_.layout.hid_pad; i++) {
        progs_->norms()[n.input + i] = 0;
        progs_->norms()[n.post + i] = 0;
      }
    WorkerPool pool(2);
    fill_rope_table(*progs_, pool);
  }

  Precision prec() const { return GetParam().precision; }

  qn_args args_for(const MatrixPlan& mp) {
    qn_args a{};
    a.mat = mp.m;
    if (GetParam().arena) a.mat.arena_off = reinterpret_cast<uintptr_t>(progs_->weights()) + mp.offset;
    return a;
  }
  // Row r as a row image (layout.h), read back from the stored layout.
  std::vector<uint8_t> row(const MatrixPlan& mp, uint32_t r) {
    std::vector<uint8_t> img(row_bytes_for(mp.cols, mp.precision));
    load_row(progs_->weights(), mp, r, img.data());
    return img;
  }

  // Random residual stream with two outlier channels of +-1500.
  void fill_resid(uint32_t npos, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> nd;
    const uint32_t hp = plan_.layout.hid_pad;
    for (uint32_t p = 0; p < npos; p++)
      for (uint32_t i = 0; i < hp; i++)
        progs_->resid()[p * hp + i] =
            i < uint32_t(cfg_.hidden_size) ? static_cast<int32_t>(std::llround(nd(rng) * 65536.0)) : 0;
    for (uint32_t p = 0; p < npos; p++) {
      progs_->resid()[p * hp + 3] = 1500 << 16;
      progs_->resid()[p * hp + 77] = -(1400 << 16);
    }
  }

  std::vector<int32_t> resid_row(uint32_t p) {
    const uint32_t hp = plan_.layout.hid_pad;
    return {progs_->resid() + p * hp, progs_->resid() + (p + 1) * hp};
  }
  std::span<const int32_t> norm_w(uint32_t off, uint32_t n) { return {progs_->norms() + off, n}; }

  // Runs one matmul op split over 2 threads by rows.
  void run_split(qn_args a, uint32_t rows) {
    for (uint32_t t = 0; t < 2; t++) {
      const RowRange rr = worker_rows(rows, a.op == QN_OP_GATEUP, Precision(a.mat.format), t, 2);
      a.thread = t;
      a.row_begin = rr.begin;
      a.row_end = rr.end;
      progs_->matmul(a);
    }
  }

  // Float reference of rmsnorm -> matmul on the dequantized weights (q4:
  // and on the 8-bit inputs, outlier columns excepted, which meet x itself).
  double float_row(const MatrixPlan& mp, uint32_t r, const std::vector<double>& x) {
    const auto& oc = ocols_[size_t(&mp - plan_.matrices.data())];
    const std::vector<double> xin = mp.precision == Precision::q4 ? a8_float(x) : x;
    double acc = 0;
    const std::vector<uint8_t> img = row(mp, r);
    for (uint32_t c = 0; c < mp.cols; c++) {
      const bool exact = std::find(oc.begin(), oc.end(), c) != oc.end();
      acc += dequant(img.data(), c, mp.precision, mp.m.wfrac, mp.cols, oc) * (exact ? x[c] : xin[c]);
    }
    return acc;
  }
  // x through the q4 kernel's 8-bit input format, in float: per group of 32,
  // round(127 x / max|x|) * max|x| / 127.
  static std::vector<double> a8_float(const std::vector<double>& x) {
    std::vector<double> y(x.size());
    for (size_t g0 = 0; g0 < x.size(); g0 += QN_A8_GROUP) {
      const size_t g1 = std::min(x.size(), g0 + QN_A8_GROUP);
      double m = 0;
      for (size_t i = g0; i < g1; i++) m = std::max(m, std::fabs(x[i]));
      for (size_t i = g0; i < g1; i++) y[i] = m > 0 ? std::nearbyint(127.0 * x[i] / m) * m / 127.0 : 0.0;
    }
    return y;
  }
  double row_l1(const MatrixPlan& mp, uint32_t r) {
    const auto& oc = ocols_[size_t(&mp - plan_.matrices.data())];
    double l1 = 0;
    const std::vector<uint8_t> img = row(mp, r);
    for (uint32_t c = 0; c < mp.cols; c++) l1 += std::fabs(dequant(img.data(), c, mp.precision, mp.m.wfrac, mp.cols, oc));
    return l1;
  }
  std::vector<double> float_norm(const std::vector<int32_t>& x, uint32_t n, std::span<const int32_t> w) {
    double ss = 0;
    for (uint32_t i = 0; i < n; i++) ss += q16(x[i]) * q16(x[i]);
    double inv = 1.0 / std::sqrt(ss / n + cfg_.rms_norm_eps);
    std::vector<double> y(n);
    for (uint32_t i = 0; i < n; i++) y[i] = q16(x[i]) * inv * std::ldexp(double(w[i]), -QN_NORM_FRAC);
    return y;
  }

  void check_qkv(uint32_t npos);
  void check_projections(uint32_t npos);

  ModelConfig cfg_;
  ModelPlan plan_;
  std::map<size_t, std::vector<uint32_t>> ocols_;  // per matrix index
  std::unique_ptr<BpfPrograms> progs_;
};

}  // namespace qwen3::engine::opstest
