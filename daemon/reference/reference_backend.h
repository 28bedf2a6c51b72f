// The float32 CPU forward pass of Qwen3: the yardstick every kernel result is
// judged by. Weights stay as the checkpoint stores them (BF16 straight from
// the read-only mapping; F16 converted to float once); all arithmetic is float
// with a fixed summation order, so results are reproducible bit for bit.
#pragma once

#include <functional>
#include <memory>
#include <mutex>

#include "engine/backend.h"
#include "model/model_dir.h"

namespace qwen3 {

// Where in the forward pass a traced activation was taken.
enum class TraceStage {
  embedding,       // [tokens, hidden] rows of the embedding
  attn_norm,       // input_layernorm output
  q_proj, k_proj, v_proj,
  q_norm, k_norm,  // after per-head RMSNorm
  q_rope, k_rope,  // after RoPE (k_rope is what the KV cache stores)
  attention,       // attention output before o_proj [tokens, q_dim]
  o_proj,
  attn_residual,   // residual stream after the attention block
  mlp_norm,        // post_attention_layernorm output
  gate, up,
  act,             // silu(gate) * up
  down,
  residual,        // residual stream at the end of the layer
  final_norm,      // only reported positions
  logits,          // only reported positions, [rows, vocab]
};
const char* trace_stage_name(TraceStage s);

struct TracePoint {
  TraceStage stage;
  int layer;            // -1 outside the layers
  int first_position;   // position of row 0 in the sequence
  int rows, cols;       // row-major data, one row per token
  const float* data;
  // For final_norm / logits with only the last position reported, rows is 1
  // and first_position is that position.
};
using TraceFn = std::function<void(const TracePoint&)>;

// The input of a matrix product, writable, just before the product reads it:
// attn_norm (q, k, v), attention (o), mlp_norm (gate, up), act (down) and
// final_norm (lm_head). tools/quant_study quantizes it to study 8-bit
// activations; nothing else sets it.
using MatrixInputFn = std::function<void(TraceStage stage, int layer, int rows, int cols, float* data)>;

class ReferenceBackend : public Backend {
 public:
  ReferenceBackend(std::shared_ptr<const ModelDir> model, int threads);
  ~ReferenceBackend() override;

  const ModelConfig& config() const override;
  BackendInfo info() const override;
  std::unique_ptr<KvCache> create_kv(int max_context) override;
  ForwardResult forward(KvCache& kv, std::span<const int32_t> tokens, const ForwardWants& wants) override;

  // Called synchronously during forward() for every stage; empty to switch off.
  void set_trace(TraceFn fn);
  // Called before the trace of the same stage; empty (the default) to switch off.
  void set_matrix_input_hook(MatrixInputFn fn);

  struct Weights;

 private:
  std::shared_ptr<const ModelDir> model_;
  std::unique_ptr<Weights> weights_;
  TraceFn trace_;
  MatrixInputFn input_hook_;
  std::mutex mu_;  // one forward at a time (the thread pool is shared)
};

std::unique_ptr<Backend> make_reference_backend(std::shared_ptr<const ModelDir> model, int threads = 2);

}  // namespace qwen3
