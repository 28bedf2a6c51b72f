// JSON form of a VerifyResult (for `qwen3-bpf verify --json`, logs and tests).
#pragma once

#include <nlohmann/json.hpp>

#include "verify/verify_result.h"

namespace qwen3::verify {

nlohmann::json to_json(const VerifyResult& result);
// dump() that never throws on invalid UTF-8 coming from source or logs.
std::string to_json_text(const VerifyResult& result, int indent = 2);

}  // namespace qwen3::verify
