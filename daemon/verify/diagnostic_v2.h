// The diagnosis in the shape of bpfix's JSON (eunomia-bpf/bpfix,
// "bpfix.diagnostic/v2"): the same keys, field for field, filled from a
// VerifyResult. docs/xdp-verify.md ("bpfix.diagnostic/v2 mapping") says where
// each value comes from and where ours differ (error ids are BPFV-*, not
// BPFIX-E###). Empty object on pass.
#pragma once

#include <nlohmann/json.hpp>

#include "verify/verify_result.h"

namespace qwen3::verify {

nlohmann::json diagnostic_v2(const VerifyResult& result);

}  // namespace qwen3::verify
