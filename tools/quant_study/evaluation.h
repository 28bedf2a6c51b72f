// How qwen3-bpf-quant-study scores a variant against the float reference:
// teacher-forced argmax agreement (near-ties apart), mean KL, and perplexity.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/backend.h"

namespace qwen3::quant_study {

struct Agreement {
  int positions = 0, agree = 0, near_ties = 0, near_tie_agree = 0;
  double kl_sum = 0, err_sum = 0;
  double nll_ref = 0, nll = 0;  // next-token negative log-likelihood summed, reference and variant
  int scored = 0;               // positions with a next token
  double ref_ppl() const;
  double ppl() const;
};

// Adds one prompt's positions: r from the reference, b from the variant, ids the prompt.
void accumulate(Agreement& a, const std::vector<int32_t>& ids, const ForwardResult& r, const ForwardResult& b);

// The "ids" of every entry of "prompts" in a held-out JSON (tests/engine/trained_heldout.json's form).
std::vector<std::vector<int32_t>> load_passages(const std::string& path);
// As tests/engine: mostly ids from the first 20k, some from anywhere.
std::vector<std::vector<int32_t>> random_prompts(std::mt19937_64& rng, int n, int len, int vocab);

}  // namespace qwen3::quant_study
