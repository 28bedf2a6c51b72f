// The reference's matrix-input hook (tools/quant_study's 8-bit activations):
// it sees the input of every matrix product with its shape, what it writes is
// what the product reads (and what the trace shows), and a hook that writes
// nothing, or none at all, leaves the logits bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "reference/reference_backend.h"
#include "test_models.h"

namespace qwen3 {
namespace {

using Seen = std::tuple<TraceStage, int, int, int>;  // stage, layer, rows, cols

TEST(MatrixInputHook, SeesEveryProductInputAndWhatItWritesIsRead) {
  auto model = ModelDir::open(test::generated_model("tiny"));
  const ModelConfig& c = model->config();
  ReferenceBackend b(model, 1);
  const std::vector<int32_t> tokens = {17, 4242, 9, 151000, 300, 77};
  const int T = static_cast<int>(tokens.size());
  auto run = [&] {
    auto kv = b.create_kv(T);
    return b.forward(*kv, tokens, ForwardWants{.all_positions = true, .full_logits = true});
  };
  const ForwardResult plain = run();

  std::vector<Seen> seen;
  b.set_matrix_input_hook([&](TraceStage s, int l, int rows, int cols, float*) { seen.emplace_back(s, l, rows, cols); });
  const ForwardResult watched = run();
  std::vector<Seen> want;
  for (int l = 0; l < c.num_hidden_layers; l++) {
    want.emplace_back(TraceStage::attn_norm, l, T, c.hidden_size);
    want.emplace_back(TraceStage::attention, l, T, c.q_dim());
    want.emplace_back(TraceStage::mlp_norm, l, T, c.hidden_size);
    want.emplace_back(TraceStage::act, l, T, c.intermediate_size);
  }
  want.emplace_back(TraceStage::final_norm, -1, T, c.hidden_size);
  EXPECT_EQ(seen, want);
  for (int p = 0; p < T; p++) EXPECT_EQ(watched.positions[p].full, plain.positions[p].full) << "position " << p;

  // Zeroing lm_head's input zeroes every logit: the product reads the hook's data.
  b.set_matrix_input_hook([](TraceStage s, int, int rows, int cols, float* d) {
    if (s == TraceStage::final_norm) std::fill(d, d + size_t(rows) * cols, 0.0f);
  });
  const ForwardResult zeroed = run();
  for (const auto& pos : zeroed.positions)
    EXPECT_TRUE(std::all_of(pos.full.begin(), pos.full.end(), [](float x) { return x == 0.0f; }));

  // Halving down's input in layer 0: the trace shows the halved values, the logits move.
  std::vector<float> traced_plain, traced_hooked;
  auto grab = [](std::vector<float>& out) {
    return [&out](const TracePoint& p) {
      if (p.stage == TraceStage::act && p.layer == 0) out.assign(p.data, p.data + size_t(p.rows) * p.cols);
    };
  };
  b.set_matrix_input_hook({});
  b.set_trace(grab(traced_plain));
  run();
  b.set_matrix_input_hook([](TraceStage s, int l, int rows, int cols, float* d) {
    if (s == TraceStage::act && l == 0) for (size_t i = 0; i < size_t(rows) * cols; i++) d[i] *= 0.5f;
  });
  b.set_trace(grab(traced_hooked));
  const ForwardResult halved = run();
  b.set_trace({});
  ASSERT_EQ(traced_hooked.size(), traced_plain.size());
  ASSERT_FALSE(traced_plain.empty());
  for (size_t i = 0; i < traced_plain.size(); i++) ASSERT_EQ(traced_hooked[i], traced_plain[i] * 0.5f) << i;
  EXPECT_NE(halved.positions[T - 1].full, plain.positions[T - 1].full);

  b.set_matrix_input_hook({});
  const ForwardResult off = run();
  for (int p = 0; p < T; p++) EXPECT_EQ(off.positions[p].full, plain.positions[p].full) << "position " << p;
}

}  // namespace
}  // namespace qwen3
