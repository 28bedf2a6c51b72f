// Where a command's text comes from: its arguments (joined with spaces), or
// stdin when there are none or the only one is "-".
#pragma once

#include <string>
#include <vector>

namespace qwen3::cli {

// With no arguments and a terminal on stdin this is a usage error naming
// `what` (instead of silently waiting for input); "-" reads stdin anyway.
std::string text_from_args_or_stdin(const std::vector<std::string>& words, const std::string& what);
std::string read_all_stdin();
// The daemon's API carries text as UTF-8: anything else is a usage error
// naming `what` and the offset (instead of a protobuf serialization failure).
const std::string& require_utf8(const std::string& text, const std::string& what);

}  // namespace qwen3::cli
