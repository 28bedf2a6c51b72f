// The sampling program (qn_sample) loaded for a vocabulary of a given size,
// with no model behind it (it reads no weights), and a run of it on raw
// candidates: shared by the sampling and draw tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "engine/bpf_programs.h"
#include "engine/model_plan.h"
#include "fixed_sample.h"
#include "presets.h"

namespace qwen3::engine {

inline constexpr uint32_t kQwenVocab = 151936;

inline ModelConfig config_with_vocab(uint32_t vocab) { return mkmodel::model_shape(128, 1, 2, 1, 64, 128, int(vocab)); }

inline BpfPrograms& programs(uint32_t vocab) {
  static std::map<uint32_t, std::unique_ptr<BpfPrograms>> cache;
  auto& p = cache[vocab];
  if (!p) {
    ModelPlan plan = make_model_plan(config_with_vocab(vocab), Precision::q24, false, 1, 16, 16);
    plan.layout.weight_entries = 1;  // the sampling program reads no weights
    p = std::make_unique<BpfPrograms>(plan.layout);
  }
  return *p;
}

inline std::vector<uint32_t> bitmap(uint32_t vocab, const std::vector<int32_t>& history) {
  std::vector<uint32_t> seen(qn_sample_seen_words(vocab), 0);
  for (int32_t id : history) seen[uint32_t(id) >> 5] |= 1u << (id & 31);
  return seen;
}

// Runs the program on raw candidates (no float on the way) and returns its
// kept set; the header it leaves (drawn_id, draw_bits) in progs.sample_hdr().
inline fixed::SampleOut run_kernel(BpfPrograms& progs, const qn_sample_hdr& h, const std::vector<qn_topk_entry>& cand,
                                   const std::vector<uint32_t>& seen) {
  const uint32_t vocab = progs.layout().shape.vocab;
  uint8_t* b = progs.sample_buf();
  std::copy(cand.begin(), cand.end(), reinterpret_cast<qn_topk_entry*>(b + qn_sample_cand_off()));
  std::copy(seen.begin(), seen.end(), reinterpret_cast<uint32_t*>(b + qn_sample_seen_off(vocab)));
  *progs.sample_hdr() = h;
  progs.sample();
  const auto* out = reinterpret_cast<const qn_sample_entry*>(b + qn_sample_out_off(vocab));
  return {std::vector<qn_sample_entry>(out, out + progs.sample_hdr()->kept)};
}

}  // namespace qwen3::engine
