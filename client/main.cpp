// qwen3-bpf: the command-line client of qwen3-bpfd (a thin gRPC client on the
// daemon's Unix socket), plus offline tokenize/detokenize with --model DIR.
#include <google/protobuf/stubs/logging.h>

#include <iostream>
#include <string>
#include <vector>

#include "cli_error.h"
#include "command.h"
#include "command_line.h"
#include "error_output.h"
#include "interrupt.h"

int main(int argc, char** argv) {
  using namespace qwen3::cli;
  install_interrupt_watcher();
  // libprotobuf logs problems (e.g. a string that is not UTF-8) on stderr in
  // its own format before the call fails; the CLI reports the failure itself.
  google::protobuf::SetLogHandler(nullptr);
  const std::vector<std::string> args(argv + 1, argv + argc);
  ErrorOutput errors(argv_wants_json(args));
  std::string name;
  try {
    ParsedCommandLine parsed = parse_command_line(args, all_commands(), std::cout, std::cerr);
    if (!parsed.command) return parsed.exit_code;
    name = parsed.command->name;
    errors.set_json(parsed.args.has("json"));
    Command cmd(*parsed.command, std::move(parsed.args));
    return parsed.command->run(cmd);
  } catch (const CliError& e) {
    return errors.report(name, e);
  } catch (const std::exception& e) {
    return errors.report(name, CliError(e.what(), kExitFailed));
  }
}
