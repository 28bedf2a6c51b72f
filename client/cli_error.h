// The one error type of the CLI: a message for stderr, the exit code, and a
// short code word for --json ("not_found", "usage", "not_running", ...).
#pragma once

#include <stdexcept>
#include <string>

#include "exit_codes.h"

namespace qwen3::cli {

class CliError : public std::runtime_error {
 public:
  CliError(const std::string& message, int exit_code, std::string code = "")
      : std::runtime_error(message), exit_code_(exit_code), code_(std::move(code)) {}
  int exit_code() const { return exit_code_; }
  // The daemon's status code in lowercase when it answered, else the kind of
  // failure the exit code stands for.
  std::string code() const { return code_.empty() ? exit_code_word(exit_code_) : code_; }

 private:
  int exit_code_;
  std::string code_;
};

inline CliError usage_error(const std::string& m) { return CliError(m, kExitUsage); }

}  // namespace qwen3::cli
