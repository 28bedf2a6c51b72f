#include "command_line.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <map>

#include "cli_error.h"

namespace qwen3::cli {
namespace {

// Where CLI11 puts what it parsed for one (sub)command.
struct Store {
  std::map<std::string, std::vector<std::string>> values;
  std::map<std::string, int> flags;
  std::vector<std::string> positional;

  void copy_to(Args& args) const {
    for (const auto& [name, vs] : values)
      for (const auto& v : vs) args.add_value(name, v);
    for (const auto& [name, n] : flags)
      if (n > 0) args.add_value(name, "");
  }
};

void declare(CLI::App& app, const std::vector<OptionSpec>& specs, Store& store) {
  for (const auto& s : specs) {
    std::string names = (s.short_name ? std::string("-") + s.short_name + "," : "") + "--" + s.name;
    if (s.takes_value) {
      app.add_option(names, store.values[s.name])
          ->expected(1)
          ->allow_extra_args(false)  // "--stop a b": b is an argument, not a second stop string
          ->multi_option_policy(s.repeatable ? CLI::MultiOptionPolicy::TakeAll : CLI::MultiOptionPolicy::Throw);
    } else {
      app.add_flag(names, store.flags[s.name])->disable_flag_override();  // "--json=yes" is an error
    }
  }
}

const CommandInfo* find_command(const std::vector<CommandInfo>& commands, const std::string& name) {
  for (const auto& c : commands)
    if (c.name == name || std::count(c.aliases.begin(), c.aliases.end(), name)) return &c;
  return nullptr;
}

std::string after_colon(const std::string& s) {
  auto p = s.find(": ");
  return p == std::string::npos ? s : s.substr(p + 2);
}

// CLI11's messages, in the words of the rest of the CLI.
std::string usage_message(const CLI::ParseError& e, const CLI::App* sub) {
  const std::string what = e.what();
  const std::string see = sub ? " (see 'qwen3-bpf " + sub->get_name() + " --help')" : " (see 'qwen3-bpf --help')";
  if (dynamic_cast<const CLI::ExtrasError*>(&e)) {
    std::string first = after_colon(what);
    first = first.substr(0, first.find(' '));
    if (!sub && !first.empty() && first[0] != '-') return "unknown command '" + first + "'" + see;
    return (first.size() > 1 && first[0] == '-' ? "unknown option " : "unexpected argument ") + first + see;
  }
  if (dynamic_cast<const CLI::ArgumentMismatch*>(&e)) {
    if (what.find("disallowed flag override") != std::string::npos)
      return "option --" + what.substr(0, what.find(' ')) + " takes no value" + see;
    const std::string option = what.substr(0, what.find(':'));
    if (what.find("missing") != std::string::npos) return "option " + option + " needs a value" + see;
    if (what.find("At Most") != std::string::npos) return "option " + option + " given more than once" + see;
  }
  return what + see;
}

}  // namespace

std::vector<OptionSpec> global_options() {
  return {
      {"socket", true, false, "PATH  daemon socket (default $QWEN3_BPF_SOCKET or /run/qwen3-bpfd/qwen3-bpfd.sock)",
       's'},
      {"json", false, false, "machine-readable JSON output (errors too, on stderr)"},
      {"help", false, false, "show this help", 'h'},
  };
}

std::string command_help(const CommandInfo& info) {
  std::string out = "usage: qwen3-bpf " + info.synopsis + "\n\n" + info.description + "\n\noptions:\n" +
                    describe_options(info.options) + "\nglobal options (before or after the command):\n" +
                    describe_options(global_options()) + "      --version                   print the version\n";
  if (!info.aliases.empty()) {
    out += "\nalias:";
    for (const auto& a : info.aliases) out += " " + a;
    out += "\n";
  }
  return out;
}

std::string top_level_usage(const std::vector<CommandInfo>& commands) {
  std::string out = "usage: qwen3-bpf [global options] COMMAND [options] [arguments]\n\ncommands:\n";
  for (const auto& c : commands) {
    std::string left = "  " + c.name;
    left.resize(std::max<size_t>(left.size() + 2, 16), ' ');
    out += left + c.summary + "\n";
  }
  out += "  help CMD      what 'CMD --help' prints\n\nglobal options (before or after the command):\n" +
         describe_options(global_options()) + "      --version                   print the version\n" +
         "\n'--' ends the options. Exit codes: 0 ok, 1 request failed, 2 usage or invalid request,\n"
         "3 daemon not running, 4 permission denied, 5 daemon not ready, 130 interrupted.\n";
  return out;
}

bool argv_wants_json(const std::vector<std::string>& argv) {
  for (const auto& a : argv) {
    if (a == "--") return false;
    if (a == "--json") return true;
  }
  return false;
}

ParsedCommandLine parse_command_line(const std::vector<std::string>& argv, const std::vector<CommandInfo>& commands,
                                     std::ostream& out, std::ostream& err) {
  CLI::App app{"qwen3-bpf", "qwen3-bpf"};
  app.set_help_flag();  // our own -h/--help (a global option), printed by command_help
  // At most one command: once it is seen, words like "status" or "help" are
  // the command's arguments (a prompt), not a second command.
  app.require_subcommand(0, 1);
  app.fallthrough();  // options the command does not know are the global ones
  Store globals;
  declare(app, global_options(), globals);
  bool version = false;
  app.add_flag("--version", version);

  std::map<const CLI::App*, const CommandInfo*> by_app;
  std::map<const CLI::App*, Store> stores;
  for (const auto& c : commands) {
    CLI::App* sub = app.add_subcommand(c.name, c.summary);
    for (const auto& a : c.aliases) sub->alias(a);
    Store& s = stores[sub];
    declare(*sub, c.options, s);
    sub->add_option("arguments", s.positional);
    by_app[sub] = &c;
  }
  CLI::App* help = app.add_subcommand("help", "show the help of a command");
  std::vector<std::string> help_topics;
  help->add_option("command", help_topics);

  std::vector<std::string> reversed(argv.rbegin(), argv.rend());  // CLI11 consumes from the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    auto subs = app.get_subcommands();
    throw usage_error(usage_message(e, subs.empty() ? nullptr : subs.front()));
  }

  ParsedCommandLine parsed;
  if (version) {
    out << "qwen3-bpf " << QWEN3_VERSION << "\n";
    return parsed;
  }
  auto subs = app.get_subcommands();
  if (subs.empty() || subs.front() == help) {
    if (subs.empty() && globals.flags["help"] == 0) {
      err << top_level_usage(commands);
      parsed.exit_code = kExitUsage;
      return parsed;
    }
    if (help_topics.size() > 1) throw usage_error("help takes one command name");
    if (help_topics.empty()) {
      out << top_level_usage(commands);
      return parsed;
    }
    const CommandInfo* c = find_command(commands, help_topics[0]);
    if (!c) throw usage_error("unknown command '" + help_topics[0] + "' (see 'qwen3-bpf --help')");
    out << command_help(*c);
    return parsed;
  }
  const CommandInfo* c = by_app.at(subs.front());
  if (globals.flags["help"] > 0) {
    out << command_help(*c);
    return parsed;
  }
  const Store& s = stores.at(subs.front());
  for (const auto& p : s.positional) parsed.args.add_positional(p);
  s.copy_to(parsed.args);
  globals.copy_to(parsed.args);
  parsed.command = c;
  return parsed;
}

}  // namespace qwen3::cli
