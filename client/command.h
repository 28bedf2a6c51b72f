// What every subcommand shares: its option table plus the global options
// (--socket, --json, --help), and the daemon connection made on demand.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "daemon_client.h"

namespace qwen3::cli {

struct CommandInfo {
  std::string name;
  std::string synopsis;     // "generate [options] PROMPT"
  std::string description;  // one paragraph
  std::vector<OptionSpec> options;
};

class Command {
 public:
  // Parses argv (after the command name). Prints help and throws
  // CliError(kExitOk) on --help.
  Command(const CommandInfo& info, const std::vector<std::string>& argv);

  const Args& args() const { return args_; }
  bool json() const { return args_.has("json"); }
  DaemonClient& client();  // connects on first use
  std::string socket_path() const;

 private:
  Args args_;
  std::unique_ptr<DaemonClient> client_;
};

// Subcommands; each returns the process exit code or throws CliError.
int run_generate(const std::vector<std::string>& argv);
int run_chat(const std::vector<std::string>& argv);
int run_tokenize(const std::vector<std::string>& argv);
int run_detokenize(const std::vector<std::string>& argv);
int run_forward(const std::vector<std::string>& argv);
int run_sessions(const std::vector<std::string>& argv);
int run_status(const std::vector<std::string>& argv);
int run_health(const std::vector<std::string>& argv);
int run_verify(const std::vector<std::string>& argv);
int run_xdp_gen(const std::vector<std::string>& argv);

}  // namespace qwen3::cli
