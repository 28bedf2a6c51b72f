#include "reference/reference_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "model/dtype.h"
#include "reference/matmul.h"
#include "reference/ops.h"
#include "common/worker_pool.h"

namespace qwen3 {


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

// The pieces of ReferenceBackend::Weights: named, not anonymous, because that
// struct (declared in the header) has external linkage.
namespace reference_parts {

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
  void multiply(const float* x, int64_t tokens, float* y, WorkerPool& pool) const {
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

}  // namespace reference_parts

using reference_parts::Layer;
using reference_parts::Matrix;
using reference_parts::vector_of;
using reference_parts::ReferenceKv;

struct ReferenceBackend::Weights {
  ModelConfig config;
  Matrix embed;
  Matrix lm_head;
  std::vector<float> final_norm;
  std::vector<Layer> layers;
  WorkerPool pool;

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

void ReferenceBackend::set_matrix_input_hook(MatrixInputFn fn) {
  std::lock_guard<std::mutex> lock(mu_);
  input_hook_ = std::move(fn);
}

std::unique_ptr<KvCache> ReferenceBackend::create_kv(int max_context) {
  const ModelConfig& c = weights_->config;
  if (max_context <= 0) throw invalid_argument("KV cache size must be positive, got " + std::to_string(max_context));
  if (max_context > c.max_position_embeddings)
    throw resource_exhausted("KV cache of " + std::to_string(max_context) + " positions exceeds the model's " +
                             "max_position_embeddings " + std::to_string(c.max_position_embeddings));
  return std::make_unique<ReferenceKv>(weights_.get(), c.num_hidden_layers, c.kv_dim(), max_context);
}

namespace {

void check_forward_input(const ModelConfig& c, const ReferenceKv& kv, std::span<const int32_t> tokens,
                         const ForwardWants& wants) {
  const int T = static_cast<int>(tokens.size());
  if (T == 0) throw invalid_argument("forward needs at least one token");
  for (int i = 0; i < T; ++i)
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size)
      throw invalid_argument("token id " + std::to_string(tokens[i]) + " at index " + std::to_string(i) +
                             " is outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
  const int p0 = kv.positions();
  if (static_cast<int64_t>(p0) + T > kv.max_context())
    throw invalid_argument("context overflow: " + std::to_string(p0) + " cached + " + std::to_string(T) +
                           " new positions exceed the KV cache's " + std::to_string(kv.max_context()));
  if (wants.top_k < 0) throw invalid_argument("top_k must not be negative");
}

// One forward pass over T new positions after p0 cached ones: the activations of every stage, and
// the steps that fill them in the order of the model.
class ForwardPass {
 public:
  ForwardPass(ReferenceBackend::Weights& w, ReferenceKv& kv, int T, const TraceFn& trace, const MatrixInputFn& hook)
      : w_(w), c_(w.config), kv_(kv), trace_(trace), hook_(hook), T_(T), p0_(kv.positions()),
        H_(c_.hidden_size), Q_(c_.q_dim()), KV_(c_.kv_dim()), D_(c_.head_dim), M_(c_.intermediate_size),
        eps_(static_cast<float>(c_.rms_norm_eps)),
        x_(size_t(T) * H_), xn_(x_.size()), q_(size_t(T) * Q_), k_(size_t(T) * KV_), v_(k_.size()), att_(q_.size()),
        o_(x_.size()), gate_(size_t(T) * M_), up_(gate_.size()), rope_(size_t(T) * D_) {}

  void embed(std::span<const int32_t> tokens) {
    for (int t = 0; t < T_; ++t) {
      w_.embed.row_to_float(tokens[t], &x_[size_t(t) * H_]);
      reference::rope_table(p0_ + t, D_, c_.rope_theta, &rope_[size_t(t) * D_]);
    }
    trace(TraceStage::embedding, -1, T_, H_, x_.data());
  }

  void layer(int l) {
    attention_block(l);
    mlp_block(l);
  }

  ForwardResult project_vocab(const ForwardWants& wants);

