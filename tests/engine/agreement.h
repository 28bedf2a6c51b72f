// Teacher-forced agreement between two backends (the metric itself:
// reference/agreement.h), run over prompts and checked against a bar.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "reference/agreement.h"

namespace qwen3::test_support {

using reference::accumulate;
using reference::Agreement;
using reference::kNearTieMargin;

// An agreement rate over too few decisive positions proves nothing (with every
// position a near-tie it used to read 1.0): at least half of the positions,
// and 500, must have a clear reference argmax.
constexpr int kMinDecisive = 500;

// Both backends on every prompt, all positions, full logits.
inline Agreement teacher_forced(Backend& ref, Backend& other, const std::vector<std::vector<int32_t>>& prompts) {
  Agreement a;
  ForwardWants w;
  w.all_positions = true;
  w.full_logits = true;
  for (const auto& ids : prompts) {
    auto kr = ref.create_kv(static_cast<int>(ids.size()));
    auto kb = other.create_kv(static_cast<int>(ids.size()));
    accumulate(a, ids, ref.forward(*kr, ids, w), other.forward(*kb, ids, w));
  }
  return a;
}

// Prints the figures and checks them: at least 1000 positions, enough of them
// decisive (kMinDecisive), and an agreement rate of at least `bar`.
inline void report_and_check(const std::string& what, const Agreement& a, double bar) {
  std::printf("%s: %d positions, argmax agreement %.2f%% (%d/%d) excluding %d near-ties (%d of them agree), "
              "mean KL(ref||bpf) %.3g nats; logit error mean %.3g max %.3g (top-1 logit %.3g above the mean); "
              "perplexity of the fed text: reference %.4g, bpf %.4g\n",
              what.c_str(), a.positions, 100.0 * a.rate(), a.agree, a.decided(), a.near_ties, a.near_tie_agree,
              a.kl_sum / std::max(1, a.positions), a.err_sum / std::max(1, a.positions), a.err_max,
              a.spread_sum / std::max(1, a.positions), a.ref_ppl(), a.other_ppl());
  EXPECT_GE(a.positions, 1000) << what;
  EXPECT_GE(a.decided(), std::max(kMinDecisive, a.positions / 2))
      << what << ": too few decisive positions for the agreement rate to mean anything";
  EXPECT_GE(a.rate(), bar) << what;
}

}  // namespace qwen3::test_support
