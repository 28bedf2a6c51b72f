#include "reference/reference_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "model/dtype.h"
#include "reference/matmul.h"
#include "reference/ops.h"
#include "reference/thread_pool.h"

namespace qwen3 {

using reference::ThreadPool;

const char* trace_stage_name(TraceStage s) {
  switch (s) {
    case TraceStage::embedding: return "embedding";
    case TraceStage::attn_norm: return "attn_norm";
    case TraceStage::q_proj: return "q_proj";
    case TraceStage::k_proj: return "k_proj";
    case TraceStage::v_proj: return "v_proj";
    case TraceStage::q_norm: return "q_norm";
    case TraceStage::k_norm: return "k_norm";
    case TraceStage::q_rope: return "q_rope";
    case TraceStage::k_rope: return "k_rope";
    case TraceStage::attention: return "attention";
    case TraceStage::o_proj: return "o_proj";
    case TraceStage::attn_residual: return "attn_residual";
    case TraceStage::mlp_norm: return "mlp_norm";
    case TraceStage::gate: return "gate";
    case TraceStage::up: return "up";
    case TraceStage::act: return "act";
    case TraceStage::down: return "down";
    case TraceStage::residual: return "residual";
    case TraceStage::final_norm: return "final_norm";
    case TraceStage::logits: return "logits";
  }
  return "?";
}

namespace {

// A weight matrix as the checkpoint stores it: BF16 read in place from the
// mapping when it is aligned, otherwise float (F16/F32/unaligned) owned here.
struct Matrix {
  int64_t rows = 0, cols = 0;
  const uint16_t* bf16 = nullptr;
  const float* f32 = nullptr;
  std::vector<uint16_t> owned16;
  std::vector<float> owned32;
  size_t bytes = 0;

  explicit Matrix(const TensorView& t) : rows(t.rows()), cols(t.cols()) {
    const auto addr = reinterpret_cast<uintptr_t>(t.data);
    if (t.dtype == DType::bf16) {
      if (addr % 2 == 0) {
        bf16 = reinterpret_cast<const uint16_t*>(t.data);
      } else {
        owned16.resize(t.numel());
        std::memcpy(owned16.data(), t.data, t.nbytes);
        bf16 = owned16.data();
      }
      bytes = t.nbytes;
    } else {
      owned32.resize(t.numel());
      t.to_float(owned32);
      f32 = owned32.data();
      bytes = owned32.size() * 4;
    }
  }

  // y[t][r] for all rows, split over the pool when the product is big enough.
  void multiply(const float* x, int64_t tokens, float* y, ThreadPool& pool) const {
    auto part = [&](int64_t r0, int64_t r1) {
      if (bf16)
        reference::matmul_bf16(x, tokens, cols, bf16, r0, r1, y, rows);
      else
        reference::matmul_f32(x, tokens, cols, f32, r0, r1, y, rows);
    };
    if (tokens * rows * cols < (1 << 16))
      part(0, rows);
    else
      pool.parallel_for(rows, 16, part);
  }

