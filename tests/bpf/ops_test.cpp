// Every forward-pass BPF program on a small synthetic shape (padding
// included: hidden 200), both weight paths and both precisions:
//   - exactly equal to the bit-exact C++ model (fixed_model.h),
//   - close to float math on the same (dequantized) weights, with the stated
//     bounds, including residual channels of +-1500 (outliers).
// The attention program and the K/V cache are in ops_attention_test.cpp.
#include "ops_fixture.h"

namespace qwen3::engine::opstest {

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
      ASSERT_EQ(got, fm::matmul_row(row(mp, r).data(), n, s, mp.m, mp.precision)) << "p " << p << " row " << r;
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
      int32_t g = fm::matmul_row(row(mp, 2 * j).data(), n, s, mp.m, mp.precision);
      int32_t u = fm::matmul_row(row(mp, 2 * j + 1).data(), n, s, mp.m, mp.precision);
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
        int32_t y = fm::matmul_row(row(mp, r).data(), x, s, mp.m, mp.precision);
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
      int32_t want = fm::matmul_row(row(mp, r).data(), n, s, mp.m, mp.precision);
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
      ASSERT_EQ(resid_row(p)[c], fm::embed_value(row(mp, toks[p]).data(), c, mp.precision, mp.m)) << p << " " << c;
  a.tokens[1] = 1000;  // out of vocabulary: the program refuses
  EXPECT_THROW(progs_->embed(a), Error);
}
INSTANTIATE_TEST_SUITE_P(Paths, OpsTest,
                         testing::Values(Param{false, Precision::q24}, Param{false, Precision::q8},
                                         Param{true, Precision::q24}, Param{true, Precision::q8},
                                         Param{false, Precision::q24, 8}, Param{true, Precision::q8, 8},
                                         Param{false, Precision::q8, 8}, Param{false, Precision::q4},
                                         Param{true, Precision::q4, 8}),
                         param_name);

// The block kernels give exactly the integers of the one-row formulas
// (fm::matmul_row on the row images): q8 (dot8_q8 on the interleaved blocks
// of layout.h: int8 code * input per group, times the scale) and q4
// (dot16_q4a8: 4-bit codes against the 8-bit inputs), plus the outlier
// columns: odd row counts (padded last blocks, gate/up pairs not a multiple
// of the block, vocabulary rows), extreme codes (q8 +-127, q4 0 and 15),
// inputs at the 2^18 bound, split over 1, 2 and 16 workers, 1 to 16 positions.
struct BlockParam {
  bool arena;
  Precision precision;
};
inline void PrintTo(const BlockParam& p, std::ostream* os) {
  *os << (p.arena ? "arena " : "map ") << precision_name(p.precision);
}
class BlockKernelTest : public testing::TestWithParam<BlockParam> {};

// A random row image of mp's format; the outlier columns' slots are zero weights.
std::vector<uint8_t> random_image(const MatrixPlan& mp, uint32_t r, const uint32_t* oc, std::mt19937_64& rng) {
  const bool q4 = mp.precision == Precision::q4;
  std::vector<uint8_t> img(row_bytes_for(mp.cols, mp.precision), 0);
  auto zero_slot = [&](uint32_t col) { return col >= mp.cols || col == oc[0] || col == oc[1] || col == oc[2]; };
  const uint32_t chunk = q4 ? QN_Q4_GROUP : QN_GROUP;  // columns per scale
  for (uint32_t g = 0; g < mp.m.groups * (QN_GROUP / chunk); g++) {
    uint8_t* gp = img.data() + (q4 ? qn_q4_img_half_off(g / 2, g % 2) : qn_group_off(QN_PREC_Q8, g));
    const int32_t scale = (int32_t(rng() % (1u << 16)) + 1) * (q4 && rng() % 2 ? -1 : 1);
    std::memcpy(gp, &scale, 4);
    for (uint32_t k = 0; k < chunk; k++) {
      const bool zero = zero_slot(g * chunk + k);
      if (q4) {
        const int code = zero ? 8 : r % 4 == 0 ? 15 : r % 4 == 1 ? 0 : r % 4 == 2 ? int(rng() % 16) : (k % 2 ? 15 : 0);
        gp[4 + k] = uint8_t(code);
      } else if (!zero) {
        const int code = r % 4 == 0 ? 127 : r % 4 == 1 ? -127 : r % 4 == 2 ? int(rng() % 255) - 127 : (k % 2 ? 127 : -127);
        gp[QN_Q8_SCALE_BYTES + k] = static_cast<uint8_t>(int8_t(code));
      }
    }
  }
  const uint32_t tail = qn_group_off(static_cast<uint32_t>(mp.precision), mp.m.groups);
  for (int k = 0; k < 3; k++) {
    const int64_t w = int64_t(rng() % (1u << 30)) - (1 << 29);
    std::memcpy(img.data() + tail + 8 * k, &w, 8);
  }
  return img;
}

