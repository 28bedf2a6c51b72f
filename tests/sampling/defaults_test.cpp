// sampling/defaults: a request's field wins, an unset field takes the
// model's generation_config.json default, and one field never moves another.
#include "sampling/defaults.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/config_parser.h"
#include "model/model_config.h"

namespace qwen3 {
namespace {

// The shipped model's generation_config.json, as the daemon parses it.
ModelConfig shipped_like() {
  ModelConfig c;
  c.vocab_size = 151936;
  merge_generation_config(c,
                          R"({"do_sample": true, "temperature": 0.7, "top_k": 20, "top_p": 0.9,
                              "min_p": 0.05, "repetition_penalty": 1.1, "eos_token_id": [151645]})",
                          "generation_config.json");
  return c;
}

void expect_params(const SamplingParams& p, float temperature, int top_k, float top_p, float min_p, float penalty,
                   uint64_t seed, const std::string& what) {
  EXPECT_FLOAT_EQ(p.temperature, temperature) << what;
  EXPECT_EQ(p.top_k, top_k) << what;
  EXPECT_FLOAT_EQ(p.top_p, top_p) << what;
  EXPECT_FLOAT_EQ(p.min_p, min_p) << what;
  EXPECT_FLOAT_EQ(p.repetition_penalty, penalty) << what;
  EXPECT_EQ(p.seed, seed) << what;
}

TEST(SamplingDefaults, EveryUnsetFieldTakesTheGenerationConfig) {
  const ResolvedSampling r = resolve_sampling(SamplingRequest{}, shipped_like());
  // Issue 24: repetition_penalty and min_p used to be dropped (1.0 and 0).
  expect_params(r.params, 0.7f, 20, 0.9f, 0.05f, 1.1f, 0, "no field set");
  EXPECT_TRUE(r.random_seed);
}

TEST(SamplingDefaults, OneRequestFieldChangesOnlyThatField) {
  struct Case {
    std::string what;
    std::function<void(SamplingRequest&)> set;
    SamplingParams want;
  };
  const SamplingParams base{0.7f, 20, 0.9f, 0.05f, 1.1f, 0};
  auto with = [&](std::function<void(SamplingParams&)> f) {
    SamplingParams p = base;
    f(p);
    return p;
  };
  const std::vector<Case> cases = {
      {"seed", [](SamplingRequest& r) { r.seed = 42; }, with([](SamplingParams& p) { p.seed = 42; })},
      {"temperature 0 (greedy)", [](SamplingRequest& r) { r.temperature = 0.0f; },
       with([](SamplingParams& p) { p.temperature = 0; })},
      {"temperature", [](SamplingRequest& r) { r.temperature = 1.3f; }, with([](SamplingParams& p) { p.temperature = 1.3f; })},
      {"top_k 0 (off)", [](SamplingRequest& r) { r.top_k = 0; }, with([](SamplingParams& p) { p.top_k = 0; })},
      {"top_p", [](SamplingRequest& r) { r.top_p = 0.5f; }, with([](SamplingParams& p) { p.top_p = 0.5f; })},
      {"top_p 0 (off)", [](SamplingRequest& r) { r.top_p = 0.0f; }, with([](SamplingParams& p) { p.top_p = 1.0f; })},
      {"min_p 0 (off)", [](SamplingRequest& r) { r.min_p = 0.0f; }, with([](SamplingParams& p) { p.min_p = 0; })},
      {"repetition_penalty 1 (off)", [](SamplingRequest& r) { r.repetition_penalty = 1.0f; },
       with([](SamplingParams& p) { p.repetition_penalty = 1.0f; })},
      {"repetition_penalty 0 (off)", [](SamplingRequest& r) { r.repetition_penalty = 0.0f; },
       with([](SamplingParams& p) { p.repetition_penalty = 1.0f; })},
  };
  for (const Case& c : cases) {
    SamplingRequest req;
    c.set(req);
    const ResolvedSampling r = resolve_sampling(req, shipped_like());
    expect_params(r.params, c.want.temperature, c.want.top_k, c.want.top_p, c.want.min_p, c.want.repetition_penalty,
                  c.want.seed, c.what);
  }
  // A seed alone keeps sampling on (issue 24: it used to mean greedy).
  SamplingRequest seeded;
  seeded.seed = 42;
  EXPECT_GE(resolve_sampling(seeded, shipped_like()).params.temperature, kMinSamplingTemperature);
  EXPECT_FALSE(resolve_sampling(seeded, shipped_like()).random_seed);
}

TEST(SamplingDefaults, WithoutGenerationConfigUnsetFieldsAreNeutral) {
  ModelConfig plain;
  const ResolvedSampling r = resolve_sampling(SamplingRequest{}, plain);
  expect_params(r.params, 0.0f, 0, 1.0f, 0.0f, 1.0f, 0, "no generation_config");
  EXPECT_FALSE(r.random_seed);  // greedy needs no seed
  SamplingRequest warm;
  warm.temperature = 0.8f;
  expect_params(resolve_sampling(warm, plain).params, 0.8f, 0, 1.0f, 0.0f, 1.0f, 0, "temperature only");
}

TEST(SamplingDefaults, DoSampleFalseMakesTheDefaultGreedy) {
  ModelConfig c;
  c.vocab_size = 100;
  merge_generation_config(c, R"({"do_sample": false, "temperature": 0.6, "repetition_penalty": 1.2})", "g.json");
  const ResolvedSampling r = resolve_sampling(SamplingRequest{}, c);
  EXPECT_FLOAT_EQ(r.params.temperature, 0.0f);
  EXPECT_FLOAT_EQ(r.params.repetition_penalty, 1.2f);  // still applies to the greedy choice
  SamplingRequest warm;
  warm.temperature = 0.9f;
  EXPECT_FLOAT_EQ(resolve_sampling(warm, c).params.temperature, 0.9f);
}

TEST(SamplingDefaults, GenerationConfigValuesOutOfRangeNameTheKey) {
  ModelConfig c;
  c.vocab_size = 100;
  for (const char* bad : {R"({"repetition_penalty": -1})", R"({"min_p": 1.0})", R"({"do_sample": "yes"})",
                          R"({"repetition_penalty": 0.0001})"}) {
    try {
      merge_generation_config(c, bad, "gen.json");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("gen.json"), std::string::npos) << e.what();
    }
  }
}

TEST(SamplingDefaults, FieldNamesAreTheApisNames) {
  for (const char* f : {"temperature", "top_k", "top_p", "min_p", "repetition_penalty", "seed"})
    EXPECT_TRUE(is_sampling_field(f)) << f;
  for (const char* f : {"", "temp", "max_tokens", "Temperature"}) EXPECT_FALSE(is_sampling_field(f)) << f;
}

}  // namespace
}  // namespace qwen3
