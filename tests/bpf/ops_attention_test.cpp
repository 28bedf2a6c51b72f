// The attention program (qn_attention) on the fixture's shape, both weight
// paths, both precisions and both K/V layouts: exactly equal to the bit-exact
// C++ model (fixed_model.h: head_norm_rope, attend, attend_kv8), close to float
// attention, and the cache holding exactly the model's K/V; the compact K/V's
// scale codes and the attention numerics on their own.
#include "ops_fixture.h"

namespace qwen3::engine::opstest {

// RoPE in double: x rotated by position `pos` (halves paired, as the model does).
std::vector<double> float_rope(const std::vector<double>& x, uint32_t pos, double theta) {
  const uint32_t hd = static_cast<uint32_t>(x.size());
  std::vector<double> r(hd);
  for (uint32_t d = 0; d < hd / 2; d++) {
    double co = std::cos(pos * std::pow(theta, -2.0 * d / hd));
    double si = std::sin(pos * std::pow(theta, -2.0 * d / hd));
    r[d] = x[d] * co - x[d + hd / 2] * si;
    r[d + hd / 2] = x[d + hd / 2] * co + x[d] * si;
  }
  return r;
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
        std::vector<double> kr = float_rope(kn, pos, c.rope_theta), vf(hd);
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
        std::vector<double> qr = float_rope(qn, pos, c.rope_theta);
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

}  // namespace qwen3::engine::opstest
