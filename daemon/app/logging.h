// spdlog to stderr; under systemd (JOURNAL_STREAM set) a plain format without
// timestamps, since journald adds its own.
#pragma once

#include <string>

namespace qwen3 {

void setup_logging(const std::string& level);
// Throws qwen3::Error(invalid_argument) for an unknown level name.
void set_log_level(const std::string& level);

}  // namespace qwen3
