// qwen3-bpf: the command-line client of qwen3-bpfd (a thin gRPC client on the
// daemon's Unix socket), plus offline tokenize/detokenize with --model DIR.
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "cli_error.h"
#include "command.h"
#include "interrupt.h"

namespace {

using Runner = int (*)(const std::vector<std::string>&);

const char* kUsage =
    "usage: qwen3-bpf COMMAND [options] [arguments]\n"
    "\n"
    "commands:\n"
    "  generate PROMPT         stream a completion (--chat, sampling and stop flags, --session)\n"
    "  chat                    interactive chat in a session (reads lines from stdin)\n"
    "  tokenize [TEXT]         text -> token ids (--model DIR: offline; --jsonl)\n"
    "  detokenize IDS...       token ids -> text (--model DIR: offline)\n"
    "  forward TEXT            next-token candidates of one forward pass (--top-k K)\n"
    "  sessions ACTION         list | show ID | rm ID | create [--max-context N]\n"
    "  status                  model, load progress, memory, sessions (--wait)\n"
    "  health                  SERVING / NOT_SERVING (--wait)\n"
    "  verify PROG.c           compile, verify and test-run an XDP program (--fixtures F)\n"
    "  xdp-gen TASK            let the model write an XDP program, verified and repaired\n"
    "\n"
    "global options: --socket PATH (or $QWEN3_BPF_SOCKET), --json, --help\n"
    "'qwen3-bpf COMMAND --help' describes a command. Exit codes: 0 ok, 1 request failed,\n"
    "2 usage, 3 daemon not running, 4 permission denied, 5 daemon not ready, 130 interrupted.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace qwen3::cli;
  install_interrupt_watcher();
  const std::map<std::string, Runner> commands{
      {"generate", run_generate}, {"chat", run_chat},       {"tokenize", run_tokenize},
      {"detokenize", run_detokenize}, {"forward", run_forward}, {"sessions", run_sessions},
      {"session", run_sessions},  {"status", run_status},   {"health", run_health},
      {"verify", run_verify},     {"xdp-gen", run_xdp_gen},
  };
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return kExitUsage;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    std::fputs(kUsage, stdout);
    return kExitOk;
  }
  if (name == "--version") {
    std::printf("qwen3-bpf %s\n", QWEN3_VERSION);
    return kExitOk;
  }
  auto it = commands.find(name);
  if (it == commands.end()) {
    std::fprintf(stderr, "qwen3-bpf: unknown command '%s'\n\n%s", name.c_str(), kUsage);
    return kExitUsage;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  try {
    return it->second(args);
  } catch (const CliError& e) {
    if (e.exit_code() == kExitOk) return kExitOk;  // --help
    std::fprintf(stderr, "qwen3-bpf %s: %s\n", name.c_str(), e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qwen3-bpf %s: %s\n", name.c_str(), e.what());
    return kExitFailed;
  }
}