 private:
  void trace(TraceStage s, int layer, int rows, int cols, const float* data, int first = 0) const {
    if (trace_) trace_(TracePoint{s, layer, p0_ + first, rows, cols, data});
  }
  // A matrix product's input: the hook may rewrite it, then it is traced.
  void matrix_input(TraceStage s, int layer, int rows, int cols, float* data, int first = 0) const {
    if (hook_) hook_(s, layer, rows, cols, data);
    trace(s, layer, rows, cols, data, first);
  }

  void qkv(const Layer& L, int l) {
    for (int t = 0; t < T_; ++t) reference::rms_norm(&x_[t * H_], L.in_norm.data(), &xn_[t * H_], H_, eps_);
    matrix_input(TraceStage::attn_norm, l, T_, H_, xn_.data());
    L.q.multiply(xn_.data(), T_, q_.data(), w_.pool);
    L.k.multiply(xn_.data(), T_, k_.data(), w_.pool);
    L.v.multiply(xn_.data(), T_, v_.data(), w_.pool);
    trace(TraceStage::q_proj, l, T_, Q_, q_.data());
    trace(TraceStage::k_proj, l, T_, KV_, k_.data());
    trace(TraceStage::v_proj, l, T_, KV_, v_.data());
    for (int i = 0; i < T_ * c_.num_attention_heads; ++i)
      reference::rms_norm(&q_[i * D_], L.q_norm.data(), &q_[i * D_], D_, eps_);
    for (int i = 0; i < T_ * c_.num_key_value_heads; ++i)
      reference::rms_norm(&k_[i * D_], L.k_norm.data(), &k_[i * D_], D_, eps_);
    trace(TraceStage::q_norm, l, T_, Q_, q_.data());
    trace(TraceStage::k_norm, l, T_, KV_, k_.data());
    for (int t = 0; t < T_; ++t) {
      for (int h = 0; h < c_.num_attention_heads; ++h) reference::apply_rope(&q_[t * Q_ + h * D_], D_, &rope_[t * D_]);
      for (int h = 0; h < c_.num_key_value_heads; ++h) reference::apply_rope(&k_[t * KV_ + h * D_], D_, &rope_[t * D_]);
    }
    trace(TraceStage::q_rope, l, T_, Q_, q_.data());
    trace(TraceStage::k_rope, l, T_, KV_, k_.data());
  }

  void attend(int l) {
    const int heads = c_.num_attention_heads, group = c_.group_size();
    float* kc = kv_.k(l);
    float* vc = kv_.v(l);
    std::memcpy(kc + size_t(p0_) * KV_, k_.data(), k_.size() * 4);
    std::memcpy(vc + size_t(p0_) * KV_, v_.data(), v_.size() * 4);
    auto attend_part = [&](int64_t begin, int64_t end) {
      std::vector<float> scores(p0_ + T_);
      for (int64_t item = begin; item < end; ++item) {
        const int t = static_cast<int>(item / heads), h = static_cast<int>(item % heads);
        const int kvh = h / group;
        reference::attend(&q_[t * Q_ + h * D_], kc + kvh * D_, vc + kvh * D_, p0_ + t + 1, KV_, D_, scores.data(),
                          &att_[t * Q_ + h * D_]);
      }
    };
    // Small passes are not worth waking the pool for.
    if (int64_t(T_) * heads * (p0_ + T_) * D_ < (1 << 15))
      attend_part(0, int64_t(T_) * heads);
    else
      w_.pool.parallel_for(int64_t(T_) * heads, 1, attend_part);
    matrix_input(TraceStage::attention, l, T_, Q_, att_.data());
  }

  void attention_block(int l) {
    const Layer& L = w_.layers[l];
    qkv(L, l);
    attend(l);
    L.o.multiply(att_.data(), T_, o_.data(), w_.pool);
    trace(TraceStage::o_proj, l, T_, H_, o_.data());
    for (size_t i = 0; i < x_.size(); ++i) x_[i] += o_[i];
    trace(TraceStage::attn_residual, l, T_, H_, x_.data());
  }

