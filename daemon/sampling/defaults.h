// Which sampling parameters a generation uses: field by field, the value the
// request states, else the model's generation_config.json default, else the
// neutral value (greedy, no cut, no penalty). One request field changes only
// that field: a seed alone keeps the model's temperature (sampling stays on),
// and greedy decoding is asked for by stating temperature 0. The one place
// the rule lives; the gRPC and HTTP adapters only say which fields were given.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "engine/sampling_types.h"

namespace qwen3 {

struct ModelConfig;

// The defaults of a model directory's generation_config.json; nullopt: the
// file does not give the field. `do_sample: false` there makes the default
// greedy (temperature 0), as in Hugging Face transformers.
struct SamplingDefaults {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
};
SamplingDefaults sampling_defaults_of(const ModelConfig& model);

// Sampling as a request states it: nullopt = left unset.
// temperature 0 (or below kMinSamplingTemperature) = greedy; top_k 0 and
// top_p 0 or 1 = no cut; min_p 0 = none; repetition_penalty 0 or 1 = none;
// seed 0 = a random seed (reported back) when sampling.
struct SamplingRequest {
  std::optional<float> temperature, top_p, min_p, repetition_penalty;
  std::optional<int> top_k;
  std::optional<uint64_t> seed;
};

struct ResolvedSampling {
  SamplingParams params;
  bool random_seed = false;  // sampling with seed 0: the caller draws one and reports it
};

ResolvedSampling resolve_sampling(const SamplingRequest& request, const SamplingDefaults& defaults);
inline ResolvedSampling resolve_sampling(const SamplingRequest& request, const ModelConfig& model) {
  return resolve_sampling(request, sampling_defaults_of(model));
}

// The request field names, as gRPC's SamplingParams.set_fields and the HTTP
// body spell them. Returns false for any other name.
bool is_sampling_field(const std::string& name);

}  // namespace qwen3
