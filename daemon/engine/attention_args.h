// The argument block of one qn_attention call: which cache, layer, positions and kv heads. The
// engine and every test and bench that drive qn_attention build it here, so the fields a call
// needs are set in one place (bpf_ops/op_args.h owns their layout).
#pragma once

#include <cstdint>

#include "engine/bpf_kv_cache.h"
#include "engine/model_plan.h"
#include "op_args.h"

namespace qwen3::engine {

struct AttentionSlice {
  uint32_t layer = 0;
  uint32_t pos0 = 0;      // absolute position of the slice's first row
  uint32_t npos = 0;      // rows of the slice
  uint32_t pass_off = 0;  // the slice's first row in the pass
};

// kv heads [head_begin, head_end) of `slice`, run by worker `thread`.
inline qn_args attention_args(const ModelPlan& plan, const BpfKvCache& kv, const AttentionSlice& slice,
                              uint32_t head_begin, uint32_t head_end, uint32_t thread = 0) {
  qn_args a{};
  a.thread = thread;
  a.layer = slice.layer;
  a.npos = slice.npos;
  a.pos0 = slice.pos0;
  a.pass_off = slice.pass_off;
  a.kv_slot = kv.slot();
  a.kv_positions = static_cast<uint32_t>(kv.max_context());  // the bounds check of the cache's capacity
  a.norm_off = plan.norms[slice.layer].q;
  a.norm2_off = plan.norms[slice.layer].k;
  a.head_begin = head_begin;
  a.head_end = head_end;
  return a;
}

}  // namespace qwen3::engine
