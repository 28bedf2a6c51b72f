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

// How a study's 8-bit inputs are made.
struct Act8 {
  int group = -1;         // columns per scale; 0: one scale per row
  int bfp_bits = 0;       // > 0: first requantize the row as the engine does (Q16, one shift keeping
                          // this many bits of its largest element: prep_input, bpf_ops/ops_vector.h)
  int fix_frac = 0;       // > 0: first round every input to this many fraction bits (a perturbation
                          // the size of a fixed-point activation stream's rounding)
  bool normed_only = false;  // only the inputs of QKV, gate/up and the vocabulary (RMSNorm outputs)
};

// A hook quantizing each input row per group of columns, as `a` says.
MatrixInputFn act8_hook(Act8 a, std::map<std::string, InputQuant> inputs);

}  // namespace qwen3::quant_study
