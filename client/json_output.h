// JSON output for scripts: protobuf messages as one line with the .proto field
// names and every scalar field present (zeros included), so the keys can be
// relied on; enums as lowercase words without their type prefix
// (FINISH_REASON_STOP_SEQUENCE -> "stop_sequence", a *_UNSPECIFIED zero ->
// null); 64-bit integers as JSON numbers (protobuf's own printer makes them
// strings). docs/cli.md describes the schema.
#pragma once

#include <google/protobuf/message.h>

#include <nlohmann/json.hpp>
#include <string>

namespace qwen3::cli {

nlohmann::json to_json_value(const google::protobuf::Message& message);
std::string to_json(const google::protobuf::Message& message);
// The word an enum value is printed as ("length", "pass", ...); "" for an
// UNSPECIFIED zero.
std::string enum_word(const google::protobuf::EnumValueDescriptor& value);
// One line, invalid UTF-8 replaced.
std::string dump_json(const nlohmann::json& j);

}  // namespace qwen3::cli
