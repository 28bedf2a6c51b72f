// The reference forward pass on a minuscule model: numbers worked by hand for
// the first positions, RoPE and causal averaging checked through the trace,
// and every logit compared with an independent double-precision pass.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "minuscule_model.h"
#include "naive_qwen3.h"
#include "reference/reference_backend.h"

namespace qwen3 {
namespace {

namespace fs = std::filesystem;

class MinusculeModel : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("qwen3-ref-minuscule-" + std::to_string(::getpid()) + "-" +
                                              ::testing::UnitTest::GetInstance()->current_test_info()->name());
  void TearDown() override { fs::remove_all(dir); }
};

// Attention and MLP projections that make the arithmetic easy by hand:
// q = k = 0 (so attention is a plain average of the values), v = the first two
// normalized channels, o = identity, gate = up = 0 (MLP adds nothing), all norm
// weights 1, lm_head rows 0..3 = identity and row 4 = all ones.
std::vector<float> hand_values(const std::string& name, size_t n) {
  std::vector<float> v(n, 0.0f);
  if (name.find("norm") != std::string::npos) std::fill(v.begin(), v.end(), 1.0f);
  if (name == "model.embed_tokens.weight") {
    const float rows[3][4] = {{0, 0, 0, 0}, {1, -1, 2, 0}, {0, 2, 0, 0}};
    for (int r = 0; r < 3; ++r)
      for (int i = 0; i < 4; ++i) v[r * 4 + i] = rows[r][i];
  }
  if (name == "model.layers.0.self_attn.v_proj.weight") v[0 * 4 + 0] = v[1 * 4 + 1] = 1.0f;
  if (name == "model.layers.0.self_attn.o_proj.weight")
    for (int i = 0; i < 4; ++i) v[i * 4 + i] = 1.0f;
  if (name == "lm_head.weight") {
    for (int i = 0; i < 4; ++i) v[i * 4 + i] = 1.0f;
    for (int i = 0; i < 4; ++i) v[4 * 4 + i] = 1.0f;
  }
  return v;
}

TEST_F(MinusculeModel, HandWorkedLogits) {
  test::write_minuscule_model(dir, hand_values);
  auto backend = make_reference_backend(ModelDir::open(dir.string()), 1);
  auto kv = backend->create_kv(8);
  std::vector<int32_t> tokens = {1, 2};
  auto r = backend->forward(*kv, tokens, ForwardWants{.all_positions = true, .full_logits = true});
  ASSERT_EQ(r.positions.size(), 2u);
  // Position 0, token [1,-1,2,0]: rms sqrt(1.5); attention = its own value
  // [1,-1]/sqrt(1.5) in both heads; residual [1.8165,-1.8165,2.8165,-0.8165];
  // final norm divides by 1.9493.
  const double pos0[8] = {0.931885, -0.931885, 1.444897, -0.418873, 1.026024, 0, 0, 0};
  // Position 1, token [0,2,0,0]: value [0,2]; attention averages it with
  // position 0's value: [0.40825, 0.59175]; residual [0.40825, 2.59175,
  // 0.40825, 0.59175] over rms 1.36020.
  const double pos1[8] = {0.300136, 1.905406, 0.300136, 0.435044, 2.940722, 0, 0, 0};
  for (int v = 0; v < 8; ++v) {
    EXPECT_NEAR(r.positions[0].full[v], pos0[v], 2e-5) << "position 0, logit " << v;
    EXPECT_NEAR(r.positions[1].full[v], pos1[v], 2e-5) << "position 1, logit " << v;
  }
  EXPECT_EQ(r.positions[0].argmax, 2);
  EXPECT_EQ(r.positions[1].argmax, 4);
}

TEST_F(MinusculeModel, AttentionIsCausalAverageWhenScoresAreEqual) {
  test::write_minuscule_model(dir, hand_values);
  ReferenceBackend backend(ModelDir::open(dir.string()), 1);
  std::vector<float> v_rows, att_rows;
  backend.set_trace([&](const TracePoint& p) {
    if (p.stage == TraceStage::v_proj) v_rows.assign(p.data, p.data + p.rows * p.cols);
    if (p.stage == TraceStage::attention) att_rows.assign(p.data, p.data + p.rows * p.cols);
  });
  auto kv = backend.create_kv(8);
  std::vector<int32_t> tokens = {1, 2, 0, 1};
  backend.forward(*kv, tokens, {});
  ASSERT_EQ(v_rows.size(), 4u * 2);
  ASSERT_EQ(att_rows.size(), 4u * 4);
  for (int t = 0; t < 4; ++t)
    for (int i = 0; i < 2; ++i) {
      double mean = 0;
      for (int s = 0; s <= t; ++s) mean += v_rows[s * 2 + i];
      mean /= t + 1;
      EXPECT_NEAR(att_rows[t * 4 + i], mean, 1e-6) << "head 0, position " << t;
      EXPECT_NEAR(att_rows[t * 4 + 2 + i], mean, 1e-6) << "head 1, position " << t;
    }
}

TEST_F(MinusculeModel, RopeRotatesByPositionRadians) {
  // head_dim 2: the only frequency is theta^0 = 1, so position p rotates by p radians.
  test::write_minuscule_model(dir, [](const std::string& n, size_t c) { return test::random_values(n, c, 11); });
  ReferenceBackend backend(ModelDir::open(dir.string()), 1);
  std::vector<float> qn, qr, kn, kr;
  backend.set_trace([&](const TracePoint& p) {
    auto grab = [&](std::vector<float>& to) { to.assign(p.data, p.data + p.rows * p.cols); };
    if (p.stage == TraceStage::q_norm) grab(qn);
    if (p.stage == TraceStage::q_rope) grab(qr);
    if (p.stage == TraceStage::k_norm) grab(kn);
    if (p.stage == TraceStage::k_rope) grab(kr);
  });
  auto kv = backend.create_kv(8);
  std::vector<int32_t> tokens = {3, 1, 4, 1, 5};
  backend.forward(*kv, tokens, {});
  for (int t = 0; t < 5; ++t) {
    const double c = std::cos(t), s = std::sin(t);
    for (int h = 0; h < 2; ++h) {
      const float a = qn[t * 4 + h * 2], b = qn[t * 4 + h * 2 + 1];
      EXPECT_NEAR(qr[t * 4 + h * 2], a * c - b * s, 1e-6);
      EXPECT_NEAR(qr[t * 4 + h * 2 + 1], b * c + a * s, 1e-6);
    }
    const float a = kn[t * 2], b = kn[t * 2 + 1];
    EXPECT_NEAR(kr[t * 2], a * c - b * s, 1e-6);
    EXPECT_NEAR(kr[t * 2 + 1], b * c + a * s, 1e-6);
  }
}

TEST_F(MinusculeModel, MatchesIndependentDoublePrecisionPass) {
  for (uint32_t seed : {1u, 2u, 3u}) {
    test::write_minuscule_model(dir, [seed](const std::string& n, size_t c) { return test::random_values(n, c, seed); });
    auto model = ModelDir::open(dir.string());
    auto backend = make_reference_backend(model, 2);
    test::NaiveQwen3 naive(*model);
    std::vector<int32_t> tokens = {5, 0, 7, 7, 2, 6, 1, 3, 3, 4};
    auto kv = backend->create_kv(16);
    auto r = backend->forward(*kv, tokens, ForwardWants{.all_positions = true, .full_logits = true});
    for (size_t t = 0; t < tokens.size(); ++t) {
      auto expected = naive.last_logits(std::vector<int32_t>(tokens.begin(), tokens.begin() + t + 1));
      for (int v = 0; v < 8; ++v)
        EXPECT_NEAR(r.positions[t].full[v], expected[v], 1e-5 * (1 + std::fabs(expected[v])))
            << "seed " << seed << " position " << t << " logit " << v;
    }
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace qwen3
