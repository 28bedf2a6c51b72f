// Command-line parsing shared by qwen3-bpfd and the tools, on CLI11 (Debian
// libcli11-dev): the same -h/--help, --version, "--" and usage errors (exit 2,
// a message and a pointer to --help on stderr) in every program. qwen3-bpf
// itself has subcommands and its own help layout (client/command_line.cpp).
#pragma once

#include <CLI/CLI.hpp>

#include <iostream>
#include <string>

namespace qwen3::cli_parse {

constexpr int kExitUsage = 2;

// An app named `name` with --version printing "name VERSION".
inline void init(CLI::App& app, const std::string& name) {
  app.name(name);
  app.set_version_flag("--version", name + " " + QWEN3_VERSION);
  app.get_formatter()->column_width(34);
  app.get_formatter()->label("Usage", "usage");
}

inline void print_usage_error(const CLI::App& app, const std::string& message) {
  CLI::Formatter usage;  // only its one-line synopsis
  usage.label("Usage", "usage");
  std::cerr << app.get_name() << ": " << message << "\n"
            << usage.make_usage(&app, app.get_name()) << "(see '" << app.get_name() << " --help')\n";
}

// Parses argv. Returns -1 when the program should go on, otherwise the exit
// code: 0 after --help/--version (printed on stdout), 2 after a usage error.
inline int parse(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
    return -1;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // CallForHelp / CallForVersion
    print_usage_error(app, e.what());
    return kExitUsage;
  }
}

// A usage error found after parsing (a combination CLI11 cannot express).
[[noreturn]] inline void usage_error(const CLI::App& app, const std::string& message) {
  print_usage_error(app, message);
  std::exit(kExitUsage);
}

}  // namespace qwen3::cli_parse
