// JSON output: protobuf messages as one line with the .proto field names and
// every field present (zeros included), so scripts can rely on the keys.
#pragma once

#include <google/protobuf/message.h>

#include <string>

namespace qwen3::cli {

std::string to_json(const google::protobuf::Message& message);

}  // namespace qwen3::cli
