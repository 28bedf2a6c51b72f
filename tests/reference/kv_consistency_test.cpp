// The reference as a Backend: feeding tokens one at a time, in chunks or all
// at once gives the same logits; rollback; thread count does not change bits;
// bad input throws and leaves the cache as it was.
#include <gtest/gtest.h>

#include <random>

#include "common/error.h"
#include "reference/reference_backend.h"
#include "test_models.h"

namespace qwen3 {
namespace {

std::vector<int32_t> prompt(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> ids(0, 151935);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = ids(rng);
  return t;
}

// Full logits of every position, fed in chunks of `chunk` tokens.
std::vector<std::vector<float>> run_chunked(Backend& b, const std::vector<int32_t>& tokens, int chunk) {
  auto kv = b.create_kv(static_cast<int>(tokens.size()));
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < tokens.size(); i += chunk) {
    size_t n = std::min<size_t>(chunk, tokens.size() - i);
    auto r = b.forward(*kv, std::span<const int32_t>(tokens.data() + i, n),
                       ForwardWants{.all_positions = true, .full_logits = true});
    EXPECT_EQ(r.positions.size(), n);
    for (auto& p : r.positions) out.push_back(std::move(p.full));
  }
  EXPECT_EQ(kv->positions(), static_cast<int>(tokens.size()));
  return out;
}

class ReferenceBackendTest : public ::testing::TestWithParam<const char*> {
 protected:
  std::shared_ptr<const ModelDir> model = ModelDir::open(test::generated_model(GetParam()));
};

TEST_P(ReferenceBackendTest, IncrementalEqualsBatchedEqualsChunked) {
  auto b = make_reference_backend(model, 2);
  auto tokens = prompt(21, 5);
  auto all = run_chunked(*b, tokens, 21);
  auto one = run_chunked(*b, tokens, 1);
  auto five = run_chunked(*b, tokens, 5);
  ASSERT_EQ(all.size(), tokens.size());
  for (size_t t = 0; t < tokens.size(); ++t) {
    // Each logit is computed by the same arithmetic in the same order, whatever the batch.
    EXPECT_EQ(all[t], one[t]) << "position " << t;
    EXPECT_EQ(all[t], five[t]) << "position " << t;
  }
}

TEST_P(ReferenceBackendTest, LastPositionAndTopKAgreeWithFullLogits) {
  auto b = make_reference_backend(model, 2);
  auto tokens = prompt(9, 6);
  auto kv = b->create_kv(16);
  auto full = b->forward(*kv, tokens, ForwardWants{.full_logits = true});
  ASSERT_EQ(full.positions.size(), 1u);
  auto kv2 = b->create_kv(16);
  auto top = b->forward(*kv2, tokens, ForwardWants{.top_k = 10});
  const auto& f = full.positions[0].full;
  const auto& k = top.positions[0].top_k;
  ASSERT_EQ(k.size(), 10u);
  EXPECT_TRUE(top.positions[0].full.empty());
  EXPECT_EQ(k[0].first, full.positions[0].argmax);
  EXPECT_EQ(top.positions[0].argmax, full.positions[0].argmax);
  for (size_t i = 0; i < k.size(); ++i) {
    EXPECT_EQ(k[i].second, f[k[i].first]);
    if (i) {
      EXPECT_GE(k[i - 1].second, k[i].second);
    }
  }
  // Nothing outside the top-k beats its last entry.
  int beating = 0;
  for (float v : f) beating += v > k.back().second;
  EXPECT_LE(beating, 9);
  EXPECT_EQ(*std::max_element(f.begin(), f.end()), f[full.positions[0].argmax]);
}

TEST_P(ReferenceBackendTest, ThreadCountDoesNotChangeResults) {
  auto b1 = make_reference_backend(model, 1);
  auto b2 = make_reference_backend(model, 2);
  auto tokens = prompt(12, 7);
  EXPECT_EQ(run_chunked(*b1, tokens, 12), run_chunked(*b2, tokens, 12));
}

TEST_P(ReferenceBackendTest, TruncateRollsBack) {
  auto b = make_reference_backend(model, 2);
  auto tokens = prompt(10, 8);
  auto kv = b->create_kv(10);
  auto first = b->forward(*kv, tokens, ForwardWants{.all_positions = true, .full_logits = true});
  kv->truncate(6);
  EXPECT_EQ(kv->positions(), 6);
  auto again = b->forward(*kv, std::span<const int32_t>(tokens.data() + 6, 4),
                          ForwardWants{.all_positions = true, .full_logits = true});
  for (int i = 0; i < 4; ++i) EXPECT_EQ(again.positions[i].full, first.positions[6 + i].full);
  EXPECT_THROW(kv->truncate(11), Error);
  EXPECT_THROW(kv->truncate(-1), Error);
}

TEST_P(ReferenceBackendTest, BadInputThrowsAndLeavesCacheUnchanged) {
  auto b = make_reference_backend(model, 2);
  auto tokens = prompt(6, 9);
  auto kv = b->create_kv(8);
  b->forward(*kv, std::span<const int32_t>(tokens.data(), 4), {});
  const size_t bytes = kv->bytes();
  EXPECT_GT(bytes, 0u);
  auto expect_invalid = [&](std::vector<int32_t> bad, const char* fragment) {
    try {
      b->forward(*kv, bad, {});
      ADD_FAILURE() << "no error for " << fragment;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
    EXPECT_EQ(kv->positions(), 4);
  };
  expect_invalid({1, 151936}, "151936");
  expect_invalid({-1}, "-1");
  expect_invalid({1, 2, 3, 4, 5}, "context overflow");
  expect_invalid({}, "at least one token");
  // After the failures, the cache continues exactly as an undisturbed one.
  auto rest = b->forward(*kv, std::span<const int32_t>(tokens.data() + 4, 2), ForwardWants{.full_logits = true});
  auto fresh = b->create_kv(8);
  auto expected = b->forward(*fresh, tokens, ForwardWants{.full_logits = true});
  EXPECT_EQ(rest.positions[0].full, expected.positions[0].full);
}

TEST_P(ReferenceBackendTest, KvLimitsAndOwnership) {
  auto b = make_reference_backend(model, 2);
  EXPECT_THROW(b->create_kv(0), Error);
  try {
    b->create_kv(model->config().max_position_embeddings + 1);
    ADD_FAILURE() << "oversized KV cache accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::resource_exhausted);
  }
  auto other = make_reference_backend(model, 1);
  auto foreign = other->create_kv(4);
  std::vector<int32_t> t = {1};
  EXPECT_THROW(b->forward(*foreign, t, {}), Error);
  auto kv = b->create_kv(4);
  EXPECT_EQ(kv->max_context(), 4);
  EXPECT_EQ(kv->positions(), 0);
  BackendInfo info = b->info();
  EXPECT_EQ(info.name, "reference");
  EXPECT_EQ(info.precision, "f32");
  EXPECT_GE(info.weight_bytes, model->tensor_bytes());
  EXPECT_EQ(b->config().hidden_size, model->config().hidden_size);
}

INSTANTIATE_TEST_SUITE_P(GeneratedModels, ReferenceBackendTest,
                         ::testing::Values("tiny", "tiny-outliers", "small-outliers"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace qwen3
