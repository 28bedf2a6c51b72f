// The RoPE cos/sin table (Q30) the attention program reads, one row per
// position: [head_dim/2] cos then [head_dim/2] sin of pos * theta^(-2i/d).
// Computed once at load in user space (double precision, then rounded):
// docs/numerics.md lists it as the one model-derived table not built in BPF.
#pragma once

#include <cstdint>

namespace qwen3::engine {

void fill_rope_table(int32_t* table, uint32_t positions, uint32_t head_dim, double theta);

}  // namespace qwen3::engine
