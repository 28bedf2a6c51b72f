#include "sampling/defaults.h"

#include <array>
#include <string_view>

#include "model/model_config.h"

namespace qwen3 {

namespace {

// generation_config.json gives 0 for "not set" in ModelConfig.
std::optional<float> given(double v) {
  if (v > 0) return static_cast<float>(v);
  return std::nullopt;
}

template <typename T>
T pick(const std::optional<T>& request, const std::optional<T>& model, T neutral) {
  if (request) return *request;
  if (model) return *model;
  return neutral;
}

}  // namespace

SamplingDefaults sampling_defaults_of(const ModelConfig& model) {
  SamplingDefaults d;
  // do_sample: false makes the default greedy whatever temperature says.
  d.temperature = model.default_do_sample ? given(model.default_temperature) : std::optional<float>(0.0f);
  if (model.default_top_k > 0) d.top_k = model.default_top_k;
  d.top_p = given(model.default_top_p);
  d.min_p = given(model.default_min_p);
  d.repetition_penalty = given(model.default_repetition_penalty);
  return d;
}

ResolvedSampling resolve_sampling(const SamplingRequest& r, const SamplingDefaults& d) {
  ResolvedSampling out;
  SamplingParams& p = out.params;
  p.temperature = pick(r.temperature, d.temperature, 0.0f);
  p.top_k = pick(r.top_k, d.top_k, 0);
  p.top_p = pick(r.top_p, d.top_p, 1.0f);
  if (p.top_p == 0.0f) p.top_p = 1.0f;  // 0: no cut, as the gRPC API documents
  p.min_p = pick(r.min_p, d.min_p, 0.0f);
  p.repetition_penalty = pick(r.repetition_penalty, d.repetition_penalty, 1.0f);
  if (p.repetition_penalty == 0.0f) p.repetition_penalty = 1.0f;  // 0: none
  p.seed = r.seed.value_or(0);
  out.random_seed = p.seed == 0 && p.temperature >= kMinSamplingTemperature;
  return out;
}

bool is_sampling_field(const std::string& name) {
  static constexpr std::array<std::string_view, 6> kFields = {"temperature", "top_k", "top_p",
                                                              "min_p", "repetition_penalty", "seed"};
  for (std::string_view f : kFields)
    if (name == f) return true;
  return false;
}

}  // namespace qwen3
