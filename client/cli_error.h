// The one error type of the CLI: a message for stderr and the exit code.
#pragma once

#include <stdexcept>
#include <string>

#include "exit_codes.h"

namespace qwen3::cli {

class CliError : public std::runtime_error {
 public:
  CliError(const std::string& message, int exit_code) : std::runtime_error(message), code_(exit_code) {}
  int exit_code() const { return code_; }

 private:
  int code_;
};

inline CliError usage_error(const std::string& m) { return CliError(m, kExitUsage); }

}  // namespace qwen3::cli
