// What every subcommand shares: its declaration (name, help, option table,
// runner), the parsed arguments with the global options (--socket, --json),
// and the daemon connection made on demand.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "args.h"
#include "daemon_client.h"

namespace qwen3::cli {

class Command;

struct CommandInfo {
  std::string name;
  std::string summary;      // one line for the top-level help
  std::string synopsis;     // "generate [options] PROMPT..."
  std::string description;  // one paragraph
  std::vector<OptionSpec> options;
  int (*run)(Command&) = nullptr;  // returns the exit code or throws CliError
  std::vector<std::string> aliases = {};
};

class Command {
 public:
  Command(const CommandInfo& info, Args args) : info_(info), args_(std::move(args)) {}

  const CommandInfo& info() const { return info_; }
  const Args& args() const { return args_; }
  bool json() const { return args_.has("json"); }
  DaemonClient& client();  // connects on first use
  std::string socket_path() const;

 private:
  const CommandInfo& info_;
  Args args_;
  std::unique_ptr<DaemonClient> client_;
};

// The subcommands, in the order of the top-level help.
const std::vector<CommandInfo>& all_commands();

CommandInfo generate_command();
CommandInfo chat_command();
CommandInfo tokenize_command();
CommandInfo detokenize_command();
CommandInfo forward_command();
CommandInfo sessions_command();
CommandInfo drain_command();
CommandInfo status_command();
CommandInfo health_command();
CommandInfo verify_command();
CommandInfo xdp_gen_command();
CommandInfo udp_command();

}  // namespace qwen3::cli
