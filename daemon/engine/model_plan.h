// Where every converted tensor lives and how big every BPF buffer is, derived
// from the model config alone (before any weight is read): the weight matrices
// (their row layout, map entries or arena offsets), the norm weights, and the
// ProgramLayout the BPF object is sized with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/bpf_programs.h"
#include "engine/precision.h"
#include "model/model_config.h"

namespace qwen3::engine {

enum class MatrixKind { qkv, o, gate_up, down, embed, lm_head };

struct MatrixPlan {
  MatrixKind kind;
  int layer = -1;             // -1 for embed / lm_head
  uint32_t rows = 0, cols = 0;
  qn_matrix m{};              // act_bits filled by the conversion; row_bytes: bytes of a unit
  Precision precision = Precision::q24;  // of this matrix's rows (matrix_precision)
  uint64_t offset = 0;        // byte offset of unit 0 in the weights region
  // Rows are stored in units (layout.h: a q24 row, a q8 block of 8 rows, a q4 block of 16).
  uint32_t unit_rows() const { return qn_unit_rows(static_cast<uint32_t>(precision)); }
  uint32_t units() const { return qn_units_for(static_cast<uint32_t>(precision), rows); }
  uint64_t unit_offset(uint32_t u) const;  // byte offset of unit u in the weights region
};

struct NormOffsets {
  uint32_t input = 0, post = 0, q = 0, k = 0;  // int32 element offsets in the norms map
};

struct ModelPlan {
  ProgramLayout layout;
  std::vector<MatrixPlan> matrices;   // per layer: qkv, o, gate_up, down; then embed, lm_head
  std::vector<NormOffsets> norms;     // per layer
  uint32_t final_norm = 0;
  bool tied = false;                  // lm_head is the embed matrix
  uint64_t weight_bytes = 0;          // bytes the converted weights occupy

  const MatrixPlan& layer_matrix(int layer, MatrixKind kind) const;
  const MatrixPlan& embed() const;
  const MatrixPlan& lm_head() const;
};

// The row format of a `kind` matrix in a model of precision `model`
// (qn_op_format, op_args.h: q4 models keep down_proj, the embedding and the
// vocabulary projection at q8).
Precision matrix_precision(Precision model, MatrixKind kind);

uint32_t pad_to_group(uint32_t n);
uint32_t row_bytes_for(uint32_t cols, Precision p);   // one row image (layout.h)
uint32_t unit_bytes_for(uint32_t cols, Precision p);  // one stored unit

// The matmul rows [begin, end) of worker t of T over `rows` output rows
// (gate/up: row pairs), split at whole steps of the block kernels (a q8
// block is 8 rows or 4 gate/up pairs, a q4 block 16 or 8) so that no block
// is shared by two workers.
struct RowRange {
  uint32_t begin = 0, end = 0;
};
RowRange worker_rows(uint32_t rows, bool pairs, Precision p, uint32_t t, uint32_t T);

// The longest session the engine plans for: `requested` when positive (at most
// 4 x 40960), else the config's max_position_embeddings (4096 when absent)
// capped at 40960.
uint32_t engine_max_context(const ModelConfig& c, int requested);

// max_ctx: longest KV cache any session may ask for (also RoPE table rows);
// threads: worker threads, 1 .. QN_THREADS_LIMIT (per-worker maps are sized to it).
ModelPlan make_model_plan(const ModelConfig& c, Precision precision, bool arena, uint32_t threads, uint32_t max_ctx,
                          uint32_t kv_bits = 16);

}  // namespace qwen3::engine
