// The C++ model of the probe's q8a8 kernel (kernel_q8a8.h): the packing of a
// 12-row block (numerics_q8a8.h), the kernel's 21-bit lane arithmetic word by
// word in uint64_t, and the plain integers it must recover (each row's sum of
// code x q one product at a time), so that --check can tell a lane layout
// error (model != plain) from a BPF one (kernel != model).
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "lowbit_probe_abi.h"
#include "numerics_q8a8.h"
#include "q4a8_model.h"

namespace lowbit {

using Q8a8Sums = std::array<int64_t, QN_Q8A8_BLOCK_ROWS>;

// Half h of weight group g: the columns this input group covers.
inline int a8_col(int g, int h, int k) { return g * QN_GROUP + h * QN_A8_GROUP + k; }

inline uint64_t q8a8_word(const Block& b, int g, int h, int k, int w) {
  uint64_t v = 0;
  for (int j = QN_Q8A8_BLOCK_ROWS / QN_Q8A8_WORDS * w; j < QN_Q8A8_BLOCK_ROWS / QN_Q8A8_WORDS * (w + 1); j++)
    v |= uint64_t(b.code(j, a8_col(g, h, k))) << qn_q8a8_code_shift(j);
  return v;
}

// Accumulator a's weight start value for half h of group g: its rows' code sums.
inline uint64_t q8a8_weight_start(const Block& b, int g, int h, int a) {
  int64_t w[3] = {0, 0, 0};
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < QN_A8_GROUP; k++) w[i] += b.code(3 * a + i, a8_col(g, h, k));
  return qn_q8a8_weight_start(w[0], w[1], w[2]);
}

inline void pack_q8a8(const Block& b, uint8_t* out) {
  std::memset(out, 0, lb_q8a8_block_bytes(b.cols));
  for (int g = 0; g < b.groups(); g++) {
    for (int j = 0; j < QN_Q8A8_BLOCK_ROWS; j++) {
      int32_t scale = b.scale(j, g);
      std::memcpy(out + qn_q8a8_bscale_off(g, j), &scale, 4);
    }
    for (int h = 0; h < QN_GROUP / QN_A8_GROUP; h++) {
      for (int a = 0; a < QN_Q8A8_ACCS; a++) {
        uint64_t s = q8a8_weight_start(b, g, h, a);
        std::memcpy(out + qn_q8a8_bstart_off(g, h, a), &s, 8);
      }
      for (int k = 0; k < QN_A8_GROUP; k++)
        for (int w = 0; w < QN_Q8A8_WORDS; w++) {
          uint64_t v = q8a8_word(b, g, h, k, w);
          std::memcpy(out + qn_q8a8_bword_off(g, h, k, w), &v, 8);
        }
    }
  }
}

// The kernel's arithmetic for half h of group g: the four accumulators from
// their start values through the words times the input bytes, mod 2^64 (the
// even ones masked, the odd ones shifted only, then qn_q8a8_high_fix), then
// each row's sum S read from its lane.
inline Q8a8Sums q8a8_lane_sums(const Block& b, const lb_input& in, int g, int h) {
  int a8 = 2 * g + h;
  Q8a8Sums s{};
  uint64_t lo_start = 0, lo_end = 0;
  for (int a = 0; a < QN_Q8A8_ACCS; a++) {
    const uint64_t start = q8a8_weight_start(b, g, h, a) - in.a8_start[a8];
    uint64_t x = start;
    for (int k = 0; k < QN_A8_GROUP; k++) {
      const uint64_t v = q8a8_word(b, g, h, k, a / 2);
      x += (a % 2 ? v >> QN_Q8A8_HIGH_SHIFT : v & QN_Q8A8_CODES) * in.xu[a8 * QN_A8_GROUP + k];
    }
    if (a % 2) {
      x = qn_q8a8_high_fix(x, lo_start, lo_end);
    } else {
      lo_start = start;
      lo_end = x;
    }
    s[3 * a] = qn_q8a8_lane0(x);
    s[3 * a + 1] = qn_q8a8_lane1(x);
    s[3 * a + 2] = qn_q8a8_lane2(x);
  }
  return s;
}

// What the lanes must recover: sum (code - 128) (u - 128) one product at a time.
inline Q8a8Sums q8a8_plain_sums(const Block& b, const lb_input& in, int g, int h) {
  int a8 = 2 * g + h;
  Q8a8Sums s{};
  for (int j = 0; j < QN_Q8A8_BLOCK_ROWS; j++)
    for (int k = 0; k < QN_A8_GROUP; k++)
      s[j] += (int64_t(b.code(j, a8_col(g, h, k))) - QN_Q8_CODE_BIAS) *
              (int64_t(in.xu[a8 * QN_A8_GROUP + k]) - QN_A8_BIAS);
  return s;
}

// A block's 12 outputs from per-half row sums (lanes or plain): per weight
// group and row one share (qn_q8a8_share), as the kernel adds them.
template <typename Sums>
Q8a8Sums q8a8_block(const Block& b, const lb_input& in, Sums sums) {
  Q8a8Sums y{};
  for (int g = 0; g < b.groups(); g++) {
    Q8a8Sums s0 = sums(b, in, g, 0), s1 = sums(b, in, g, 1);
    for (int j = 0; j < QN_Q8A8_BLOCK_ROWS; j++)
      y[j] += qn_q8a8_share(s0[j], in.xs[2 * g], s1[j], in.xs[2 * g + 1], b.scale(j, g));
  }
  return y;
}

}  // namespace lowbit
