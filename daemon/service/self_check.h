// `qwen3-bpfd --check`: load everything, then tokenize, forward a few tokens
// and generate four, printing a summary. Returns the process exit code.
#pragma once

#include "service/config.h"

namespace qwen3 {

int run_self_check(const DaemonConfig& config);

}  // namespace qwen3
