// The reference on the generated models: agreement with the independent pass
// (BF16 weights, grouped-query attention, planted outliers), and the
// properties the generator promises (outlier magnitudes, logits that are not flat).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include <nlohmann/json.hpp>

#include "common/mapped_file.h"
#include "naive_qwen3.h"
#include "reference/reference_backend.h"
#include "test_models.h"

namespace qwen3 {
namespace {

std::vector<int32_t> random_tokens(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> ids(0, 151642);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = ids(rng);
  return t;
}

void expect_matches_naive(const std::string& name, int positions) {
  auto model = ModelDir::open(test::generated_model(name));
  auto backend = make_reference_backend(model, 2);
  test::NaiveQwen3 naive(*model);
  auto tokens = random_tokens(positions, 99);
  auto kv = backend->create_kv(positions);
  auto r = backend->forward(*kv, tokens, ForwardWants{.all_positions = true, .full_logits = true});
  for (int t = 0; t < positions; ++t) {
    auto expected = naive.last_logits(std::vector<int32_t>(tokens.begin(), tokens.begin() + t + 1));
    double worst = 0, scale = 0;
    for (size_t v = 0; v < expected.size(); ++v) {
      worst = std::max(worst, std::fabs(r.positions[t].full[v] - expected[v]));
      scale = std::max(scale, std::fabs(expected[v]));
    }
    EXPECT_LT(worst, 2e-5 * scale + 1e-4) << name << " position " << t << " (largest logit " << scale << ")";
    EXPECT_EQ(r.positions[t].argmax, std::max_element(expected.begin(), expected.end()) - expected.begin());
  }
}

TEST(GeneratedModelReference, TinyMatchesIndependentPass) { expect_matches_naive("tiny", 5); }
TEST(GeneratedModelReference, TinyOutliersMatchesIndependentPass) { expect_matches_naive("tiny-outliers", 5); }
TEST(GeneratedModelReference, SmallOutliersMatchesIndependentPass) { expect_matches_naive("small-outliers", 3); }

struct Stats {
  std::vector<double> max_outlier, max_other;  // per residual stage (embedding, layers)
  std::vector<double> logit_std, margin;
  int copies = 0;  // argmax == the input token
};

Stats measure(const std::string& name, int prompts, int length) {
  auto model = ModelDir::open(test::generated_model(name));
  ReferenceBackend backend(model, 2);
  const int L = model->config().num_hidden_layers;
  std::vector<int> outliers;
  auto cfg = nlohmann::json::parse(read_text_file(test::generated_model(name) + "/config.json"));
  if (cfg["qwen3_bpf_generated"].contains("outlier_channels"))
    outliers = cfg["qwen3_bpf_generated"]["outlier_channels"].get<std::vector<int>>();
  Stats s;
  s.max_outlier.assign(L + 1, 0);
  s.max_other.assign(L + 1, 0);
  backend.set_trace([&](const TracePoint& p) {
    int slot = p.stage == TraceStage::embedding ? 0 : p.stage == TraceStage::residual ? p.layer + 1 : -1;
    if (slot < 0) return;
    for (int r = 0; r < p.rows; ++r)
      for (int ch = 0; ch < p.cols; ++ch) {
        double v = std::fabs(p.data[r * p.cols + ch]);
        auto& slot_max = std::count(outliers.begin(), outliers.end(), ch) ? s.max_outlier : s.max_other;
        slot_max[slot] = std::max(slot_max[slot], v);
      }
  });
  for (int p = 0; p < prompts; ++p) {
    auto tokens = random_tokens(length, 1000 + p);
    auto kv = backend.create_kv(length);
    auto r = backend.forward(*kv, tokens, ForwardWants{.all_positions = true, .full_logits = true});
    for (int t = 0; t < length; ++t) {
      const auto& f = r.positions[t].full;
      double mean = 0, sq = 0;
      for (float v : f) mean += v;
      mean /= f.size();
      for (float v : f) sq += (v - mean) * (v - mean);
      s.logit_std.push_back(std::sqrt(sq / f.size()));
      std::vector<float> top(f.begin(), f.end());
      std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<float>());
      s.margin.push_back(top[0] - top[1]);
      if (r.positions[t].argmax == tokens[t]) ++s.copies;
    }
  }
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

TEST(GeneratedModelReference, OutlierChannelsCarryHundredsOthersStaySmall) {
  for (const char* name : {"tiny-outliers", "small-outliers"}) {
    Stats s = measure(name, 2, 48);
    EXPECT_GE(s.max_outlier[0], 100.0) << name << " embedding";
    for (size_t stage = 1; stage < s.max_outlier.size(); ++stage) {
      EXPECT_GE(s.max_outlier[stage], 300.0) << name << " layer " << stage - 1;
      EXPECT_LE(s.max_outlier[stage], 3000.0) << name << " layer " << stage - 1;
      EXPECT_LE(s.max_other[stage], 150.0) << name << " layer " << stage - 1;
    }
  }
  Stats plain = measure("tiny", 1, 16);
  for (double m : plain.max_other) EXPECT_LE(m, 50.0);
  for (double m : plain.max_outlier) EXPECT_EQ(m, 0.0);  // no outlier channels declared
}

TEST(GeneratedModelReference, LogitsAreNotFlat) {
  for (const char* name : {"tiny", "tiny-outliers", "small-outliers"}) {
    Stats s = measure(name, 4, 32);
    const double n = static_cast<double>(s.margin.size());
    EXPECT_GE(median(s.logit_std), 1.5) << name;
    EXPECT_GE(median(s.margin), 0.2) << name;
    EXPECT_LE(std::count_if(s.margin.begin(), s.margin.end(), [](double m) { return m < 0.05; }) / n, 0.15) << name;
    EXPECT_LE(s.copies / n, 0.15) << name << ": the model mostly repeats its input";
  }
}

}  // namespace
}  // namespace qwen3
