// The weight precision of the BPF engine, used end to end (options, plan,
// conversion, the bit-exact model). Its values are the QN_PREC_* codes the
// programs read from qn_shape.precision (bpf_ops/layout.h; checked in
// model_plan.cpp).
#pragma once

#include <cstdint>

namespace qwen3 {

// q4: the layers' qkv, o and gate/up matrices in 4-bit weights against
// 8-bit inputs, the rest in q8 (matrix_precision, model_plan.h). q8a8 is a
// matrix's format only, never a model's: the vocabulary of q8 models,
// q8 weights against 8-bit inputs (bpf_ops/numerics_q8a8.h).
enum class Precision : uint32_t { q24 = 0, q8 = 1, q4 = 2, q8a8 = 3 };

// Whether a matrix of format p has q8 row images (q8 codes and scales), stored
// as q8 or q8a8 blocks.
inline bool has_q8_rows(Precision p) { return p == Precision::q8 || p == Precision::q8a8; }

}  // namespace qwen3
