#include "command.h"

#include <iostream>

#include "cli_error.h"

namespace qwen3::cli {
namespace {

std::vector<OptionSpec> with_globals(std::vector<OptionSpec> specs) {
  specs.push_back({"socket", true, false,
                   "PATH  daemon socket (default $QWEN3_BPF_SOCKET or /run/qwen3-bpfd/qwen3-bpfd.sock)"});
  specs.push_back({"json", false, false, "machine-readable JSON output"});
  specs.push_back({"help", false, false, "show this help"});
  return specs;
}

}  // namespace

Command::Command(const CommandInfo& info, const std::vector<std::string>& argv) {
  auto specs = with_globals(info.options);
  args_ = Args::parse(argv, specs);
  if (args_.has("help")) {
    std::cout << "usage: qwen3-bpf " << info.synopsis << "\n\n" << info.description << "\n\noptions:\n"
              << describe_options(specs);
    throw CliError("", kExitOk);
  }
}

std::string Command::socket_path() const { return resolve_socket_path(args_.get_or("socket", "")); }

DaemonClient& Command::client() {
  if (!client_) client_ = std::make_unique<DaemonClient>(socket_path());
  return *client_;
}

}  // namespace qwen3::cli
