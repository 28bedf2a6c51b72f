#include "json_output.h"

#include <google/protobuf/util/json_util.h>

namespace qwen3::cli {

std::string to_json(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  options.add_whitespace = false;
  std::string out;
  auto status = google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) return std::string("{\"error\":\"cannot print JSON\"}");
  return out;
}

}  // namespace qwen3::cli