  void mlp_block(int l) {
    const Layer& L = w_.layers[l];
    for (int t = 0; t < T_; ++t) reference::rms_norm(&x_[t * H_], L.post_norm.data(), &xn_[t * H_], H_, eps_);
    matrix_input(TraceStage::mlp_norm, l, T_, H_, xn_.data());
    L.gate.multiply(xn_.data(), T_, gate_.data(), w_.pool);
    L.up.multiply(xn_.data(), T_, up_.data(), w_.pool);
    trace(TraceStage::gate, l, T_, M_, gate_.data());
    trace(TraceStage::up, l, T_, M_, up_.data());
    reference::silu_mul(gate_.data(), up_.data(), gate_.data(), T_ * M_);
    matrix_input(TraceStage::act, l, T_, M_, gate_.data());
    L.down.multiply(gate_.data(), T_, o_.data(), w_.pool);
    trace(TraceStage::down, l, T_, H_, o_.data());
    for (size_t i = 0; i < x_.size(); ++i) x_[i] += o_[i];
    trace(TraceStage::residual, l, T_, H_, x_.data());
  }

  ReferenceBackend::Weights& w_;
  const ModelConfig& c_;
  ReferenceKv& kv_;
  const TraceFn& trace_;
  const MatrixInputFn& hook_;
  const int T_, p0_, H_, Q_, KV_, D_, M_;
  const float eps_;
  std::vector<float> x_, xn_, q_, k_, v_, att_, o_, gate_, up_, rope_;
};

// Only reported positions go through the vocabulary projection, in chunks so that scoring a long
// prompt does not need T x vocab floats at once.
ForwardResult ForwardPass::project_vocab(const ForwardWants& wants) {
  const int first = wants.all_positions ? 0 : T_ - 1;
  const int R = T_ - first;
  std::vector<float> fn(size_t(R) * H_);
  for (int r = 0; r < R; ++r) reference::rms_norm(&x_[(first + r) * H_], w_.final_norm.data(), &fn[r * H_], H_, eps_);
  matrix_input(TraceStage::final_norm, -1, R, H_, fn.data(), first);

  ForwardResult result;
  result.positions.resize(R);
  constexpr int kLogitRows = 16;
  const int V = c_.vocab_size;
  std::vector<float> logits(size_t(std::min(R, kLogitRows)) * V);
  for (int r0 = 0; r0 < R; r0 += kLogitRows) {
    const int n = std::min(kLogitRows, R - r0);
    w_.lm_head.multiply(&fn[r0 * H_], n, logits.data(), w_.pool);
    trace(TraceStage::logits, -1, n, V, logits.data(), first + r0);
    for (int r = 0; r < n; ++r) {
      std::span<const float> row(&logits[size_t(r) * V], V);
      PositionLogits& out = result.positions[r0 + r];
      out.argmax = reference::argmax(row);
      if (wants.top_k > 0) out.top_k = reference::top_k(row, wants.top_k);
      if (wants.full_logits) out.full.assign(row.begin(), row.end());
    }
  }
  return result;
}

}  // namespace

ForwardResult ReferenceBackend::forward(KvCache& kv_base, std::span<const int32_t> tokens, const ForwardWants& wants) {
  std::lock_guard<std::mutex> lock(mu_);
  auto* kv = dynamic_cast<ReferenceKv*>(&kv_base);
  if (!kv || kv->owner() != weights_.get())
    throw invalid_argument("KV cache was not created by this reference backend");
  check_forward_input(weights_->config, *kv, tokens, wants);
  const int T = static_cast<int>(tokens.size());
  const int p0 = kv->positions();
  kv->reserve(p0 + T);

  ForwardPass pass(*weights_, *kv, T, trace_, input_hook_);
  pass.embed(tokens);
  for (int l = 0; l < weights_->config.num_hidden_layers; ++l) pass.layer(l);
  ForwardResult result = pass.project_vocab(wants);
  kv->commit(p0 + T);
  return result;
}

std::unique_ptr<Backend> make_reference_backend(std::shared_ptr<const ModelDir> model, int threads) {
  if (!model) throw invalid_argument("make_reference_backend: no model");
  return std::make_unique<ReferenceBackend>(std::move(model), threads);
}

}  // namespace qwen3
