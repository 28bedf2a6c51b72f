// The command line of qwen3-bpf, parsed with CLI11: global options
// (-s/--socket, --json, -h/--help, --version) before or after the command;
// the command's options and positional arguments in any order; "--" ends the
// options; `help CMD` prints what `CMD --help` prints.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "args.h"
#include "command.h"

namespace qwen3::cli {

struct ParsedCommandLine {
  const CommandInfo* command = nullptr;  // nullptr: nothing to run, exit with exit_code
  Args args;                             // the command's options and the global ones
  int exit_code = 0;
};

// argv without the program name. Help and version go to `out` (exit 0), the
// usage after a missing command to `err` (exit 2); other usage errors throw
// CliError(kExitUsage).
ParsedCommandLine parse_command_line(const std::vector<std::string>& argv, const std::vector<CommandInfo>& commands,
                                     std::ostream& out, std::ostream& err);

std::vector<OptionSpec> global_options();
std::string command_help(const CommandInfo& info);
std::string top_level_usage(const std::vector<CommandInfo>& commands);
// --json among the options (before any "--"): errors found while parsing are
// printed as JSON too.
bool argv_wants_json(const std::vector<std::string>& argv);

}  // namespace qwen3::cli
