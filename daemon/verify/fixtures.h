// Fixture plumbing: hex packets, XDP action names, and the fixtures JSON file
// format ([{"name","packet_hex","expected_action","expected_packet_hex"?}]).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "verify/verify_result.h"

namespace qwen3::verify {

// Hex digits, optionally separated by whitespace or ':' and with a leading
// "0x". Returns nullopt and sets *error (what and where) when malformed.
std::optional<std::string> decode_hex(const std::string& hex, std::string* error);
std::string encode_hex(const std::string& bytes);

// "XDP_DROP" for 1 etc.; "UNKNOWN(7)" outside 0..4.
std::string xdp_action_name(uint32_t action);
// Accepts "XDP_DROP" or "DROP" (any case); nullopt if unknown.
std::optional<uint32_t> parse_xdp_action(const std::string& name);

// Parses a fixtures JSON array. Throws qwen3::Error(invalid_argument) naming
// the entry and key on malformed input (hex is validated later, per fixture).
std::vector<Fixture> parse_fixtures_json(const std::string& text);

}  // namespace qwen3::verify
