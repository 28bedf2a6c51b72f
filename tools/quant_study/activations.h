// 8-bit activations for qwen3-bpf-quant-study: every matrix product's input is
// quantized to int8 per group (q in -127..127, scale absmax/127, round to
// nearest) and read back, through the reference's matrix-input hook.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "reference/reference_backend.h"

namespace qwen3::quant_study {

// What one matrix input needs besides its values (keyed "attn_norm.L", "attention.L",
// "mlp_norm.L", "act.L", "final_norm").
struct InputQuant {
  std::vector<char> exact;  // columns the weights keep exact: their inputs stay float too
  std::vector<double> div;  // awq: the kernel quantizes x / div (scales folded upstream); empty: 1
};

// The calibration key of a matrix input stage, "" for other stages.
std::string input_key(TraceStage stage, int layer);

// A hook quantizing each input row per group of `group` columns (0: one scale per row).
MatrixInputFn act8_hook(int group, std::map<std::string, InputQuant> inputs);

}  // namespace qwen3::quant_study
