// Every forward-pass BPF program on a small synthetic shape (padding
// included: hidden 200), both weight paths and both precisions:
//   - exactly equal to the bit-exact C++ model (fixed_model.h),
//   - close to float math on the same (dequantized) weights, with the stated
//     bounds, including residual channels of +-1500 (outliers).
#include <bpf/bpf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <random>

#include "common/error.h"
#include "engine/attention_args.h"
#include "engine/bpf_kv_cache.h"
#include "engine/bpf_programs.h"
#include "engine/model_plan.h"
#include "engine/rope_table.h"
#include "engine/weight_format.h"
#include "common/worker_pool.h"
#include "fixed_model.h"

namespace qwen3::engine {
namespace {

namespace fm = qwen3::fixed_model;

struct Param {
  bool arena;
  Precision precision;
  uint32_t kv_bits = 16;
};

std::string param_name(const testing::TestParamInfo<Param>& i) {
  return std::string(i.param.arena ? "arena" : "map") + (i.param.precision == Precision::q8 ? "_q8" : "_q24") + "_kv" +
         std::to_string(i.param.kv_bits);
}

ModelConfig small_config() {
  ModelConfig c;
  c.hidden_size = 200;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 64;
  c.intermediate_size = 320;
  c.vocab_size = 1000;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.tie_word_embeddings = true;
  return c;
}

double q16(int32_t v) { return v / 65536.0; }

class OpsTest : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
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
      std::vector<uint32_t> ocols = q8() ? pick_outlier_columns(col_max) : std::vector<uint32_t>{};
      if (q8() && embed) EXPECT_EQ(ocols, std::vector<uint32_t>{7});
      double mx = 0;
      for (uint32_t c = 0; c < mp.cols; c++)
        if (std::find(ocols.begin(), ocols.end(), c) == ocols.end()) mx = std::max(mx, double(col_max[c]));
      mp.m.wfrac = weight_frac_for(mx, prec(), "test");
      for (int k = 0; k < QN_OUT_COLS; k++) mp.m.ocol[k] = k < int(ocols.size()) ? ocols[k] : 0;
      ocols_[mi] = ocols;
      uint64_t max_l1 = 0;
      for (uint32_t r = 0; r < mp.rows; r++) {
        std::span<const float> row(&all[size_t(r) * mp.cols], mp.cols);
        max_l1 = std::max(max_l1, convert_row_into(progs_->weights(), mp, r, row, mp.m.wfrac, "test", ocols));
      }
      mp.m.act_bits = act_bits_for(max_l1, prec());
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
  bool q8() const { return prec() == Precision::q8; }

  qn_args args_for(const MatrixPlan& mp) {
    qn_args a{};
    a.mat = mp.m;
    if (GetParam().arena) a.mat.arena_off = reinterpret_cast<uintptr_t>(progs_->weights()) + mp.offset;
    return a;
  }
  // Row r as a row image (layout.h), read back from the stored layout.
  std::vector<uint8_t> row(const MatrixPlan& mp, uint32_t r) {
    std::vector<uint8_t> img(row_bytes_for(mp.cols, prec()));
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
      const RowRange rr = worker_rows(rows, a.op == QN_OP_GATEUP, prec(), t, 2);
      a.thread = t;
      a.row_begin = rr.begin;
      a.row_end = rr.end;
      progs_->matmul(a);
    }
  }

