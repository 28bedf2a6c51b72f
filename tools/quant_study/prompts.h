// The prompts qwen3-bpf-quant-study scores a variant on (the score itself is
// reference/agreement.h: the metric the accuracy tests use).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/backend.h"

namespace qwen3::quant_study {

// The "ids" of every entry of "prompts" in a held-out JSON (tests/engine/trained_heldout.json's form).
std::vector<std::vector<int32_t>> load_passages(const std::string& path);
// As tests/engine: mostly ids from the first 20k, some from anywhere.
std::vector<std::vector<int32_t>> random_prompts(std::mt19937_64& rng, int n, int len, int vocab);

}  // namespace qwen3::quant_study
