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

// A fixtures file: a bare array [{"name","packet_hex","expected_action",
// "expected_packet_hex"?}], {"fixtures": [...]}, or the BPF-Guardian format
// {"schema_version","task_id","test_count","validator":{"type":...},
//  "tests":[{"name","description","packet_hex","expected_action","weight"?}]}
// unchanged. Unknown fields are ignored. Both may carry "maps": initial map
// contents [{"map","key_hex"|"key_u32","value_hex"|"value_u32"|"value_ifindex":"lo"}],
// and a test "expected_maps" in the same form (checked after its run).
struct FixtureFile {
  std::vector<Fixture> fixtures;
  std::vector<MapEntry> maps;     // initial map contents, written before the first fixture runs
  std::string validator;          // Guardian validator.type ("" for a bare array)
  std::string task_id;
};

// Throws qwen3::Error(invalid_argument) naming the entry and key on malformed
// input (hex is validated later, per fixture).
FixtureFile parse_fixture_file(const std::string& text);
// The fixtures of parse_fixture_file.
std::vector<Fixture> parse_fixtures_json(const std::string& text);

}  // namespace qwen3::verify
