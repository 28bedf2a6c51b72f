#include "command.h"

namespace qwen3::cli {

std::string Command::socket_path() const { return resolve_socket_path(args_.get_or("socket", "")); }

DaemonClient& Command::client() {
  if (!client_) client_ = std::make_unique<DaemonClient>(socket_path());
  return *client_;
}

const std::vector<CommandInfo>& all_commands() {
  static const std::vector<CommandInfo> commands{
      generate_command(), chat_command(),    tokenize_command(), detokenize_command(), forward_command(),
      sessions_command(), status_command(),  health_command(),   verify_command(),     xdp_gen_command(),
      udp_command(),        drain_command(),
  };
  return commands;
}

}  // namespace qwen3::cli
