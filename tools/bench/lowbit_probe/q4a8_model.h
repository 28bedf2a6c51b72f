// The C++ model of the low-bit kernel probe's q8 and q4a8 programs: the same
// integers as kernel_q8.h and kernel_q4a8.h, one product at a time, plus the
// packing of the two block formats (bpf_ops/layout.h). q8a8: q8a8_model.h.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "lowbit_probe_abi.h"
#include "numerics_q4a8.h"

namespace lowbit {

// One block's rows as codes (q8 and q8a8: 0..255 offset binary; q4: 0..15) and scales per group.
struct Block {
  int rows = 0;                       // 8 (q8), 16 (q4) or 12 (q8a8)
  int cols = 0;
  std::vector<uint8_t> codes;         // [rows][cols]
  std::vector<int32_t> scales;        // [rows][groups]
  int groups() const { return int(scales.size()) / rows; }
  uint8_t code(int r, int k) const { return codes[size_t(r) * cols + k]; }
  int32_t scale(int r, int g) const { return scales[size_t(r) * groups() + g]; }
};

inline void pack_q8(const Block& b, uint8_t* out) {
  std::memset(out, 0, lb_q8_block_bytes(b.cols));
  for (int g = 0; g < b.groups(); g++)
    for (int j = 0; j < QN_Q8_BLOCK_ROWS; j++) {
      std::memcpy(out + qn_q8_bscale_off(g, j), &b.scales[size_t(j) * b.groups() + g], 4);
      for (int k = 0; k < QN_GROUP; k++) out[qn_q8_bcol_off(g, k) + j] = b.code(j, g * QN_GROUP + k);
    }
}

inline void pack_q4(const Block& b, uint8_t* out) {
  std::memset(out, 0, lb_q4_block_bytes(b.cols));
  for (int g = 0; g < b.groups(); g++)
    for (int j = 0; j < QN_Q4_BLOCK_ROWS; j++) {
      std::memcpy(out + qn_q4_bscale_off(g, j), &b.scales[size_t(j) * b.groups() + g], 4);
      uint16_t sum = 0;
      for (int k = 0; k < QN_Q4_GROUP; k++) {
        uint8_t c = b.code(j, g * QN_Q4_GROUP + k);
        sum = uint16_t(sum + c);
        uint64_t col;
        std::memcpy(&col, out + qn_q4_bcol_off(g, k), 8);
        col |= uint64_t(c & 15) << (4 * j);
        std::memcpy(out + qn_q4_bcol_off(g, k), &col, 8);
      }
      std::memcpy(out + qn_q4_bcsum_off(g, j), &sum, 2);
    }
}

// lb_prepare: the q8 group sums and the 8-bit input (q4a8's and q8a8's).
inline void prepare(lb_input& in) {
  for (int g = 0; g < LB_MAX_Q8_GROUPS; g++) {
    int64_t s = 0;
    for (int k = 0; k < QN_GROUP; k++) s += in.x[g * QN_GROUP + k];
    in.xsum[g] = int32_t(s);
  }
  for (int g = 0; g < LB_MAX_A8_GROUPS; g++) {
    qn_a8_quantize_group(&in.x[g * QN_A8_GROUP], &in.xu[g * QN_A8_GROUP], &in.xs[g], &in.corr[g]);
    in.a8_start[g] = qn_q8a8_input_start(in.corr[g]);
  }
}

// Row r of a q8 block: sum over groups of (sum (code - 128) x) * scale.
inline int64_t q8_row(const Block& b, int r, const lb_input& in) {
  int64_t y = 0;
  for (int g = 0; g < b.groups(); g++) {
    int64_t s = 0;
    for (int k = 0; k < QN_GROUP; k++) s += (int64_t(b.code(r, g * QN_GROUP + k)) - QN_Q8_CODE_BIAS) * in.x[g * QN_GROUP + k];
    y += s * b.scale(r, g);
  }
  return y;
}

// Row r of a q4 block against the 8-bit input, one product at a time.
inline int64_t q4a8_row(const Block& b, int r, const lb_input& in) {
  int64_t y = 0;
  for (int g = 0; g < b.groups(); g++) {
    int64_t lane = 0, csum = 0;
    for (int k = 0; k < QN_Q4_GROUP; k++) {
      int c = b.code(r, g * QN_Q4_GROUP + k);
      lane += int64_t(c) * in.xu[g * QN_Q4_GROUP + k];
      csum += c;
    }
    y += qn_q4a8_share(lane, csum, in.corr[g], in.xs[g], b.scale(r, g));
  }
  return y;
}

}  // namespace lowbit
