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

// For unsigned options: CLI11 would read "-3" as a huge number.
inline CLI::Validator non_negative_integer() {
  return CLI::Validator(
      [](std::string& v) -> std::string {
        if (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos) return "";
        return "wants a non-negative integer, got '" + v + "'";
      },
      "UINT");
}

// Parses argv. Returns -1 when the program should go on, otherwise the exit
// code: 0 after --help/--version (printed on stdout), 2 after a usage error.
inline int parse(CLI::App& app, int argc, const char* const* argv) {
  // Extras are collected rather than thrown so that an unknown option is what
  // gets reported, not a "--model is required" that CLI11 would check first.
  app.allow_extras();
  auto unexpected = [&app] {
    std::string words;
    for (const auto& w : app.remaining()) words += " " + w;
    return (words.size() > 1 && words[1] == '-' ? "unknown option:" : "unexpected argument:") + words;
  };
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // CallForHelp / CallForVersion
    print_usage_error(app, app.remaining().empty() ? e.what() : unexpected());
    return kExitUsage;
  }
  if (!app.remaining().empty()) {
    print_usage_error(app, unexpected());
    return kExitUsage;
  }
  return -1;
}

// A usage error found after parsing (a combination CLI11 cannot express).
[[noreturn]] inline void usage_error(const CLI::App& app, const std::string& message) {
  print_usage_error(app, message);
  std::exit(kExitUsage);
}

}  // namespace qwen3::cli_parse
