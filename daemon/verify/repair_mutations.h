// Behavioural repair candidates: one-token mutations of the program, tried
// when fixtures fail (repair_candidates.h): return actions (the action a
// failing fixture got -> the one it expected), comparison operators, byte
// order (bpf_htons/bpf_ntohs added around or removed from a constant),
// protocol constants (IPPROTO_*, ETH_P_*) and small integer constants.
#pragma once

#include <vector>

#include "verify/repair_candidates.h"
#include "verify/repair_text.h"

namespace qwen3::verify {

void mutation_candidates(const Source& src, const VerifyResult& result, std::vector<Candidate>& out);

}  // namespace qwen3::verify
