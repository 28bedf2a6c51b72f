// The diagnosis of a failed verification in under 1,200 characters, for a
// model's repair turn and for a person in a hurry: stage, class and id, the
// failing line with its source, where the proof was lost and what proof the
// verifier needed, the first compiler errors or failing fixtures, and the
// next action. Never the raw verifier log.
#pragma once

#include <string>

#include "verify/verify_result.h"

namespace qwen3::verify {

constexpr size_t kShortDiagnosticChars = 1200;

std::string short_diagnostic(const VerifyResult& result);

}  // namespace qwen3::verify
