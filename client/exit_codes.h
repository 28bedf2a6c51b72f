// Exit codes of qwen3-bpf, documented in docs/cli.md. Scripts rely on them.
#pragma once

namespace qwen3::cli {

enum ExitCode : int {
  kExitOk = 0,
  kExitFailed = 1,          // the request failed (error status, verify fail, load failed)
  kExitUsage = 2,           // bad command line, or a request the daemon calls INVALID_ARGUMENT
  kExitNoDaemon = 3,        // qwen3-bpfd is not running / unreachable
  kExitPermission = 4,      // not root and not in group qwen3-bpf (or admin-only RPC)
  kExitUnavailable = 5,     // the daemon runs but is not serving yet (loading) or stopping
  kExitInterrupted = 130,   // Ctrl-C (the running request was cancelled)
};

// "failed", "usage", "not_running", "permission_denied", "unavailable", "interrupted"
inline const char* exit_code_word(int code) {
  switch (code) {
    case kExitOk: return "ok";
    case kExitUsage: return "usage";
    case kExitNoDaemon: return "not_running";
    case kExitPermission: return "permission_denied";
    case kExitUnavailable: return "unavailable";
    case kExitInterrupted: return "interrupted";
    default: return "failed";
  }
}

}  // namespace qwen3::cli