  void row_to_float(int64_t r, float* out) const {
    if (bf16)
      for (int64_t i = 0; i < cols; ++i) out[i] = bf16_to_float(bf16[r * cols + i]);
    else
      std::memcpy(out, f32 + r * cols, cols * 4);
  }
};

std::vector<float> vector_of(const TensorView& t) {
  std::vector<float> v(t.numel());
  t.to_float(v);
  return v;
}

struct Layer {
  std::vector<float> in_norm, post_norm, q_norm, k_norm;
  Matrix q, k, v, o, gate, up, down;
  Layer(const ModelDir& m, int l)
      : in_norm(vector_of(m.layer_tensor(l, "input_layernorm.weight"))),
        post_norm(vector_of(m.layer_tensor(l, "post_attention_layernorm.weight"))),
        q_norm(vector_of(m.layer_tensor(l, "self_attn.q_norm.weight"))),
        k_norm(vector_of(m.layer_tensor(l, "self_attn.k_norm.weight"))),
        q(m.layer_tensor(l, "self_attn.q_proj.weight")),
        k(m.layer_tensor(l, "self_attn.k_proj.weight")),
        v(m.layer_tensor(l, "self_attn.v_proj.weight")),
        o(m.layer_tensor(l, "self_attn.o_proj.weight")),
        gate(m.layer_tensor(l, "mlp.gate_proj.weight")),
        up(m.layer_tensor(l, "mlp.up_proj.weight")),
        down(m.layer_tensor(l, "mlp.down_proj.weight")) {}
};

// Float K/V per layer, grown on demand up to max_context.
class ReferenceKv : public KvCache {
 public:
  ReferenceKv(const void* owner, int layers, int kv_dim, int max_context)
      : owner_(owner), kv_dim_(kv_dim), max_context_(max_context), k_(layers), v_(layers) {}
  int positions() const override { return positions_; }
  int max_context() const override { return max_context_; }
  size_t bytes() const override { return static_cast<size_t>(capacity_) * k_.size() * 2 * kv_dim_ * sizeof(float); }
  void truncate(int n) override {
    if (n < 0 || n > positions_)
      throw invalid_argument("KV truncate to " + std::to_string(n) + " outside [0, " + std::to_string(positions_) +
                             "]");
    positions_ = n;
  }

  const void* owner() const { return owner_; }
  void reserve(int n) {
    if (n <= capacity_) return;
    int cap = std::min(max_context_, std::max(n, capacity_ * 2));
    for (size_t l = 0; l < k_.size(); ++l) {
      k_[l].resize(static_cast<size_t>(cap) * kv_dim_);
      v_[l].resize(static_cast<size_t>(cap) * kv_dim_);
    }
    capacity_ = cap;
  }
  float* k(int layer) { return k_[layer].data(); }
  float* v(int layer) { return v_[layer].data(); }
  void commit(int n) { positions_ = n; }

 private:
  const void* owner_;
  int kv_dim_, max_context_;
  int positions_ = 0, capacity_ = 0;
  std::vector<std::vector<float>> k_, v_;
};

}  // namespace

struct ReferenceBackend::Weights {
  ModelConfig config;
  Matrix embed;
  Matrix lm_head;
  std::vector<float> final_norm;
  std::vector<Layer> layers;
  ThreadPool pool;

  Weights(const ModelDir& m, int threads)
      : config(m.config()),
        embed(m.embed_tokens()),
        lm_head(m.lm_head()),
        final_norm(vector_of(m.tensor("model.norm.weight"))),
        pool(threads) {
    layers.reserve(config.num_hidden_layers);
    for (int l = 0; l < config.num_hidden_layers; ++l) layers.emplace_back(m, l);
  }

