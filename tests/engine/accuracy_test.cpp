// How close the in-kernel forward pass comes to the float reference, judged
// where it means something (issue 10, docs/numerics.md):
//   - on the trained model (model/qwen3-kerneldoc, extracted by the
//     test_models fixture) over held-out passages of kernel documentation it
//     never saw: teacher-forced argmax agreement, near-ties apart, with the
//     bars q24 >= 99.5%, q8 >= 98%, q8 with the compact K/V >= 98%, and a
//     held-out perplexity close to the reference's;
//   - that the reference computes what the training framework computed (so
//     both the engine and the reference are judged against Qwen3 itself);
//   - on the random --outliers models, which stay as range and overflow
//     tests, q8 against the float reference run on the same dequantized q8
//     weights (>= 99%): the kernel's arithmetic, without int8's own error;
//     and q24 against float there (>= 99%). int8's own error on those random
//     models, and the compact K/V's, are documented in docs/numerics.md and
//     docs/kv-cache.md, not held at lowered bars.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agreement.h"
#include "engine/bpf_backend.h"
#include "model/model_dir.h"
#include "reference/reference_backend.h"
#include "test_backends.h"

namespace qwen3 {
namespace {

using test_support::Agreement;
using test_support::open_model;
using test_support::report_and_check;
using test_support::teacher_forced;

constexpr const char* kTrained = "trained";

Backend& reference(const std::string& model) { return test_support::reference_backend(model); }

Backend& bpf(const std::string& model, Precision prec, int kv_bits) {
  return test_support::bpf_backend(model, WeightPath::map, prec, kv_bits, 512);
}

// Held-out passages with the training framework's logits (tools/train/make_model.py).
const nlohmann::json& heldout() {
  static const nlohmann::json j = [] {
    std::ifstream in(QWEN3_TRAINED_HELDOUT);
    if (!in) throw std::runtime_error("cannot read " QWEN3_TRAINED_HELDOUT);
    return nlohmann::json::parse(in);
  }();
  return j;
}

std::vector<std::vector<int32_t>> heldout_prompts() {
  std::vector<std::vector<int32_t>> out;
  for (const auto& p : heldout()["prompts"]) out.push_back(p["ids"].get<std::vector<int32_t>>());
  return out;
}

const nlohmann::json& training_report() {
  static const nlohmann::json j = [] {
    std::ifstream in(test_support::models_dir() + "/" + kTrained + "/training_report.json");
    return nlohmann::json::parse(in);
  }();
  return j;
}

TEST(TrainedModel, IsTheShippedQwen3Shape) {
  const ModelConfig& c = open_model(kTrained)->config();
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_GE(heldout()["prompts"].size(), 20u);
}

// The reference reproduces PyTorch's logits on the exported BF16 weights: the
// export, the loader and the reference agree with an independent Qwen3.
TEST(TrainedModel, ReferenceReproducesTheTrainingFramework) {
  Backend& ref = reference(kTrained);
  ForwardWants w;
  w.all_positions = true;
  w.full_logits = true;
  double max_logit_err = 0, max_logprob_err = 0;
  int checked = 0;
  for (const auto& p : heldout()["prompts"]) {
    auto ids = p["ids"].get<std::vector<int32_t>>();
    auto kv = ref.create_kv(static_cast<int>(ids.size()));
    ForwardResult r = ref.forward(*kv, ids, w);
    ASSERT_EQ(r.positions.size(), ids.size());
    for (size_t pos = 0; pos < ids.size(); pos++) {
      const auto& full = r.positions[pos].full;
      const auto top_ids = p["top_ids"][pos].get<std::vector<int32_t>>();
      const auto top_logits = p["top_logits"][pos].get<std::vector<double>>();
      for (size_t k = 0; k < top_ids.size(); k++) {
        ASSERT_TRUE(top_ids[k] >= 0 && size_t(top_ids[k]) < full.size()) << "bad id in the held-out file";
        max_logit_err = std::max(max_logit_err, std::fabs(full[top_ids[k]] - top_logits[k]));
        checked++;
      }
      if (pos + 1 < ids.size()) {
        auto lp = reference::log_softmax(full);
        max_logprob_err = std::max(max_logprob_err, std::fabs(lp[ids[pos + 1]] - p["logprob_next"][pos].get<double>()));
      }
    }
  }
  std::printf("reference vs training framework: %d logits, max |difference| %.3g; max next-token logprob "
              "difference %.3g\n", checked, max_logit_err, max_logprob_err);
  EXPECT_GT(checked, 1000);
  EXPECT_LT(max_logit_err, 2e-3);
  EXPECT_LT(max_logprob_err, 2e-3);
}

// The bars on held-out text. Its perplexity, computed from the kernel's full
// logits, must stay within `ppl_ratio` of the reference's, and below the
// unigram baseline of the training report: the in-kernel model is a trained
// model that uses context, not a frequency table (a random model scores
// ~10^5). Whether the model is good enough (issue 10 asks for half the
// bigram's perplexity) is a property of the training run, measured in
// training_report.json and model/MODEL_CARD.md; CI never trains.
void check_trained(const std::string& what, Precision prec, int kv_bits, double bar, double ppl_ratio) {
  const Agreement a = teacher_forced(reference(kTrained), bpf(kTrained, prec, kv_bits), heldout_prompts());
  report_and_check(what, a, bar);
  EXPECT_LT(a.other_ppl(), training_report()["unigram_ppl"].get<double>()) << what;
  EXPECT_LT(a.other_ppl() / a.ref_ppl(), ppl_ratio) << what;
}

TEST(TrainedAccuracy, Q24) { check_trained("trained q24", Precision::q24, 16, 0.995, 1.01); }

TEST(TrainedAccuracy, Q8) { check_trained("trained q8", Precision::q8, 16, 0.98, 1.03); }

TEST(TrainedAccuracy, Q8CompactKv) { check_trained("trained q8 compact K/V", Precision::q8, 8, 0.98, 1.03); }

// q4 (4-bit attention and gate/up weights against 8-bit inputs), the
// checkpoint rounded offline by qwen3-bpf-quantize (GPTQ on calibration
// passages disjoint from the held-out text), judged against the float
// reference of the original: issue 26's ship bar for q4.
TEST(TrainedAccuracy, Q4Calibrated) {
  const Agreement a = teacher_forced(reference(kTrained), bpf("trained-q4", Precision::q4, 8), heldout_prompts());
  report_and_check("trained q4 (qwen3-bpf-quantize)", a, 0.98);
  EXPECT_LT(a.other_ppl() / a.ref_ppl(), 1.03);
}

// q4 rounded at load (no calibration: the daemon on a plain checkpoint) keeps
// the perplexity within the 3% but agrees on 96.6% of decisive positions, under
// the 98% bar, which is why the calibrated checkpoint above exists. This test
// holds it to the perplexity bar; the agreement is printed (docs/numerics.md).
TEST(TrainedAccuracy, Q4RoundedAtLoadPerplexityWithinThreePercent) {
  const Agreement a = teacher_forced(reference(kTrained), bpf(kTrained, Precision::q4, 8), heldout_prompts());
  report_and_check("trained q4, rounded at load", a, 0.0);
  EXPECT_LT(a.other_ppl() / a.ref_ppl(), 1.03);
}

// The prompts of the random-model tests (seed 2024, as tools/quant_study uses).
std::vector<std::vector<int32_t>> random_prompts(int n, int len) {
  std::mt19937_64 rng(2024);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; i++) out.push_back(test_support::random_prompt(rng, len, 151936));
  return out;
}

// q24 against float on the outlier models: the wide-range formats hold.
TEST(Accuracy, TeacherForcedQ24SmallOutliers) {
  report_and_check("q24 small-outliers", teacher_forced(reference("small-outliers"),
                                                        bpf("small-outliers", Precision::q24, 16), random_prompts(20, 52)),
                   0.99);
}

TEST(Accuracy, TeacherForcedQ24TinyOutliers) {
  report_and_check("q24 tiny-outliers", teacher_forced(reference("tiny-outliers"),
                                                       bpf("tiny-outliers", Precision::q24, 16), random_prompts(20, 52)),
                   0.99);
}

// The check itself: all near-ties (nothing decisive) fails instead of reading 100%.
TEST(Accuracy, CheckFailsWithoutDecisivePositions) {
  static Agreement all_ties;
  all_ties.positions = 1040;
  all_ties.near_ties = 1040;
  all_ties.near_tie_agree = 1040;
  EXPECT_NONFATAL_FAILURE(report_and_check("all near-ties", all_ties, 0.0), "too few decisive positions");
  static Agreement few;
  few.positions = 1040;
  few.near_ties = 1000;
  few.agree = 40;
  EXPECT_NONFATAL_FAILURE(report_and_check("40 decisive", few, 0.99), "too few decisive positions");
}

// The fixture writes <model>-q8-dequantized: every matrix exactly as the q8
// conversion stores it, read back as float (qwen3-bpf-quant-study ... engine).
class DequantizedTest : public testing::TestWithParam<std::string> {};

TEST_P(DequantizedTest, Q8MatchesTheReferenceOnItsOwnWeights) {
  const std::string model = GetParam();
  report_and_check("q8 vs dequantized reference, " + model,
                   teacher_forced(reference(model + "-q8-dequantized"), bpf(model, Precision::q8, 16),
                                  random_prompts(20, 52)),
                   0.99);
}

INSTANTIATE_TEST_SUITE_P(OutlierModels, DequantizedTest, testing::Values("tiny-outliers", "small-outliers"),
                         [](const auto& i) {
                           std::string n = i.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

}  // namespace
}  // namespace qwen3
