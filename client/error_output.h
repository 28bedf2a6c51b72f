// How a failed command tells the user: "qwen3-bpf CMD: message" on stderr, or
// under --json one object {"code", "exit_code", "message"} on stderr so a
// script reading JSON never has to parse prose.
#pragma once

#include <string>

#include "cli_error.h"

namespace qwen3::cli {

class ErrorOutput {
 public:
  explicit ErrorOutput(bool json) : json_(json) {}
  void set_json(bool json) { json_ = json; }
  // Prints the error and returns its exit code.
  int report(const std::string& command, const CliError& e) const;

 private:
  bool json_;
};

}  // namespace qwen3::cli
