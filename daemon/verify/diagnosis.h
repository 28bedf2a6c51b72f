// bpfix-style diagnosis of a verification result: a stable error id, its
// class, the source span of the instruction that lost the proof (or of the
// offending construct), and the next action to take. Filled in on every
// result Pipeline::verify returns (empty fields on a plain pass).
#pragma once

#include <string>

#include "verify/verify_result.h"

namespace qwen3::verify {

void diagnose(VerifyResult& result, const std::string& source);

}  // namespace qwen3::verify
