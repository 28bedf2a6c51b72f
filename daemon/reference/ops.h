// The float32 operators of the Qwen3 forward pass, one function each, so the
// engine's tests can compare a single BPF operator against its float
// counterpart on the same inputs.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace qwen3::reference {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]; out may alias x.
void rms_norm(const float* x, const float* weight, float* out, int n, float eps);

// cos/sin of position * theta^(-2i/head_dim) for i < head_dim/2, computed in
// double and rounded once: table[2*i] = cos, table[2*i+1] = sin.
void rope_table(int position, int head_dim, double theta, float* table);
// HF rotate-half convention: pairs (i, i + head_dim/2) rotate by angle i.
void apply_rope(float* v, int head_dim, const float* table);

inline float silu(float x) { return x / (1.0f + __builtin_expf(-x)); }
// out[i] = silu(gate[i]) * up[i]; out may alias gate.
void silu_mul(const float* gate, const float* up, float* out, int n);

// Causal attention of one query head over `n_pos` cached positions:
// softmax(q . k_s / sqrt(head_dim)) weighted sum of v_s. k and v hold
// `stride` floats per position (the head's slice starts at k/v).
// `scores` needs n_pos floats of scratch.
void attend(const float* q, const float* k, const float* v, int n_pos, int stride, int head_dim, float* scores,
            float* out);

// Highest logit (lowest id on ties).
int32_t argmax(std::span<const float> logits);
// The k largest (id, logit), by logit descending, lower id first on ties.
std::vector<std::pair<int32_t, float>> top_k(std::span<const float> logits, int k);

}  // namespace qwen3::reference
