// Candidate edits for the repair engine (repair.h), one family per failure
// class, in the order they are tried:
// - compile: clang's own "did you mean 'X'?" and "expected ';'" fix-its, the
//   header that declares an undeclared function, constant or struct;
// - verify, packet_bounds: a bounds check against data_end before the access
//   the proof trace names (the size the proof needs, or the pointer's struct);
// - verify, null_check_missing: a NULL check after the map lookup the proof
//   trace names;
// - verify, uninitialized: = {} / memset on the stack object passed to the
//   helper, = 0 on scalars read before written;
// - verify, unbounded/variable index: clamping (& mask) of a variable index;
// - behaviour: one-token mutations of return actions, comparison operators,
//   byte order (bpf_htons/ntohs added or removed), protocol constants and
//   integer constants, in the program's own function.
// Each candidate is a whole new source; the engine checks it.
#pragma once

#include <string>
#include <vector>

#include "verify/verify_result.h"

namespace qwen3::verify {

struct Candidate {
  std::string kind;
  std::string description;
  int line = 0;
  std::string source;
};

std::vector<Candidate> repair_candidates(const std::string& source, const VerifyResult& result);

// The first `max` candidates of a compile or verifier failure as fix-its (unified diffs
// against `source`), for the structured diagnostic; none for other stages.
std::vector<FixIt> proposed_fixits(const std::string& source, const VerifyResult& result, size_t max = 3);

}  // namespace qwen3::verify
