// bpfix-style diagnosis of a verification result: a stable error id, its
// class, the source span of the instruction that lost the proof (or of the
// offending construct), and the next action to take. Filled in on every
// result Pipeline::verify returns (empty fields on a plain pass).
#pragma once

#include <string>

#include "verify/verify_result.h"

namespace qwen3::verify {

void diagnose(VerifyResult& result, const std::string& source);

// Line `line` (1-based) of `source` without its line ending; "" if there is none.
std::string source_line_text(const std::string& source, int line);

}  // namespace qwen3::verify
