// The daemon's side of a sandboxed compiler process: feed it the source, collect its object, its
// stderr and its dependency list within byte and time limits, then reap it (killing its process
// group when a limit was hit). Every fd passed in is closed on return.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <string>

namespace qwen3::verify {

struct ChildStreams {
  int in_fd = -1;    // the child's stdin (a socket, so a child that stops reading cannot SIGPIPE us)
  int out_fd = -1;   // the object file
  int err_fd = -1;   // diagnostics
  int deps_fd = -1;  // the -MD dependency list
};

struct ChildLimits {
  std::chrono::steady_clock::time_point deadline;
  size_t max_object_bytes = 0;
  size_t max_stderr_bytes = 0;  // more stderr is dropped, not an error
  size_t max_deps_bytes = 0;
};

struct ChildOutput {
  std::string object, stderr_text, deps_text;
  bool timed_out = false, object_too_big = false, deps_too_big = false;
  int status = 0;  // waitpid status
};

ChildOutput collect_child(pid_t pid, ChildStreams fds, const std::string& input, const ChildLimits& limits);

}  // namespace qwen3::verify
