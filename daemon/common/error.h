// Errors that reach a user: the message names what to fix (file, tensor, key,
// limit, verifier line); the kind lets the service pick a gRPC status code.
#pragma once

#include <stdexcept>
#include <string>

namespace qwen3 {

enum class ErrorKind {
  invalid_argument,     // bad input from the caller
  not_found,            // unknown session, missing file
  resource_exhausted,   // a configured limit (KV budget, session count, context)
  failed_precondition,  // state does not allow it now (session busy)
  unavailable,          // not loaded yet, shutting down
  internal,             // a bug or an unexpected kernel/system failure
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ErrorKind kind = ErrorKind::internal)
      : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// Shorthands for the common kinds.
inline Error invalid_argument(const std::string& m) { return Error(m, ErrorKind::invalid_argument); }
inline Error not_found(const std::string& m) { return Error(m, ErrorKind::not_found); }
inline Error resource_exhausted(const std::string& m) { return Error(m, ErrorKind::resource_exhausted); }
inline Error failed_precondition(const std::string& m) { return Error(m, ErrorKind::failed_precondition); }
inline Error unavailable(const std::string& m) { return Error(m, ErrorKind::unavailable); }

}  // namespace qwen3
