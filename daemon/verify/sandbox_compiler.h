// Stage 2: clang -target bpf in a throw-away sandbox. The compiler runs in a
// fresh mount/network/IPC/UTS namespace, chrooted into an empty tmpfs that
// holds read-only binds of only the compiler, its shared libraries and the
// private include tree; as user nobody, with no new privileges, with CPU,
// address-space, file-size and wall-clock limits. Source goes in on stdin, the
// object comes back on stdout: nothing the compiler writes lands on the host.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "verify/verify_result.h"

namespace qwen3::verify {

// How the compiler is confined:
// - namespaces: fresh mount/net/IPC/UTS namespaces, chroot into an empty tmpfs
//   with read-only binds of the compiler and the include tree, user nobody,
//   plus Landlock on top when the kernel has it. Needs CAP_SYS_ADMIN,
//   CAP_SYS_CHROOT, CAP_SETUID/SETGID and mount(2).
// - landlock: no privileges needed: all capabilities dropped, no_new_privs,
//   Landlock lets the compiler open only the compiler's own directories, the
//   include tree and the request's temp dir, and no TCP.
// - automatic: namespaces if they work here (probed once), else landlock.
// Either way CPU/memory/file-size/time limits apply; if neither works the
// compile is refused (never run unconfined).
enum class SandboxMode { automatic, namespaces, landlock };

struct SandboxConfig {
  SandboxMode mode = SandboxMode::automatic;
  std::string clang = "clang-19";     // name in PATH or absolute path
  std::string include_dir;            // the private include tree (prepare_include_tree)
  std::string work_dir = "/tmp";      // parent of the per-compile sandbox dir
  int timeout_ms = 30000;             // wall clock; CPU limit is the same in seconds
  size_t memory_bytes = size_t{1} << 30;
  size_t max_object_bytes = size_t{16} << 20;
  size_t max_diagnostic_bytes = 64 * 1024;
};

enum class CompileStatus {
  ok,
  compile_error,   // clang rejected the program
  limit_exceeded,  // time, CPU, memory or output limit
  forbidden_input, // clang reports reading a file outside prog.c and the include tree
  infrastructure,  // the sandbox itself could not be set up
};

struct CompileOutcome {
  CompileStatus status = CompileStatus::infrastructure;
  std::string object;              // ELF bytes when ok
  std::string diagnostics;         // clang's stderr, sandbox paths scrubbed, crash dumps dropped
  std::vector<Diagnostic> parsed;  // errors/warnings with main-file line numbers
  std::string message;             // one-line summary
  std::string sandbox;             // how it was confined, e.g. "namespaces+landlock"
  // Every file clang read (its -MD dependency list: #include and #embed), as
  // "prog.c" and paths inside the include tree ("linux/bpf.h").
  std::vector<std::string> files_read;
  std::string forbidden_file;      // forbidden_input: the first file outside the allowed set
  double seconds = 0;
};

CompileOutcome compile_in_sandbox(const std::string& source, const SandboxConfig& config);

// The paths of a make-style dependency list ("target: a.c b.h \\\n c.h").
std::vector<std::string> parse_dependency_list(const std::string& text);

// Turns clang's stderr into diagnostics for the main file ("prog.c"); errors
// inside headers are attributed to the #include line that pulled them in.
std::vector<Diagnostic> parse_clang_diagnostics(const std::string& scrubbed_stderr);

// Replaces sandbox paths ("<stdin>", "/inc/...") by what the user wrote and
// drops crash stack dumps.
std::string scrub_compiler_output(const std::string& raw);

}  // namespace qwen3::verify
