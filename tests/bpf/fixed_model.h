// Bit-exact user-space model of the BPF operators: the same numerics.h
// helpers, the same order of integer operations, plain C++ loops. Every BPF
// program's output must equal this model's exactly.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "engine/precision.h"
#include "numerics.h"
#include "numerics_kv.h"
#include "numerics_q4a8.h"
#include "numerics_q8a8.h"
#include "op_args.h"

namespace qwen3::fixed_model {

inline uint64_t max_abs(std::span<const int32_t> x) {
  uint64_t m = 0;
  for (int32_t v : x) m = std::max<uint64_t>(m, qn_abs64(v));
  return m;
}

// RMSNorm of x (all of x is summed; n_true divides), weights Q24.
inline std::vector<int32_t> rmsnorm(std::span<const int32_t> x, uint32_t n_true, std::span<const int32_t> w,
                                    uint64_t eps_q32) {
  int t = qn_rms_reduce_shift(max_abs(x));
  uint64_t ss = 0;
  for (int32_t v : x) {
    int64_t s = static_cast<int64_t>(v) >> t;
    ss += static_cast<uint64_t>(s * s);
  }
  int sh = 0;
  int64_t r = qn_rms_factor(ss, n_true, t, eps_q32, &sh);
  std::vector<int32_t> y(x.size());
  for (size_t i = 0; i < x.size(); i++) y[i] = qn_rms_apply(x[i], r, sh, w[i]);
  return y;
}

// RMSNorm feeding a matmul, fused with the requantization (Q32 -> act_bits):
// fills xq and returns the matmul shift s (= Q32 shift - 16, may be < 0).
inline int rmsnorm_requant(std::span<const int32_t> x, uint32_t n_true, std::span<const int32_t> w,
                           uint64_t eps_q32, int act_bits, std::vector<int32_t>& xq) {
  int t = qn_rms_reduce_shift(max_abs(x));
  uint64_t ss = 0;
  for (int32_t v : x) {
    int64_t s = static_cast<int64_t>(v) >> t;
    ss += static_cast<uint64_t>(s * s);
  }
  int sh = 0;
  int64_t r = qn_rms_factor(ss, n_true, t, eps_q32, &sh);
  uint64_t mx = 0;
  for (size_t i = 0; i < x.size(); i++) mx = std::max<uint64_t>(mx, qn_abs64(qn_rms_apply_wide(x[i], r, sh, w[i])));
  int sh2 = qn_input_shift(mx, act_bits);
  xq.resize(x.size());
  for (size_t i = 0; i < x.size(); i++)
    xq[i] = static_cast<int32_t>(qn_round_shift(qn_rms_apply_wide(x[i], r, sh, w[i]), sh2));
  return sh2 - 16;
}

// Block-floating-point requantization of a matmul input; returns the shift.
inline int requant(std::vector<int32_t>& x, int act_bits) {
  int s = qn_input_shift(max_abs(x), act_bits);
  for (auto& v : x) v = static_cast<int32_t>(qn_round_shift(v, s));
  return s;
}

// q4: the row against the 8-bit quantization of x, one product at a time:
// per group of 32 the inputs' codes q + 128 (qn_a8_quantize_group), then the
// group's share (numerics_q4a8.h) from sum c (q + 128), sum c and 8 sum q.
inline int64_t dot_q4a8(const uint8_t* row, const int32_t* x, uint32_t groups, const uint32_t* ocol) {
  int64_t acc = 0;
  for (uint32_t gq = 0; gq < 2 * groups; gq++) {
    uint8_t xu[QN_A8_GROUP];
    int64_t xs, corr;
    qn_a8_quantize_group(x + gq * QN_A8_GROUP, xu, &xs, &corr);
    const uint8_t* hp = row + qn_q4_img_half_off(gq / 2, gq % 2);
    int32_t scale;
    std::memcpy(&scale, hp, 4);
    int64_t lane = 0, csum = 0;
    for (int k = 0; k < QN_A8_GROUP; k++) {
      const int64_t c = hp[4 + k];
      lane += c * xu[k];
      csum += c;
    }
    acc += qn_q4a8_share(lane, csum, corr, xs, scale);
  }
  for (int k = 0; k < QN_OUT_COLS; k++) {
    int64_t w;
    std::memcpy(&w, row + qn_q4_tail_off(groups) + 8 * k, 8);
    acc += w * x[ocol[k]];
  }
  return acc;
}

// q8a8: a q8 row image against the 8-bit quantization of x, one product at a
// time: per group of 64 the two input groups' sums of code x q, then one
// share (numerics_q8a8.h), and the outlier columns exactly, as q8.
inline int64_t dot_q8a8(const uint8_t* row, const int32_t* x, uint32_t groups, const uint32_t* ocol) {
  int64_t acc = 0;
  for (uint32_t g = 0; g < groups; g++) {
    const uint8_t* gp = row + qn_group_off(QN_PREC_Q8, g);
    int64_t sum[2] = {0, 0}, xs[2] = {0, 0};
    for (uint32_t h = 0; h < 2; h++) {
      uint8_t xu[QN_A8_GROUP];
      int64_t corr;
      qn_a8_quantize_group(x + (2 * g + h) * QN_A8_GROUP, xu, &xs[h], &corr);
      for (int k = 0; k < QN_A8_GROUP; k++)
        sum[h] += int64_t(static_cast<int8_t>(gp[QN_Q8_SCALE_BYTES + h * QN_A8_GROUP + k])) *
                  (int64_t(xu[k]) - QN_A8_BIAS);
    }
    int32_t scale;
    std::memcpy(&scale, gp, QN_Q8_SCALE_BYTES);
    acc += qn_q8a8_share(sum[0], xs[0], sum[1], xs[1], scale);
  }
  for (int k = 0; k < QN_OUT_COLS; k++) {
    int64_t w;
    std::memcpy(&w, row + qn_q8_tail_elem_off(groups, k), 8);
    acc += w * x[ocol[k]];
  }
  return acc;
}

// Row format: bpf_ops/layout.h.
inline int64_t dot(const uint8_t* row, const int32_t* x, uint32_t groups, Precision p, const uint32_t* ocol) {
  if (p == Precision::q4) return dot_q4a8(row, x, groups, ocol);
  if (p == Precision::q8a8) return dot_q8a8(row, x, groups, ocol);
  const uint32_t prec = static_cast<uint32_t>(p);
  int64_t acc = 0;
  for (uint32_t g = 0; g < groups; g++) {
    const uint8_t* gp = row + qn_group_off(prec, g);
    if (p == Precision::q8) {
      int32_t scale;
      std::memcpy(&scale, gp, QN_Q8_SCALE_BYTES);
      int64_t gs = 0;
      for (int k = 0; k < QN_GROUP; k++)
        gs += int64_t(static_cast<int8_t>(gp[QN_Q8_SCALE_BYTES + k])) * x[g * QN_GROUP + k];
      acc += gs * scale;
      if (g + 1 == groups)
        for (int k = 0; k < QN_OUT_COLS; k++) {
          int64_t w;
          std::memcpy(&w, row + qn_q8_tail_elem_off(groups, k), 8);
          acc += w * x[ocol[k]];
        }
    } else {
      for (int k = 0; k < QN_GROUP; k++) {
        int32_t w;
        std::memcpy(&w, gp + 4 * k, 4);
        acc += int64_t(w) * x[g * QN_GROUP + k];
      }
    }
  }
  return acc;
}

inline int32_t matmul_row(const uint8_t* row, const std::vector<int32_t>& xq, int s, const qn_matrix& m,
                          Precision p) {
  return qn_matmul_out(dot(row, xq.data(), m.groups, p, m.ocol), static_cast<int>(m.wfrac), s);
}

// Query/key head: RMSNorm then RoPE (rotate-half); cs = [half cos][half sin].
inline std::vector<int32_t> head_norm_rope(std::span<const int32_t> x, std::span<const int32_t> w,
                                           std::span<const int32_t> cs, uint64_t eps_q32) {
  const size_t hd = x.size(), half = hd / 2;
  std::vector<int32_t> n = rmsnorm(x, static_cast<uint32_t>(hd), w, eps_q32);
  std::vector<int32_t> y(hd);
  for (size_t d = 0; d < half; d++) {
    y[d] = qn_rope_first(n[d], n[d + half], cs[d], cs[half + d]);
    y[d + half] = qn_rope_second(n[d], n[d + half], cs[d], cs[half + d]);
  }
  return y;
}

struct QuantVec {
  std::vector<int32_t> q;
  int32_t max = 0;
};

inline QuantVec kv_quant(std::span<const int32_t> x, int32_t levels) {
  QuantVec r;
  r.max = qn_sat32(static_cast<int64_t>(max_abs(x)));
  for (int32_t v : x) r.q.push_back(qn_kv_quant(v, r.max, levels));
  return r;
}

// Compact K/V (kv_bits = 8): unnormalized Walsh-Hadamard transform in blocks
// of 2^lb, exact in int64.
inline void hadamard(std::vector<int64_t>& x, int lb) {
  for (int st = 0; st < lb; st++)
    for (size_t a = 0; a < x.size(); a++)
      if (!((a >> st) & 1)) {
        int64_t u = x[a], w = x[a + (size_t(1) << st)];
        x[a] = u + w;
        x[a + (size_t(1) << st)] = u - w;
      }
}

// Compact K/V of one kv head: rotated (QN_KV8_ROTATE) k and v coded at their
// own scale codes and packed into one 16-bit word per element (9-bit K code
// above the 7-bit V code); the scale codes ride in the LSBs of K codes 0..15.
inline std::vector<int64_t> kv8_rotated(std::span<const int32_t> x, int64_t& code) {
  std::vector<int64_t> y(x.begin(), x.end());
  hadamard(y, qn_kv8_block_log2(static_cast<uint32_t>(x.size())));
  uint64_t mx = 0;
  for (int64_t v : y) mx = std::max<uint64_t>(mx, qn_abs64(v));
  code = qn_kv8_code(mx);
  return y;
}

inline std::vector<int32_t> kv8_pack(std::span<const int32_t> k, std::span<const int32_t> v) {
  int64_t ek = 0, ev = 0;
  auto ky = kv8_rotated(k, ek), vy = kv8_rotated(v, ev);
  std::vector<int32_t> words(k.size());
  for (size_t d = 0; d < k.size(); d++) {
    int32_t kc;
    if (d < QN_KV8_SCALE_CODES) kc = qn_kv8_quant_bit(ky[d], ek, (ek >> d) & 1, QN_KV8_K_LEVELS);
    else if (d < 2 * QN_KV8_SCALE_CODES)
      kc = qn_kv8_quant_bit(ky[d], ek, (ev >> (d - QN_KV8_SCALE_CODES)) & 1, QN_KV8_K_LEVELS);
    else kc = qn_kv8_quant(ky[d], ek, QN_KV8_K_LEVELS);
    words[d] = static_cast<int16_t>(qn_kv8_word(kc, qn_kv8_quant(vy[d], ev, QN_KV8_V_LEVELS)));
  }
  return words;
}

inline int64_t kv8_scale_code(const std::vector<int32_t>& words, size_t first) {
  int64_t e = 0;
  for (int i = 0; i < QN_KV8_SCALE_CODES; i++) e |= (qn_kv8_kcode(words[first + i]) & 1) << i;
  return e;
}

// One query head over compact cached K|V words: rotate q, score, softmax,
// weighted sum of rotated values, rotate back.
inline std::vector<int32_t> attend_kv8(const std::vector<int32_t>& q_in, const std::vector<std::vector<int32_t>>& kv,
                                       uint32_t head_dim) {
  const int lb = qn_kv8_block_log2(head_dim);
  std::vector<int64_t> qr(q_in.begin(), q_in.end());
  hadamard(qr, lb);
  uint64_t mx = 0;
  for (int64_t e : qr) mx = std::max<uint64_t>(mx, qn_abs64(e));
  int sq = qn_input_shift(mx, QN_KV8_Q_BITS);
  std::vector<int32_t> q(head_dim);
  for (uint32_t d = 0; d < head_dim; d++) q[d] = static_cast<int32_t>(qn_round_shift(qr[d], sq));
  int64_t c = qn_attn_scale_q24(head_dim, QN_KV8_K_LEVELS);
  std::vector<int64_t> scores(kv.size());
  int64_t smax = -2147483647;
  for (size_t j = 0; j < kv.size(); j++) {
    int64_t dot = 0;
    for (uint32_t d = 0; d < head_dim; d++) dot += int64_t(q[d]) * qn_kv8_kcode(kv[j][d]);
    scores[j] = qn_kv8_score(dot, kv8_scale_code(kv[j], 0), sq, lb, c);
    smax = std::max(smax, scores[j]);
  }
  uint64_t sum = 0;
  for (auto& s : scores) {
    s = qn_attn_exp_q30(s - smax);
    sum += static_cast<uint64_t>(s);
  }
  const uint64_t inv = qn_kv8_prob_inv(sum);
  int64_t voct = 0;  // the largest V scale octave: the value weights are relative to it
  for (const auto& words : kv) voct = std::max(voct, kv8_scale_code(words, QN_KV8_SCALE_CODES) >> 3);
  std::vector<int64_t> acc(head_dim, 0);
  for (size_t j = 0; j < kv.size(); j++) {
    int64_t w = qn_kv8_vweight(qn_kv8_prob(scores[j], inv), kv8_scale_code(kv[j], QN_KV8_SCALE_CODES), voct);
    for (uint32_t d = 0; d < head_dim; d++) acc[d] += w * qn_kv8_vcode(kv[j][d]);
  }
  for (auto& a : acc) a = qn_kv8_out_rot(a, voct);
  hadamard(acc, lb);
  std::vector<int32_t> out(head_dim);
  for (uint32_t d = 0; d < head_dim; d++) out[d] = qn_kv8_out(acc[d], lb);
  return out;
}

// One query head over cached (K, V) of positions 0..n-1.
inline std::vector<int32_t> attend(std::vector<int32_t> q, const std::vector<QuantVec>& k,
                                   const std::vector<QuantVec>& v, uint32_t head_dim, int32_t levels) {
  int sq = qn_input_shift(max_abs(q), QN_Q_BITS);
  for (auto& e : q) e = static_cast<int32_t>(qn_round_shift(e, sq));
  int64_t c = qn_attn_scale_q24(head_dim, levels);
  std::vector<int64_t> scores(k.size());
  int32_t smax = 0;
  for (size_t j = 0; j < k.size(); j++) {
    int64_t dot = 0;
    for (uint32_t d = 0; d < head_dim; d++) dot += int64_t(q[d]) * k[j].q[d];
    dot = qn_round_shift(dot, qn_kv_dot_shift(levels));
    int32_t s = qn_attn_score(dot, k[j].max, sq, c);
    scores[j] = s;
    if (j == 0 || s > smax) smax = s;
  }
  uint64_t sum = 0;
  for (auto& s : scores) {
    s = qn_attn_exp_q30(s - smax);
    sum += static_cast<uint64_t>(s);
  }
  std::vector<int64_t> acc(head_dim, 0);
  for (size_t j = 0; j < k.size(); j++) {
    int64_t w = qn_attn_vweight(qn_attn_prob(scores[j], sum), v[j].max);
    for (uint32_t d = 0; d < head_dim; d++) acc[d] += w * v[j].q[d];
  }
  std::vector<int32_t> out(head_dim);
  for (uint32_t d = 0; d < head_dim; d++) out[d] = qn_attn_out(acc[d], levels);
  return out;
}

inline int32_t embed_value(const uint8_t* row, uint32_t c, Precision p, const qn_matrix& m) {
  const uint32_t g = c / QN_GROUP, k = c % QN_GROUP;
  const int wfrac = static_cast<int>(m.wfrac);
  const uint8_t* gp = row + qn_group_off(static_cast<uint32_t>(p), g);
  if (has_q8_rows(p)) {  // q8a8 rows are q8 row images
    int32_t scale;
    std::memcpy(&scale, gp, QN_Q8_SCALE_BYTES);
    int64_t q = static_cast<int8_t>(gp[QN_Q8_SCALE_BYTES + k]);
    int32_t v = qn_sat32(qn_round_shift(q * scale, wfrac - QN_ACT_FRAC));
    for (int i = 0; i < QN_OUT_COLS; i++)
      if (m.ocol[i] == c) {
        int64_t w;
        std::memcpy(&w, row + qn_q8_tail_elem_off(m.groups, i), 8);
        v = qn_sat32(int64_t(v) + qn_round_shift(w, wfrac - QN_ACT_FRAC));
      }
    return v;
  }
  int32_t w;
  std::memcpy(&w, gp + 4 * k, 4);
  return qn_sat32(qn_round_shift(w, wfrac - QN_ACT_FRAC));
}

}  // namespace qwen3::fixed_model
