// The weight precision of the BPF engine, used end to end (options, plan,
// conversion, the bit-exact model). Its values are the QN_PREC_* codes the
// programs read from qn_shape.precision (bpf_ops/layout.h; checked in
// model_plan.cpp).
#pragma once

#include <cstdint>

namespace qwen3 {

// q4: the layers' qkv, o and gate/up matrices in 4-bit weights against
// 8-bit inputs, the rest in q8 (matrix_precision, model_plan.h).
enum class Precision : uint32_t { q24 = 0, q8 = 1, q4 = 2 };

}  // namespace qwen3