TEST_P(BlockKernelTest, SameIntegersAsTheRowFormula) {
  if (GetParam().arena) QWEN3_SKIP_WITHOUT_ARENA();
  ModelConfig c = small_config();
  c.hidden_size = 203;  // 25 blocks + 3 rows
  c.intermediate_size = 331;
  c.vocab_size = 1001;
  ModelPlan plan = make_model_plan(c, GetParam().precision, GetParam().arena, 16, 64, 16);
  BpfPrograms progs(plan.layout);
  std::mt19937_64 rng(7);
  for (MatrixPlan& mp : plan.matrices) {
    mp.m.wfrac = QN_W8_FRAC;
    mp.m.act_bits = QN_Q8_ACT_BITS;
    const uint32_t oc[QN_OUT_COLS] = {5, 64, mp.cols - 1, 0};  // column 0: an unused slot (weight 0)
    std::copy(oc, oc + QN_OUT_COLS, mp.m.ocol);
    for (uint32_t r = 0; r < mp.rows; r++) store_row(progs.weights(), mp, r, random_image(mp, r, oc, rng).data());
  }
  for (uint32_t i = 0; i < plan.layout.shape.norms_len; i++) progs.norms()[i] = 1 << QN_NORM_FRAC;
  auto args = [&](const MatrixPlan& mp, uint32_t op, uint32_t npos) {
    qn_args a{};
    a.mat = mp.m;
    if (GetParam().arena) a.mat.arena_off = reinterpret_cast<uintptr_t>(progs.weights()) + mp.offset;
    a.op = op;
    a.npos = npos;
    return a;
  };
  auto run = [&](qn_args a, uint32_t rows, uint32_t T) {
    for (uint32_t t = 0; t < T; t++) {
      const RowRange rr = worker_rows(rows, a.op == QN_OP_GATEUP, Precision(a.mat.format), t, T);
      a.thread = t;
      a.row_begin = rr.begin;
      a.row_end = rr.end;
      if (rr.begin < rr.end) {
        ASSERT_NO_THROW(progs.matmul(a)) << "op " << a.op << " worker " << t;
      }
    }
  };
  auto image = [&](const MatrixPlan& mp, uint32_t r) {
    std::vector<uint8_t> img(row_bytes_for(mp.cols, mp.precision));
    load_row(progs.weights(), mp, r, img.data());
    return img;
  };
  const uint32_t hp = plan.layout.hid_pad;
  // 3 positions: one block of the multi-position kernel, partly filled; 11 and 16: two blocks
  for (auto [T, npos] : {std::pair{1u, 3u}, std::pair{2u, 11u}, std::pair{16u, 16u}}) {
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
          ASSERT_EQ(progs.resid()[p * hp + r], fm::matmul_row(image(mp, r).data(), x, s, mp.m, mp.precision))
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
    a.pos_mask = (1u << npos) - 1;
    a.top_k = 8;
    run(a, lm.rows, T);
    for (uint32_t p = 0; p < npos; p++) {
      std::vector<int32_t> x(progs.resid() + p * hp, progs.resid() + (p + 1) * hp), n;
      std::span<const int32_t> w(progs.norms() + plan.norms[0].input, hp);
      int s = fm::rmsnorm_requant(x, c.hidden_size, w, plan.layout.shape.eps_q32, gu.m.act_bits, n);
      for (uint32_t j = 0; j < gu.rows / 2; j++) {
        const int32_t g = fm::matmul_row(image(gu, 2 * j).data(), n, s, gu.m, gu.precision);
        const int32_t u = fm::matmul_row(image(gu, 2 * j + 1).data(), n, s, gu.m, gu.precision);
        ASSERT_EQ(progs.mlp()[p * plan.layout.inter_pad + j], qn_silu_mul(g, u)) << "T " << T << " pair " << j;
      }
      s = fm::rmsnorm_requant(x, c.hidden_size, std::span<const int32_t>(progs.norms() + plan.final_norm, hp),
                              plan.layout.shape.eps_q32, lm.m.act_bits, n);
      for (uint32_t r = 0; r < lm.rows; r++)
        ASSERT_EQ(progs.logits()[p * c.vocab_size + r], fm::matmul_row(image(lm, r).data(), n, s, lm.m, lm.precision))
            << "T " << T << " p " << p << " vocab row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, BlockKernelTest,
                         testing::Values(BlockParam{false, Precision::q8}, BlockParam{true, Precision::q8},
                                         BlockParam{false, Precision::q4}, BlockParam{true, Precision::q4}),
                         [](const testing::TestParamInfo<BlockParam>& i) {
                           return std::string(i.param.arena ? "arena_" : "map_") + precision_name(i.param.precision);
                         });

// Worker row ranges: q8 and q4 split at whole blocks (8 rows or 4 gate/up
// pairs; 16 or 8) so no block is shared, and together the ranges cover every
// row once; q24 keeps the plain proportional split.
TEST(WorkerRows, BlocksAreNeverShared) {
  for (uint32_t rows : {1u, 7u, 8u, 203u, 331u, 1001u, 151936u})
    for (bool pairs : {false, true})
      for (uint32_t T : {1u, 2u, 3u, 16u, 64u})
        for (Precision p : {Precision::q8, Precision::q4}) {
        const uint32_t unit = (p == Precision::q4 ? 16 : 8) / (pairs ? 2 : 1);
        uint32_t next = 0;
        for (uint32_t t = 0; t < T; t++) {
          const RowRange r = worker_rows(rows, pairs, p, t, T);
          ASSERT_EQ(r.begin, next) << rows << " " << T << " " << t;
          ASSERT_LE(r.begin, r.end);
          ASSERT_EQ(r.begin % unit, 0u);
          if (r.end != rows) {
            ASSERT_EQ(r.end % unit, 0u);
          }
          next = r.end;
          const RowRange q = worker_rows(rows, pairs, Precision::q24, t, T);
          EXPECT_EQ(q.begin, uint32_t(uint64_t(rows) * t / T));
          EXPECT_EQ(q.end, uint32_t(uint64_t(rows) * (t + 1) / T));
        }
        ASSERT_EQ(next, rows);
      }
}

TEST(ProgramsVerify, AtThe06bShape) {
  const ModelConfig c = mkmodel::qwen3_06b_shape();
  for (auto [prec, kv_bits] :
       {std::pair{Precision::q24, 16u}, std::pair{Precision::q8, 16u}, std::pair{Precision::q24, 8u},
        std::pair{Precision::q4, 8u}}) {
    ModelPlan plan = make_model_plan(c, prec, false, 2, 4096, kv_bits);
    // the compact layout is exactly one byte per cached value: 2 x 128 per
    // position and kv head (int16: 2 x 2 x 128 and two int32 scales)
    EXPECT_EQ(plan.layout.shape.kv_rec_bytes, kv_bits == 8 ? 256u : 520u);
    EXPECT_EQ(plan.layout.shape.kv_entry_bytes, QN_KV_BLOCK * plan.layout.shape.kv_rec_bytes);
    plan.layout.weight_entries = 1;  // verification only: no weights needed
    BpfPrograms progs(plan.layout);
    for (auto& st : progs.stats()) {
      std::printf("%s kv%u %s: %u instructions processed by the verifier\n", precision_name(prec), kv_bits,
                  st.name.c_str(), st.verified_insns);
      EXPECT_GT(st.verified_insns, 0u);
      EXPECT_LT(st.verified_insns, 1000000u);
    }
  }
}

}  // namespace qwen3::engine::opstest
