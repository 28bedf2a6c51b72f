// The RoPE cos/sin table (Q30) the attention program reads, one row per
// position: [head_dim/2] cos then [head_dim/2] sin of pos * theta^(-2i/d).
// The engine computes it in BPF at load (qn_rope_table, bpf_ops/ops_rope.h,
// fixed point: numerics.h); rope_table_model is its bit-exact C++ model.
#pragma once

#include <cstdint>

namespace qwen3 {
class WorkerPool;
}

namespace qwen3::engine {

class BpfPrograms;

// Fills progs.rope() (its layout's rope_positions rows) in the kernel, the
// positions split over the pool's workers.
void fill_rope_table(BpfPrograms& progs, WorkerPool& pool);

// The same integers in user space (tests): theta_q16 = rope_theta * 2^16.
void rope_table_model(int32_t* table, uint32_t positions, uint32_t head_dim, uint64_t theta_q16);

}  // namespace qwen3::engine
