// Small human-readable formatting helpers for the CLI's tables and summaries.
#pragma once

#include <cstdint>
#include <string>

namespace qwen3::cli {

std::string format_bytes(uint64_t bytes);        // "12.3 MiB"
std::string format_duration(double seconds);     // "1h 02m 03s"
std::string format_unix_ms(int64_t unix_ms);     // "2026-11-30 01:02:03 UTC", "-" for 0
// Makes control characters visible (for token texts in tables).
std::string printable(const std::string& text);

}  // namespace qwen3::cli