  size_t bytes() const {
    size_t n = embed.bytes + (lm_head.bf16 == embed.bf16 && embed.bf16 ? 0 : lm_head.bytes) + final_norm.size() * 4;
    for (const Layer& l : layers)
      n += l.q.bytes + l.k.bytes + l.v.bytes + l.o.bytes + l.gate.bytes + l.up.bytes + l.down.bytes +
           4 * (l.in_norm.size() + l.post_norm.size() + l.q_norm.size() + l.k_norm.size());
    return n;
  }
};

ReferenceBackend::ReferenceBackend(std::shared_ptr<const ModelDir> model, int threads)
    : model_(std::move(model)), weights_(std::make_unique<Weights>(*model_, std::max(1, threads))) {}

ReferenceBackend::~ReferenceBackend() = default;

const ModelConfig& ReferenceBackend::config() const { return weights_->config; }

BackendInfo ReferenceBackend::info() const {
  BackendInfo i;
  i.name = "reference";
  i.weight_path = "host";
  i.precision = "f32";
  i.weight_bytes = weights_->bytes();
  return i;
}

void ReferenceBackend::set_trace(TraceFn fn) {
  std::lock_guard<std::mutex> lock(mu_);
  trace_ = std::move(fn);
}

std::unique_ptr<KvCache> ReferenceBackend::create_kv(int max_context) {
  const ModelConfig& c = weights_->config;
  if (max_context <= 0) throw invalid_argument("KV cache size must be positive, got " + std::to_string(max_context));
  if (max_context > c.max_position_embeddings)
    throw resource_exhausted("KV cache of " + std::to_string(max_context) + " positions exceeds the model's " +
                             "max_position_embeddings " + std::to_string(c.max_position_embeddings));
  return std::make_unique<ReferenceKv>(weights_.get(), c.num_hidden_layers, c.kv_dim(), max_context);
}

ForwardResult ReferenceBackend::forward(KvCache& kv_base, std::span<const int32_t> tokens, const ForwardWants& wants) {
  std::lock_guard<std::mutex> lock(mu_);
  Weights& w = *weights_;
  const ModelConfig& c = w.config;
  auto* kv = dynamic_cast<ReferenceKv*>(&kv_base);
  if (!kv || kv->owner() != weights_.get())
    throw invalid_argument("KV cache was not created by this reference backend");
  const int T = static_cast<int>(tokens.size());
  if (T == 0) throw invalid_argument("forward needs at least one token");
  for (int i = 0; i < T; ++i)
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
      throw invalid_argument("token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                             " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
  const int p0 = kv->positions();
  if (static_cast<int64_t>(p0) + T > kv->max_context())
    throw invalid_argument("context overflow: " + std::to_string(p0) + " cached + " + std::to_string(T) +
                           " new positions exceed the KV cache's " + std::to_string(kv->max_context()));
  if (wants.top_k < 0) throw invalid_argument("top_k must not be negative");
  kv->reserve(p0 + T);

  const int H = c.hidden_size, Q = c.q_dim(), KV = c.kv_dim(), D = c.head_dim, M = c.intermediate_size;
  const int heads = c.num_attention_heads, group = c.group_size();
  const float eps = static_cast<float>(c.rms_norm_eps);
  auto trace = [&](TraceStage s, int layer, int first, int rows, int cols, const float* data) {
    if (trace_) trace_(TracePoint{s, layer, first, rows, cols, data});
  };

  std::vector<float> x(static_cast<size_t>(T) * H), xn(x.size()), q(static_cast<size_t>(T) * Q),
      k(static_cast<size_t>(T) * KV), v(k.size()), att(q.size()), o(x.size()), gate(static_cast<size_t>(T) * M),
      up(gate.size()), rope(static_cast<size_t>(T) * D);
  for (int t = 0; t < T; ++t) {
    w.embed.row_to_float(tokens[t], &x[static_cast<size_t>(t) * H]);
    reference::rope_table(p0 + t, D, c.rope_theta, &rope[static_cast<size_t>(t) * D]);
  }
  trace(TraceStage::embedding, -1, p0, T, H, x.data());

  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const Layer& L = w.layers[l];
    for (int t = 0; t < T; ++t) reference::rms_norm(&x[t * H], L.in_norm.data(), &xn[t * H], H, eps);
    trace(TraceStage::attn_norm, l, p0, T, H, xn.data());
    L.q.multiply(xn.data(), T, q.data(), w.pool);
    L.k.multiply(xn.data(), T, k.data(), w.pool);
    L.v.multiply(xn.data(), T, v.data(), w.pool);
    trace(TraceStage::q_proj, l, p0, T, Q, q.data());
    trace(TraceStage::k_proj, l, p0, T, KV, k.data());
    trace(TraceStage::v_proj, l, p0, T, KV, v.data());
    for (int i = 0; i < T * heads; ++i) reference::rms_norm(&q[i * D], L.q_norm.data(), &q[i * D], D, eps);
    for (int i = 0; i < T * c.num_key_value_heads; ++i)
      reference::rms_norm(&k[i * D], L.k_norm.data(), &k[i * D], D, eps);
    trace(TraceStage::q_norm, l, p0, T, Q, q.data());
    trace(TraceStage::k_norm, l, p0, T, KV, k.data());
    for (int t = 0; t < T; ++t) {
      for (int h = 0; h < heads; ++h) reference::apply_rope(&q[t * Q + h * D], D, &rope[t * D]);
      for (int h = 0; h < c.num_key_value_heads; ++h) reference::apply_rope(&k[t * KV + h * D], D, &rope[t * D]);
    }
    trace(TraceStage::q_rope, l, p0, T, Q, q.data());
    trace(TraceStage::k_rope, l, p0, T, KV, k.data());

    float* kc = kv->k(l);
    float* vc = kv->v(l);
    std::memcpy(kc + static_cast<size_t>(p0) * KV, k.data(), k.size() * 4);
    std::memcpy(vc + static_cast<size_t>(p0) * KV, v.data(), v.size() * 4);
    auto attend_part = [&](int64_t begin, int64_t end) {
      std::vector<float> scores(p0 + T);
      for (int64_t item = begin; item < end; ++item) {
        const int t = static_cast<int>(item / heads), h = static_cast<int>(item % heads);
        const int kvh = h / group;
        reference::attend(&q[t * Q + h * D], kc + kvh * D, vc + kvh * D, p0 + t + 1, KV, D, scores.data(),
                          &att[t * Q + h * D]);
      }
    };
    if (static_cast<int64_t>(T) * heads * (p0 + T) * D < (1 << 15))
      attend_part(0, static_cast<int64_t>(T) * heads);
    else
      w.pool.parallel_for(static_cast<int64_t>(T) * heads, 1, attend_part);
    trace(TraceStage::attention, l, p0, T, Q, att.data());

    L.o.multiply(att.data(), T, o.data(), w.pool);
    trace(TraceStage::o_proj, l, p0, T, H, o.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    trace(TraceStage::attn_residual, l, p0, T, H, x.data());

    for (int t = 0; t < T; ++t) reference::rms_norm(&x[t * H], L.post_norm.data(), &xn[t * H], H, eps);
    trace(TraceStage::mlp_norm, l, p0, T, H, xn.data());
    L.gate.multiply(xn.data(), T, gate.data(), w.pool);
    L.up.multiply(xn.data(), T, up.data(), w.pool);
    trace(TraceStage::gate, l, p0, T, M, gate.data());
    trace(TraceStage::up, l, p0, T, M, up.data());
    reference::silu_mul(gate.data(), up.data(), gate.data(), T * M);
    trace(TraceStage::act, l, p0, T, M, gate.data());
    L.down.multiply(gate.data(), T, o.data(), w.pool);
    trace(TraceStage::down, l, p0, T, H, o.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    trace(TraceStage::residual, l, p0, T, H, x.data());
  }

  // Only reported positions go through the vocabulary projection, in chunks
  // so that scoring a long prompt does not need T x vocab floats at once.
  const int first = wants.all_positions ? 0 : T - 1;
  const int R = T - first;
  std::vector<float> fn(static_cast<size_t>(R) * H);
  for (int r = 0; r < R; ++r)
    reference::rms_norm(&x[(first + r) * H], w.final_norm.data(), &fn[r * H], H, eps);
  trace(TraceStage::final_norm, -1, p0 + first, R, H, fn.data());

  ForwardResult result;
  result.positions.resize(R);
  constexpr int kLogitRows = 16;
  const int V = c.vocab_size;
  std::vector<float> logits(static_cast<size_t>(std::min(R, kLogitRows)) * V);
  for (int r0 = 0; r0 < R; r0 += kLogitRows) {
    const int n = std::min(kLogitRows, R - r0);
    w.lm_head.multiply(&fn[r0 * H], n, logits.data(), w.pool);
    trace(TraceStage::logits, -1, p0 + first + r0, n, V, logits.data());
    for (int r = 0; r < n; ++r) {
      std::span<const float> row(&logits[static_cast<size_t>(r) * V], V);
      PositionLogits& out = result.positions[r0 + r];
      out.argmax = reference::argmax(row);
      if (wants.top_k > 0) out.top_k = reference::top_k(row, wants.top_k);
      if (wants.full_logits) out.full.assign(row.begin(), row.end());
    }
  }
  kv->commit(p0 + T);
  return result;
}

std::unique_ptr<Backend> make_reference_backend(std::shared_ptr<const ModelDir> model, int threads) {
  if (!model) throw invalid_argument("make_reference_backend: no model");
  return std::make_unique<ReferenceBackend>(std::move(model), threads);
}

}  // namespace qwen3