  // Float reference of rmsnorm -> matmul on the dequantized weights.
  double float_row(const MatrixPlan& mp, uint32_t r, const std::vector<double>& x) {
    const auto& oc = ocols_[size_t(&mp - plan_.matrices.data())];
    double acc = 0;
    const std::vector<uint8_t> img = row(mp, r);
    for (uint32_t c = 0; c < mp.cols; c++) acc += dequant(img.data(), c, prec(), mp.m.wfrac, mp.cols, oc) * x[c];
    return acc;
  }
  double row_l1(const MatrixPlan& mp, uint32_t r) {
    const auto& oc = ocols_[size_t(&mp - plan_.matrices.data())];
    double l1 = 0;
    const std::vector<uint8_t> img = row(mp, r);
    for (uint32_t c = 0; c < mp.cols; c++) l1 += std::fabs(dequant(img.data(), c, prec(), mp.m.wfrac, mp.cols, oc));
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

// One position runs the decode kernel, three the q8 prefill kernel (position
// pairs, the last one without a partner).
TEST_P(OpsTest, QkvMatchesModelAndFloat) {
  for (uint32_t npos : {1u, 3u}) check_qkv(npos);
}

void OpsTest::check_qkv(uint32_t npos) {
  fill_resid(npos, 1);
  const MatrixPlan& mp = plan_.layer_matrix(0, MatrixKind::qkv);
  qn_args a = args_for(mp);
  a.op = QN_OP_QKV;
  a.npos = npos;
  a.norm_off = plan_.norms[0].input;
  run_split(a, mp.rows);
  double worst = 0, scale = 0;
  for (uint32_t p = 0; p < npos; p++) {
    auto x = resid_row(p);
    std::vector<int32_t> n;
    int s = fm::rmsnorm_requant(x, cfg_.hidden_size, norm_w(a.norm_off, plan_.layout.hid_pad),
                                plan_.layout.shape.eps_q32, mp.m.act_bits, n);
    auto fx = float_norm(x, cfg_.hidden_size, norm_w(a.norm_off, cfg_.hidden_size));
    for (uint32_t r = 0; r < mp.rows; r++) {
      int32_t got = progs_->qkv()[p * plan_.layout.qkv_pad + r];
      ASSERT_EQ(got, fm::matmul_row(row(mp, r).data(), n, s, mp.m, prec())) << "p " << p << " row " << r;
      double f = float_row(mp, r, fx);
      worst = std::max(worst, std::fabs(q16(got) - f));
      scale = std::max(scale, std::fabs(f));
    }
  }
  std::printf("qkv: max |bpf - float| = %.3g (outputs up to %.3g)\n", worst, scale);
  EXPECT_LT(worst, 2e-3 * scale);
}

TEST_P(OpsTest, GateUpSiluMatchesModelAndFloat) {
  const uint32_t npos = 2;
  fill_resid(npos, 2);
  const MatrixPlan& mp = plan_.layer_matrix(1, MatrixKind::gate_up);
  qn_args a = args_for(mp);
  a.op = QN_OP_GATEUP;
  a.npos = npos;
  a.norm_off = plan_.norms[1].post;
  run_split(a, mp.rows / 2);
  double worst = 0, scale = 0;
  for (uint32_t p = 0; p < npos; p++) {
    auto x = resid_row(p);
    std::vector<int32_t> n;
    int s = fm::rmsnorm_requant(x, cfg_.hidden_size, norm_w(a.norm_off, plan_.layout.hid_pad),
                                plan_.layout.shape.eps_q32, mp.m.act_bits, n);
    auto fx = float_norm(x, cfg_.hidden_size, norm_w(a.norm_off, cfg_.hidden_size));
    for (uint32_t j = 0; j < mp.rows / 2; j++) {
      int32_t g = fm::matmul_row(row(mp, 2 * j).data(), n, s, mp.m, prec());
      int32_t u = fm::matmul_row(row(mp, 2 * j + 1).data(), n, s, mp.m, prec());
      int32_t got = progs_->mlp()[p * plan_.layout.inter_pad + j];
      ASSERT_EQ(got, qn_silu_mul(g, u)) << "p " << p << " j " << j;
      double fg = float_row(mp, 2 * j, fx), fu = float_row(mp, 2 * j + 1, fx);
      double f = fg / (1 + std::exp(-fg)) * fu;
      worst = std::max(worst, std::fabs(q16(got) - f));
      scale = std::max(scale, std::fabs(f));
    }
  }
  std::printf("gate/up: max |bpf - float| = %.3g (outputs up to %.3g)\n", worst, scale);
  EXPECT_LT(worst, 4e-3 * scale);
}

TEST_P(OpsTest, ProjectionsAddResidualExactly) {
  for (uint32_t npos : {1u, 2u}) check_projections(npos);
}

void OpsTest::check_projections(uint32_t npos) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> nd;
  for (auto [kind, src, stride, len] :
       {std::tuple{MatrixKind::o, progs_->attn(), plan_.layout.qd_pad, uint32_t(cfg_.q_dim())},
        std::tuple{MatrixKind::down, progs_->mlp(), plan_.layout.inter_pad, uint32_t(cfg_.intermediate_size)}}) {
    fill_resid(npos, 4);
    for (uint32_t p = 0; p < npos; p++)
      for (uint32_t i = 0; i < stride; i++)
        src[p * stride + i] = i < len ? static_cast<int32_t>(std::llround(nd(rng) * 3 * 65536.0)) : 0;
    src[5] = 900 << 16;  // an outlier in the input vector too
    std::vector<std::vector<int32_t>> before;
    for (uint32_t p = 0; p < npos; p++) before.push_back(resid_row(p));
    const MatrixPlan& mp = plan_.layer_matrix(0, kind);
    qn_args a = args_for(mp);
    a.op = kind == MatrixKind::o ? QN_OP_O : QN_OP_DOWN;
    a.npos = npos;
    run_split(a, mp.rows);
    double worst = 0, worst_beyond_input = 0, scale = 0;
    for (uint32_t p = 0; p < npos; p++) {
      std::vector<int32_t> x(src + p * stride, src + (p + 1) * stride);
      std::vector<double> fx(len);
      for (uint32_t i = 0; i < len; i++) fx[i] = q16(x[i]);
      int s = fm::requant(x, mp.m.act_bits);
      for (uint32_t r = 0; r < mp.rows; r++) {
        int32_t y = fm::matmul_row(row(mp, r).data(), x, s, mp.m, prec());
        int32_t got = resid_row(p)[r];
        ASSERT_EQ(got, qn_sat32(int64_t(before[p][r]) + y)) << "p " << p << " row " << r;
        double f = float_row(mp, r, fx);
        double err = std::fabs(q16(got - before[p][r]) - f);
        worst = std::max(worst, err);
        // beyond what rounding the input to its block-floating-point step
        // explains (sum |w| * step / 2; q8 inputs keep QN_Q8_ACT_BITS bits)
        worst_beyond_input = std::max(worst_beyond_input, err - row_l1(mp, r) * std::ldexp(1.0, s - 16) / 2);
        scale = std::max(scale, std::fabs(f));
      }
    }
    std::printf("%s: max |bpf - float| = %.3g (outputs up to %.3g)\n", kind == MatrixKind::o ? "o_proj" : "down",
                worst, scale);
    EXPECT_LT(worst_beyond_input, 2e-3 * scale);
  }
}

TEST_P(OpsTest, VocabLogitsArgmaxTopK) {
  const uint32_t npos = 3;
  fill_resid(npos, 5);
  const MatrixPlan& mp = plan_.lm_head();
  qn_args a = args_for(mp);
  a.op = QN_OP_VOCAB;
  a.npos = npos;
  a.pos_mask = 0b101;  // positions 0 and 2 want logits
  a.top_k = 20;
  a.norm_off = plan_.final_norm;
  run_split(a, mp.rows);
  qn_args m{};
  m.npos = 2;
  m.top_k = a.top_k;
  progs_->topk_merge(m);
  const uint32_t positions[] = {0, 2};
  for (uint32_t c = 0; c < 2; c++) {
    auto x = resid_row(positions[c]);
    std::vector<int32_t> n;
    int s = fm::rmsnorm_requant(x, cfg_.hidden_size, norm_w(a.norm_off, plan_.layout.hid_pad),
                                plan_.layout.shape.eps_q32, mp.m.act_bits, n);
    std::vector<std::pair<int32_t, int32_t>> all;  // (-logit, id)
    for (uint32_t r = 0; r < mp.rows; r++) {
      int32_t want = fm::matmul_row(row(mp, r).data(), n, s, mp.m, prec());
      ASSERT_EQ(progs_->logits()[c * cfg_.vocab_size + r], want) << "c " << c << " row " << r;
      all.push_back({-want, static_cast<int32_t>(r)});
    }
    std::sort(all.begin(), all.end());
    for (uint32_t t = 0; t < 2; t++) ASSERT_EQ(progs_->topk(t, c)->count, 20);
    // the kernel's merge of the two workers' lists (qn_topk_merge)
    const qn_topk_slot* m = progs_->merged_topk(c);
    ASSERT_EQ(m->count, 20);
    for (int i = 0; i < 20; i++) EXPECT_EQ(std::pair(-m->e[i].logit, m->e[i].id), all[i]) << "rank " << i;
    EXPECT_EQ(m->argmax_id, all[0].second);
    EXPECT_EQ(m->argmax_logit, -all[0].first);
  }
}

TEST_P(OpsTest, EmbedDequantizesRows) {
  const MatrixPlan& mp = plan_.embed();
  qn_args a = args_for(mp);
  a.npos = 4;
  int32_t toks[] = {0, 999, 17, 17};
  for (int i = 0; i < 4; i++) a.tokens[i] = toks[i];
  progs_->embed(a);
  for (uint32_t p = 0; p < 4; p++)
    for (uint32_t c = 0; c < plan_.layout.hid_pad; c++)
      ASSERT_EQ(resid_row(p)[c], fm::embed_value(row(mp, toks[p]).data(), c, prec(), mp.m)) << p << " " << c;
  a.tokens[1] = 1000;  // out of vocabulary: the program refuses
  EXPECT_THROW(progs_->embed(a), Error);
}

TEST_P(OpsTest, AttentionMatchesModelAndFloat) {
  auto slots = std::make_shared<KvSlots>(progs_->kv_outer_fd(), progs_->layout().shape);
  BpfKvCache kv(slots, 16);
  const ModelConfig& c = cfg_;
  const uint32_t hd = c.head_dim, qp = plan_.layout.qkv_pad, layer = 1;
  const bool kv8 = GetParam().kv_bits == 8;  // compact: packed 9-bit K | 7-bit V words, in-band scales
  const int32_t levels = QN_KV_LEVELS16;
  std::vector<std::vector<std::vector<int32_t>>> mkv(c.num_key_value_heads);  // compact: words per position
  const NormOffsets& no = plan_.norms[layer];
  std::mt19937_64 rng(9);
  std::normal_distribution<double> nd;
  // model state: per kv head, cached quantized K and V
  std::vector<std::vector<fm::QuantVec>> mk(c.num_key_value_heads), mv(c.num_key_value_heads);
  // float state: per kv head, float K (normed, rotated) and V
  std::vector<std::vector<std::vector<double>>> fk(c.num_key_value_heads), fv(c.num_key_value_heads);
  double worst = 0, scale = 0;
  uint32_t pos = 0;
  for (uint32_t npos : {5u, 1u, 1u, 3u}) {
    for (uint32_t p = 0; p < npos; p++)
      for (uint32_t i = 0; i < qp; i++)
        progs_->qkv()[p * qp + i] = static_cast<int32_t>(std::llround(nd(rng) * (i % 9 == 0 ? 12 : 2) * 65536.0));
    for (uint32_t t = 0; t < 2; t++) {
      qn_args a = attention_args(plan_, kv, {layer, pos, npos}, t, t + 1, t);
      progs_->attention(a);
    }
    for (uint32_t p = 0; p < npos; p++, pos++) {
      const int32_t* row = progs_->qkv() + p * qp;
      std::span<const int32_t> cs(progs_->rope() + pos * hd, hd);
      for (int h = 0; h < c.num_key_value_heads; h++) {
        std::span<const int32_t> kin(row + c.q_dim() + h * hd, hd), vin(row + c.q_dim() + c.kv_dim() + h * hd, hd);
        auto kr_fixed = fm::head_norm_rope(kin, norm_w(no.k, hd), cs, plan_.layout.shape.eps_q32);
        if (kv8) {
          mkv[h].push_back(fm::kv8_pack(kr_fixed, vin));
        } else {
          mk[h].push_back(fm::kv_quant(kr_fixed, levels));
          mv[h].push_back(fm::kv_quant(vin, levels));
        }
        // float: same normalized+rotated K as doubles, V as given
        auto kn = float_norm(std::vector<int32_t>(kin.begin(), kin.end()), hd, norm_w(no.k, hd));
        std::vector<double> kr(hd), vf(hd);
        for (uint32_t d = 0; d < hd / 2; d++) {
          double co = std::cos(pos * std::pow(c.rope_theta, -2.0 * d / hd));
          double si = std::sin(pos * std::pow(c.rope_theta, -2.0 * d / hd));
          kr[d] = kn[d] * co - kn[d + hd / 2] * si;
          kr[d + hd / 2] = kn[d + hd / 2] * co + kn[d] * si;
        }
        for (uint32_t d = 0; d < hd; d++) vf[d] = q16(vin[d]);
        fk[h].push_back(kr);
        fv[h].push_back(vf);
      }
      for (int qh = 0; qh < c.num_attention_heads; qh++) {
        int h = qh / c.group_size();
        std::span<const int32_t> qin(row + qh * hd, hd);
        auto q = fm::head_norm_rope(qin, norm_w(no.q, hd), cs, plan_.layout.shape.eps_q32);
        auto want = kv8 ? fm::attend_kv8(q, mkv[h], hd) : fm::attend(q, mk[h], mv[h], hd, levels);
        const int32_t* got = progs_->attn() + p * plan_.layout.qd_pad + qh * hd;
        for (uint32_t d = 0; d < hd; d++) ASSERT_EQ(got[d], want[d]) << "pos " << pos << " head " << qh << " d " << d;
        // float attention over the float cache
        auto qn = float_norm(std::vector<int32_t>(qin.begin(), qin.end()), hd, norm_w(no.q, hd));
        std::vector<double> qr(hd);
        for (uint32_t d = 0; d < hd / 2; d++) {
          double co = std::cos(pos * std::pow(c.rope_theta, -2.0 * d / hd));
          double si = std::sin(pos * std::pow(c.rope_theta, -2.0 * d / hd));
          qr[d] = qn[d] * co - qn[d + hd / 2] * si;
          qr[d + hd / 2] = qn[d + hd / 2] * co + qn[d] * si;
        }
        std::vector<double> sc;
        double mx = -1e300;
        for (auto& k : fk[h]) {
          double s = 0;
          for (uint32_t d = 0; d < hd; d++) s += qr[d] * k[d];
          sc.push_back(s / std::sqrt(double(hd)));
          mx = std::max(mx, sc.back());
        }
        double sum = 0;
        for (auto& s : sc) sum += (s = std::exp(s - mx));
        for (uint32_t d = 0; d < hd; d++) {
          double o = 0;
          for (size_t j = 0; j < sc.size(); j++) o += sc[j] / sum * fv[h][j][d];
          worst = std::max(worst, std::fabs(q16(got[d]) - o));
          scale = std::max(scale, std::fabs(o));
        }
      }
    }
    // the cache holds exactly the model's quantized K/V, in the record of
    // position pos - 1 inside its block's entry (layout.h: qn_kv_*)
    const qn_shape& sh = plan_.layout.shape;
    ASSERT_EQ(sh.kv_entry_bytes, QN_KV_BLOCK * sh.kv_rec_bytes);
    ASSERT_EQ(sh.kv_rec_bytes, kv8 ? 2u * hd : 4u * hd + 8);  // compact: nothing but one K|V word per element
    std::vector<uint8_t> entry(progs_->kv_value_size());
    for (int h = 0; h < c.num_key_value_heads; h++) {
      uint32_t key = qn_kv_key(sh.n_layers, sh.n_kv_heads, layer, h, pos - 1);
      ASSERT_EQ(bpf_map_lookup_elem(kv.map_fd(), &key, entry.data()), 0);
      const uint32_t rec = qn_kv_rec_off(sh.kv_rec_bytes, pos - 1);
      auto elem = [&](uint32_t off) {
        int16_t v;
        std::memcpy(&v, &entry[rec + off], 2);
        return int32_t(v);
      };
      auto scale = [&](uint32_t off) {
        int32_t v;
        std::memcpy(&v, &entry[rec + off], 4);
        return v;
      };
      for (uint32_t d = 0; d < hd; d++) {
        if (kv8) {
          ASSERT_EQ(elem(d * 2), mkv[h].back()[d]);
        } else {
          ASSERT_EQ(elem(d * 2), mk[h].back().q[d]);
          ASSERT_EQ(elem(qn_kv_v_off(hd, 2) + d * 2), mv[h].back().q[d]);
        }
      }
      if (!kv8) {
        ASSERT_EQ(scale(qn_kv_kmax_off(hd)), mk[h].back().max);
        ASSERT_EQ(scale(qn_kv_vmax_off(hd)), mv[h].back().max);
      }
    }
  }
  std::printf("attention: max |bpf - float| = %.3g (outputs up to %.3g; int%u K/V)\n", worst, scale,
              GetParam().kv_bits);
  EXPECT_LT(worst, (GetParam().kv_bits == 16 ? 0.002 : 0.03) * scale);
}

// The compact K/V's scale code: the smallest of 8 steps per octave that
// covers the vector's max, and codes that round to nearest (with the
// prescribed low bit for the codes that carry the scale codes).
TEST(KvCompact, ScaleCodeAndQuantization) {
  std::mt19937_64 rng(5);
  for (int i = 0; i < 20000; i++) {
    uint64_t mx = rng() >> (rng() % 38 + 26);  // 0 .. 2^38: any rotated int32 vector of 128
    int64_t e = qn_kv8_code(mx);
    ASSERT_GE(e, 0);
    ASSERT_LE(e, QN_KV8_CODE_MAX);
    if ((int64_t(mx) << QN_KV8_UNIT_SHIFT) > qn_kv8_scale(QN_KV8_CODE_MAX)) {
      // beyond the top scale (only nearly all-saturated vectors): the top code, clipped
      ASSERT_GT(mx, uint64_t(1) << 37);
      ASSERT_EQ(e, QN_KV8_CODE_MAX);
      ASSERT_EQ(std::abs(qn_kv8_quant(int64_t(mx), e, QN_KV8_K_LEVELS)), QN_KV8_K_LEVELS);
      continue;
    }
    ASSERT_GE(qn_kv8_scale(e), int64_t(mx) << QN_KV8_UNIT_SHIFT) << mx;
    if (e > 0) {
      ASSERT_LT(qn_kv8_scale(e - 1), int64_t(mx) << QN_KV8_UNIT_SHIFT) << mx;
    }
    // any element of the vector, |y| <= mx
    int64_t y = mx ? int64_t(rng() % (2 * mx + 1)) - int64_t(mx) : 0;
    double levels = double(y) * 127 * (1 << QN_KV8_UNIT_SHIFT) / double(qn_kv8_scale(e));
    int32_t q = qn_kv8_quant(y, e, 127);
    ASSERT_LE(std::fabs(q - levels), 0.5 + 1e-9) << y << " e " << e;
    for (int bit : {0, 1}) {
      int32_t qb = qn_kv8_quant_bit(y, e, bit, 127);
      ASSERT_EQ(qb & 1, bit);
      ASSERT_LE(std::abs(qb), 127);
      ASSERT_LE(std::fabs(qb - levels), 1.0 + 1e-9) << y << " e " << e << " bit " << bit;
    }
  }
  EXPECT_EQ(qn_kv8_code(0), 0);
  // K and V codes share one 16-bit word and come back out unchanged
  for (int k = -QN_KV8_K_LEVELS; k <= QN_KV8_K_LEVELS; k += 7)
    for (int v = -QN_KV8_V_LEVELS; v <= QN_KV8_V_LEVELS; v++) {
      int64_t w = static_cast<int16_t>(qn_kv8_word(k, v));
      ASSERT_EQ(qn_kv8_kcode(w), k);
      ASSERT_EQ(qn_kv8_vcode(w), v);
    }
  // the 8 mantissas are 2^(k/8) apart, in [2^15, 2^16)
  for (int k = 0; k < 8; k++) EXPECT_NEAR(double(qn_kv8_mant(k)), std::ldexp(1.0, 15) * std::exp2(k / 8.0), 0.5);
}

// The integer Hadamard transform of the model, applied twice, is 2^lb times the identity.
TEST(KvCompact, HadamardTwiceScalesByTheBlock) {
  for (uint32_t hd : {32u, 64u, 96u, 128u}) {
    const int lb = qn_kv8_block_log2(hd);
    EXPECT_EQ(1u << lb, hd & (~hd + 1));
    std::mt19937_64 rng(hd);
    std::vector<int64_t> x(hd);
    for (auto& v : x) v = int64_t(rng() % 2000001) - 1000000;
    auto y = x;
    fm::hadamard(y, lb);
    fm::hadamard(y, lb);
    for (uint32_t d = 0; d < hd; d++) ASSERT_EQ(y[d], x[d] << lb);
  }
}

// Both exponentials are exactly 0 from -QN_EXP_ZERO_Q16 on (the value pass
// skips a position whose weights are all 0), and not yet 0 a little above.
TEST(AttentionNumerics, ExpIsZeroPastTheSkipThreshold) {
  for (int64_t d = -QN_EXP_ZERO_Q16; d > -QN_EXP_ZERO_Q16 - (1LL << 22); d -= 97) {
    ASSERT_EQ(qn_exp_neg_q30(d), 0) << d;
    ASSERT_EQ(qn_attn_exp_q30(d), 0) << d;
  }
  EXPECT_EQ(qn_exp_neg_q30(-(1LL << 40)), 0);
  EXPECT_EQ(qn_attn_exp_q30(-(1LL << 40)), 0);
  EXPECT_GT(qn_exp_neg_q30(-20 * 65536), 0);
  EXPECT_GT(qn_attn_exp_q30(-20 * 65536), 0);
}

// The softmax's table exponential: exactly 1.0 at the max (the bounds below
// rest on it), and within the rounding of its Q16 octave count (relative
// ln 2 * 2^-17) plus 2 units of exp(d) over the whole range.
TEST(AttentionNumerics, TableExpIsExactAtTheMaxAndCloseToExp) {
  EXPECT_EQ(qn_attn_exp_q30(0), 1LL << 30);
  EXPECT_EQ(qn_attn_exp_q30(12345), 1LL << 30);  // d > 0 counts as 0
  double worst = 0;
  for (int64_t d = 0; d > -QN_EXP_ZERO_Q16; d -= 7) {
    double want = std::exp(double(d) / 65536) * double(1LL << 30);
    double err = std::abs(double(qn_attn_exp_q30(d)) - want);
    ASSERT_LE(err, want * std::log(2.0) * std::ldexp(1.0, -17) + 2.0) << d;
    if (want >= double(1 << 20)) worst = std::max(worst, err / want);
  }
  std::printf("table exp: max relative error %.3g where exp(d) >= 2^-10\n", worst);
}

// Two query heads' sums share one u64 and both come back exactly at the
// extremes the layout allows: |q| <= 2^15, K codes +-255, 256 dims.
TEST(AttentionNumerics, LanesCarryTwoSumsExactly) {
  std::mt19937_64 rng(7);
  for (int c = 0; c < 2000; c++) {
    const int64_t qmax = 1LL << QN_KV8_Q_BITS;
    uint64_t t = 0;
    int64_t s0 = 0, s1 = 0;
    for (int d = 0; d < 256; d++) {
      int mode = c % 4;  // all +, all -, opposite signs, random
      int64_t k = mode == 3 ? int64_t(rng() % 511) - 255 : 255;
      int64_t q0 = mode == 1 ? -qmax : mode == 3 ? int64_t(rng() % (2 * qmax + 1)) - qmax : qmax;
      int64_t q1 = mode == 2 ? -q0 : mode == 3 ? int64_t(rng() % (2 * qmax + 1)) - qmax : q0;
      t += qn_lanes(q0, q1) * uint64_t(k);
      s0 += q0 * k;
      s1 += q1 * k;
    }
    ASSERT_LT(std::abs(s0), 1LL << 31);
    ASSERT_EQ(qn_lane_lo(t), s0) << c;
    ASSERT_EQ(qn_lane_hi(t), s1) << c;
  }
}

// The value weights' lane bound: 63 * sum_i w_i < 2^31 with every position at
// the largest scale, for one position holding all the mass and for 2^20
// positions sharing it; a lone position's probability is exactly 1.0.
TEST(AttentionNumerics, ValueWeightsStayInTheirLane) {
  const int64_t m = QN_KV8_CODE_MAX >> 3, e = QN_KV8_CODE_MAX;  // largest mantissa at octave m
  EXPECT_EQ(qn_kv8_prob(1LL << 30, qn_kv8_prob_inv(1ULL << 30)), 1LL << 30);
  EXPECT_LT(QN_KV8_V_LEVELS * qn_kv8_vweight(1LL << 30, e, m), 1LL << 31);
  for (uint64_t n : {2ULL, 3ULL, 2048ULL, 40960ULL, 1ULL << 20}) {
    uint64_t inv = qn_kv8_prob_inv(n << 30);  // n equal weights: the most rounding up
    int64_t w = qn_kv8_vweight(qn_kv8_prob(1LL << 30, inv), e, m);
    ASSERT_LT(QN_KV8_V_LEVELS * w * int64_t(n), 1LL << 31) << n;
  }
}

// The program takes a GQA group's query heads in pairs (plus a single one
// for odd groups; with compact K/V a pair shares each multiply): groups of
// 1, 3, 4, 5 and 8 (the ops tests above use 2; Qwen3's dense configs use 2
// to 8) against the bit-exact model, both K/V layouts, prefill then decode.
TEST(AttentionGroups, SingleAndOddGroupsMatchModel) {
  for (uint32_t group : {1u, 3u, 4u, 5u, 8u})
    for (uint32_t bits : {16u, 8u}) {
      ModelConfig c = small_config();
      c.num_key_value_heads = 2;
      c.num_attention_heads = int(2 * group);
      ModelPlan plan = make_model_plan(c, Precision::q24, false, 2, 16, bits);
      plan.layout.weight_entries = 1;  // attention reads no weights
      BpfPrograms progs(plan.layout);
      std::mt19937_64 rng(group * 100 + bits);
      std::uniform_real_distribution<double> ud(0.5, 1.5);
      for (uint32_t i = 0; i < plan.layout.shape.norms_len; i++)
        progs.norms()[i] = static_cast<int32_t>(ud(rng) * (1 << QN_NORM_FRAC));
      WorkerPool pool(2);
      fill_rope_table(progs, pool);
      auto slots = std::make_shared<KvSlots>(progs.kv_outer_fd(), progs.layout().shape);
      BpfKvCache kv(slots, 16);
      const uint32_t hd = c.head_dim, qp = plan.layout.qkv_pad, layer = 1;
      const NormOffsets& no = plan.norms[layer];
      std::span<const int32_t> qw(progs.norms() + no.q, hd), kw(progs.norms() + no.k, hd);
      std::vector<std::vector<fm::QuantVec>> mk(2), mv(2);
      std::vector<std::vector<std::vector<int32_t>>> mkv(2);
      std::normal_distribution<double> nd;
      uint32_t pos = 0;
      for (uint32_t npos : {4u, 1u}) {
        for (uint32_t i = 0; i < npos * qp; i++)
          progs.qkv()[i] = static_cast<int32_t>(std::llround(nd(rng) * (i % 9 == 0 ? 12 : 2) * 65536.0));
        qn_args a = attention_args(plan, kv, {layer, pos, npos}, 0, 2);
        progs.attention(a);
        for (uint32_t p = 0; p < npos; p++, pos++) {
          const int32_t* row = progs.qkv() + p * qp;
          std::span<const int32_t> cs(progs.rope() + pos * hd, hd);
          for (int h = 0; h < 2; h++) {
            std::span<const int32_t> kin(row + c.q_dim() + h * hd, hd), vin(row + c.q_dim() + c.kv_dim() + h * hd, hd);
            auto kr = fm::head_norm_rope(kin, kw, cs, plan.layout.shape.eps_q32);
            if (bits == 8) {
              mkv[h].push_back(fm::kv8_pack(kr, vin));
            } else {
              mk[h].push_back(fm::kv_quant(kr, QN_KV_LEVELS16));
              mv[h].push_back(fm::kv_quant(vin, QN_KV_LEVELS16));
            }
          }
          for (int qh = 0; qh < c.num_attention_heads; qh++) {
            const int h = qh / int(group);
            auto q = fm::head_norm_rope(std::span<const int32_t>(row + qh * hd, hd), qw, cs, plan.layout.shape.eps_q32);
            auto want = bits == 8 ? fm::attend_kv8(q, mkv[h], hd) : fm::attend(q, mk[h], mv[h], hd, QN_KV_LEVELS16);
            const int32_t* got = progs.attn() + p * plan.layout.qd_pad + qh * hd;
            for (uint32_t d = 0; d < hd; d++)
              ASSERT_EQ(got[d], want[d]) << "group " << group << " kv" << bits << " pos " << pos << " head " << qh;
          }
        }
      }
    }
}

TEST_P(OpsTest, AttentionRejectsPositionsPastTheCache) {
  auto slots = std::make_shared<KvSlots>(progs_->kv_outer_fd(), progs_->layout().shape);
  BpfKvCache kv(slots, 4);
  // position 4 does not exist in a 4-position cache
  qn_args a = attention_args(plan_, kv, {.layer = 0, .pos0 = 3, .npos = 2}, 0, 1);
  EXPECT_THROW(progs_->attention(a), Error);
}

// Sessions sharing a pass: a slice at rows pass_off.. of the pass computes
// exactly what the same rows compute as a pass of their own, and writes the
// same K/V (the model comparison above covers pass_off = 0).
TEST_P(OpsTest, AttentionSliceAtPassOffsetEqualsItsOwnPass) {
  auto slots = std::make_shared<KvSlots>(progs_->kv_outer_fd(), progs_->layout().shape);
  BpfKvCache shared_a(slots, 16), shared_b(slots, 16), own_a(slots, 16), own_b(slots, 16);
  const uint32_t qp = plan_.layout.qkv_pad, dp = plan_.layout.qd_pad, layer = 1;
  std::mt19937_64 rng(31);
  std::normal_distribution<double> nd;
  auto run = [&](const BpfKvCache& kv, uint32_t npos, uint32_t pos0, uint32_t pass_off) {
    for (uint32_t t = 0; t < 2; t++) {
      qn_args a = attention_args(plan_, kv, {layer, pos0, npos, pass_off}, t, t + 1, t);
      progs_->attention(a);
    }
  };
  auto entries = [&](const BpfKvCache& kv, uint32_t n) {  // every entry holding positions 0 .. n - 1
    const uint64_t m = slots->entries(int(n));
    std::vector<uint8_t> all(size_t(m) * progs_->kv_value_size());
    for (uint32_t e = 0; e < m; e++)
      EXPECT_EQ(bpf_map_lookup_elem(kv.map_fd(), &e, all.data() + size_t(e) * progs_->kv_value_size()), 0);
    return all;
  };
  // step 1: a has 3 positions at rows 0..2, b 5 at rows 3..7; step 2: b decodes at row 0, a 2 positions at rows 14..15
  struct Slice {
    bool is_a;
    uint32_t npos, pos0, pass_off;
  };
  for (auto step : {std::vector<Slice>{{true, 3, 0, 0}, {false, 5, 0, 3}},
                    std::vector<Slice>{{false, 1, 5, 0}, {true, 2, 3, 14}}}) {
    for (uint32_t i = 0; i < QN_PMAX * qp; i++)
      progs_->qkv()[i] = static_cast<int32_t>(std::llround(nd(rng) * (i % 9 == 0 ? 12 : 2) * 65536.0));
    std::vector<int32_t> qkv(progs_->qkv(), progs_->qkv() + QN_PMAX * qp);
    for (const Slice& s : step) run(s.is_a ? shared_a : shared_b, s.npos, s.pos0, s.pass_off);
    std::vector<int32_t> attn(progs_->attn(), progs_->attn() + QN_PMAX * dp);
    for (const Slice& s : step) {
      // the slice's rows moved to the top of a pass of its own
      std::copy_n(qkv.begin() + s.pass_off * qp, s.npos * qp, progs_->qkv());
      run(s.is_a ? own_a : own_b, s.npos, s.pos0, 0);
      for (uint32_t p = 0; p < s.npos; p++)
        for (uint32_t i = 0; i < uint32_t(cfg_.q_dim()); i++)
          ASSERT_EQ(progs_->attn()[p * dp + i], attn[(s.pass_off + p) * dp + i]) << "row " << s.pass_off + p;
    }
  }
  EXPECT_EQ(entries(shared_a, 5), entries(own_a, 5));
  EXPECT_EQ(entries(shared_b, 6), entries(own_b, 6));
  // the slice would run past the pass
  qn_args bad = attention_args(plan_, shared_a, {.layer = layer, .pos0 = 0, .npos = 3, .pass_off = QN_PMAX - 2}, 0, 1);
  EXPECT_THROW(progs_->attention(bad), Error);
}

INSTANTIATE_TEST_SUITE_P(Paths, OpsTest,
                         testing::Values(Param{false, Precision::q24}, Param{false, Precision::q8},
                                         Param{true, Precision::q24}, Param{true, Precision::q8},
                                         Param{false, Precision::q24, 8}, Param{true, Precision::q8, 8},
                                         Param{false, Precision::q8, 8}),
                         param_name);

// The q8 block kernel (dot8_q8 on the interleaved blocks of layout.h) gives
// exactly the integers of the one-row formula it replaced (fm::matmul_row on
// the row images: int8 code * input per group, times the scale, plus the
// outlier columns): odd row counts (padded last blocks, gate/up pairs not a
// multiple of 4, vocabulary rows), codes at +-127, inputs at the 2^18 bound
// of the lanes, outlier columns, split over 1, 2 and 16 workers.
class Q8BlockTest : public testing::TestWithParam<bool> {};

TEST_P(Q8BlockTest, SameIntegersAsTheRowFormula) {
  ModelConfig c = small_config();
  c.hidden_size = 203;  // 25 blocks + 3 rows
  c.intermediate_size = 331;
  c.vocab_size = 1001;
  ModelPlan plan = make_model_plan(c, Precision::q8, GetParam(), 16, 64, 16);
  BpfPrograms progs(plan.layout);
  std::mt19937_64 rng(7);
  for (MatrixPlan& mp : plan.matrices) {
    mp.m.wfrac = QN_W8_FRAC;
    mp.m.act_bits = QN_Q8_ACT_BITS;
    const uint32_t oc[QN_OUT_COLS] = {5, 64, mp.cols - 1, 0};  // column 0: an unused slot (weight 0)
    std::copy(oc, oc + QN_OUT_COLS, mp.m.ocol);
    std::vector<uint8_t> img(row_bytes_for(mp.cols, Precision::q8));
    for (uint32_t r = 0; r < mp.rows; r++) {
      std::fill(img.begin(), img.end(), 0);
      for (uint32_t g = 0; g < mp.m.groups; g++) {
        uint8_t* gp = img.data() + qn_group_off(QN_PREC_Q8, g);
        const int32_t scale = int32_t(rng() % (1u << 16)) + 1;
        std::memcpy(gp, &scale, 4);
        for (uint32_t k = 0; k < QN_GROUP; k++) {
          const uint32_t col = g * QN_GROUP + k;
          if (col >= mp.cols || col == oc[0] || col == oc[1] || col == oc[2]) continue;  // zero slots
          const int code = r % 4 == 0 ? 127 : r % 4 == 1 ? -127 : r % 4 == 2 ? int(rng() % 255) - 127 : (k % 2 ? 127 : -127);
          gp[QN_Q8_SCALE_BYTES + k] = static_cast<uint8_t>(int8_t(code));
        }
      }
      for (int k = 0; k < 3; k++) {
        const int64_t w = int64_t(rng() % (1u << 30)) - (1 << 29);
        std::memcpy(img.data() + qn_q8_tail_off(mp.m.groups) + 8 * k, &w, 8);
      }
      store_row(progs.weights(), mp, r, img.data());
    }
  }
  for (uint32_t i = 0; i < plan.layout.shape.norms_len; i++) progs.norms()[i] = 1 << QN_NORM_FRAC;
  auto args = [&](const MatrixPlan& mp, uint32_t op, uint32_t npos) {
    qn_args a{};
    a.mat = mp.m;
    if (GetParam()) a.mat.arena_off = reinterpret_cast<uintptr_t>(progs.weights()) + mp.offset;
    a.op = op;
    a.npos = npos;
    return a;
  };
  auto run = [&](qn_args a, uint32_t rows, uint32_t T) {
    for (uint32_t t = 0; t < T; t++) {
      const RowRange rr = worker_rows(rows, a.op == QN_OP_GATEUP, Precision::q8, t, T);
      a.thread = t;
      a.row_begin = rr.begin;
      a.row_end = rr.end;
      if (rr.begin < rr.end) {
        ASSERT_NO_THROW(progs.matmul(a)) << "op " << a.op << " worker " << t;
      }
    }
  };
  auto image = [&](const MatrixPlan& mp, uint32_t r) {
    std::vector<uint8_t> img(row_bytes_for(mp.cols, Precision::q8));
    load_row(progs.weights(), mp, r, img.data());
    return img;
  };
  const uint32_t npos = 3, hp = plan.layout.hid_pad;
  for (uint32_t T : {1u, 2u, 16u}) {
    // projections: inputs of +-(2^25 - 1) requantize to exactly +-2^18
    for (auto [kind, src, stride, len] :
         {std::tuple{MatrixKind::o, progs.attn(), plan.layout.qd_pad, uint32_t(c.q_dim())},
          std::tuple{MatrixKind::down, progs.mlp(), plan.layout.inter_pad, uint32_t(c.intermediate_size)}}) {
      for (uint32_t p = 0; p < npos; p++)
        for (uint32_t i = 0; i < stride; i++)
          src[p * stride + i] = i >= len ? 0 : p == 0 ? (1 << 25) - 1 : p == 1 ? -((1 << 25) - 1)
                                                    : (rng() % 2 ? 1 : -1) * int32_t(rng() % (1u << 25));
      std::fill(progs.resid(), progs.resid() + npos * hp, 0);
      const MatrixPlan& mp = plan.layer_matrix(0, kind);
      run(args(mp, kind == MatrixKind::o ? QN_OP_O : QN_OP_DOWN, npos), mp.rows, T);
      for (uint32_t p = 0; p < npos; p++) {
        std::vector<int32_t> x(src + p * stride, src + (p + 1) * stride);
        const int s = fm::requant(x, mp.m.act_bits);
        if (p < 2) {
          ASSERT_EQ(std::abs(x[0]), 1 << QN_Q8_ACT_BITS);  // the lanes' bound, reached
        }
        for (uint32_t r = 0; r < mp.rows; r++)
          ASSERT_EQ(progs.resid()[p * hp + r], fm::matmul_row(image(mp, r).data(), x, s, mp.m, Precision::q8))
              << "T " << T << " kind " << int(kind) << " p " << p << " row " << r;
        for (uint32_t r = mp.rows; r < hp; r++) ASSERT_EQ(progs.resid()[p * hp + r], 0) << "padding row " << r;
      }
    }
    // normed ops: gate/up (331 pairs) and the vocabulary (1001 rows, logits of every position)
    for (uint32_t p = 0; p < npos; p++)
      for (uint32_t i = 0; i < hp; i++)
        progs.resid()[p * hp + i] = i < uint32_t(c.hidden_size) ? int32_t(rng() % (1u << 22)) - (1 << 21) : 0;
    const MatrixPlan& gu = plan.layer_matrix(0, MatrixKind::gate_up);
    qn_args a = args(gu, QN_OP_GATEUP, npos);
    a.norm_off = plan.norms[0].input;
    run(a, gu.rows / 2, T);
    const MatrixPlan& lm = plan.lm_head();
    a = args(lm, QN_OP_VOCAB, npos);
    a.norm_off = plan.final_norm;
    a.pos_mask = 0b111;
    a.top_k = 8;
    run(a, lm.rows, T);
    for (uint32_t p = 0; p < npos; p++) {
      std::vector<int32_t> x(progs.resid() + p * hp, progs.resid() + (p + 1) * hp), n;
      std::span<const int32_t> w(progs.norms() + plan.norms[0].input, hp);
      int s = fm::rmsnorm_requant(x, c.hidden_size, w, plan.layout.shape.eps_q32, gu.m.act_bits, n);
      for (uint32_t j = 0; j < gu.rows / 2; j++) {
        const int32_t g = fm::matmul_row(image(gu, 2 * j).data(), n, s, gu.m, Precision::q8);
        const int32_t u = fm::matmul_row(image(gu, 2 * j + 1).data(), n, s, gu.m, Precision::q8);
        ASSERT_EQ(progs.mlp()[p * plan.layout.inter_pad + j], qn_silu_mul(g, u)) << "T " << T << " pair " << j;
      }
      s = fm::rmsnorm_requant(x, c.hidden_size, std::span<const int32_t>(progs.norms() + plan.final_norm, hp),
                              plan.layout.shape.eps_q32, lm.m.act_bits, n);
      for (uint32_t r = 0; r < lm.rows; r++)
        ASSERT_EQ(progs.logits()[p * c.vocab_size + r], fm::matmul_row(image(lm, r).data(), n, s, lm.m, Precision::q8))
            << "T " << T << " p " << p << " vocab row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, Q8BlockTest, testing::Values(false, true),
                         [](const testing::TestParamInfo<bool>& i) { return i.param ? "arena" : "map"; });

// Worker row ranges: q8 splits at whole blocks (8 rows, 4 gate/up pairs) so no
// block is shared, and together the ranges cover every row once; q24 keeps
// the plain proportional split.
TEST(WorkerRows, BlocksAreNeverShared) {
  for (uint32_t rows : {1u, 7u, 8u, 203u, 331u, 1001u, 151936u})
    for (bool pairs : {false, true})
      for (uint32_t T : {1u, 2u, 3u, 16u, 64u}) {
        const uint32_t unit = pairs ? 4 : 8;
        uint32_t next = 0;
        for (uint32_t t = 0; t < T; t++) {
          const RowRange r = worker_rows(rows, pairs, Precision::q8, t, T);
          ASSERT_EQ(r.begin, next) << rows << " " << T << " " << t;
          ASSERT_LE(r.begin, r.end);
          ASSERT_EQ(r.begin % unit, 0u);
          if (r.end != rows) ASSERT_EQ(r.end % unit, 0u);
          next = r.end;
          const RowRange q = worker_rows(rows, pairs, Precision::q24, t, T);
          EXPECT_EQ(q.begin, uint32_t(uint64_t(rows) * t / T));
          EXPECT_EQ(q.end, uint32_t(uint64_t(rows) * (t + 1) / T));
        }
        ASSERT_EQ(next, rows);
      }
}

TEST(ProgramsVerify, AtThe06bShape) {
  ModelConfig c;
  c.hidden_size = 1024;
  c.num_hidden_layers = 28;
  c.num_attention_heads = 16;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.intermediate_size = 3072;
  c.vocab_size = 151936;
  c.tie_word_embeddings = true;
  for (auto [prec, kv_bits] :
       {std::pair{Precision::q24, 16u}, std::pair{Precision::q8, 16u}, std::pair{Precision::q24, 8u}}) {
    ModelPlan plan = make_model_plan(c, prec, false, 2, 4096, kv_bits);
    // the compact layout is exactly one byte per cached value: 2 x 128 per
    // position and kv head (int16: 2 x 2 x 128 and two int32 scales)
    EXPECT_EQ(plan.layout.shape.kv_rec_bytes, kv_bits == 8 ? 256u : 520u);
    EXPECT_EQ(plan.layout.shape.kv_entry_bytes, QN_KV_BLOCK * plan.layout.shape.kv_rec_bytes);
    plan.layout.weight_entries = 1;  // verification only: no weights needed
    BpfPrograms progs(plan.layout);
    for (auto& st : progs.stats()) {
      std::printf("%s kv%u %s: %u instructions processed by the verifier\n", prec == Precision::q8 ? "q8" : "q24", kv_bits,
                  st.name.c_str(), st.verified_insns);
      EXPECT_GT(st.verified_insns, 0u);
      EXPECT_LT(st.verified_insns, 1000000u);
    }
  }
}

}  // namespace
}  // namespace qwen3::engine
