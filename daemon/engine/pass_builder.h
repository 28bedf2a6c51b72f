// How the tokens of several sequences share passes over the weights: every
// pass holds up to `capacity` positions (QN_PMAX), each sequence contributes
// one contiguous slice of its remaining tokens, and a sequence's slices come
// in order (pass k+1 runs after pass k, so its positions see the K/V written
// before). The matrix programs treat the positions of a pass independently;
// only attention and the vocabulary projection care whose positions they are.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace qwen3::engine {

struct PassSlice {
  uint32_t item = 0;       // index of the sequence in the batch
  uint32_t token_off = 0;  // first of its tokens in this slice
  uint32_t pass_off = 0;   // row of that token in the pass
  uint32_t npos = 0;       // tokens in this slice
};

struct Pass {
  uint32_t npos = 0;  // rows used
  std::vector<PassSlice> slices;
};

// Packs sequences of the given token counts, in order, filling each pass
// before starting the next; a sequence may continue in the next pass.
// Every pass but the last is full. capacity must be >= 1.
std::vector<Pass> pack_passes(std::span<const uint32_t> lengths, uint32_t capacity);

}  // namespace qwen3::engine
