#include "engine/rope_table.h"

#include <cstddef>

#include "engine/bpf_programs.h"
#include "common/worker_pool.h"
#include "numerics_rope.h"

namespace qwen3::engine {

void fill_rope_table(BpfPrograms& progs, WorkerPool& pool) {
  const uint32_t positions = progs.layout().rope_positions;
  pool.run([&](int t) {
    const uint64_t T = static_cast<uint64_t>(pool.size());
    qn_args a{};
    a.op = QN_OP_ROPE;
    a.thread = static_cast<uint32_t>(t);
    a.row_begin = static_cast<uint32_t>(positions * uint64_t(t) / T);
    a.row_end = static_cast<uint32_t>(positions * uint64_t(t + 1) / T);
    if (a.row_begin < a.row_end) progs.rope_table(a);
  });
}

// Frequency outer, position inner: the order of ops_rope.h (each element is
// independent, so the order only matters for speed).
void rope_table_model(int32_t* table, uint32_t positions, uint32_t head_dim, uint64_t theta_q16) {
  const uint32_t half = head_dim / 2;
  const uint64_t l2 = qn_log2_q16_q57(theta_q16);
  for (uint32_t i = 0; i < half; i++) {
    const uint64_t f = qn_rope_freq_q64(l2, i, head_dim);
    for (uint32_t p = 0; p < positions; p++) {
      int32_t* row = table + size_t(p) * head_dim;
      qn_sincos_turns(uint64_t(p) * f, &row[i], &row[half + i]);
    }
  }
}

}  // namespace qwen3::engine
