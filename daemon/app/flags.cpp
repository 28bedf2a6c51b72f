#include "app/flags.h"

#include <cstdio>
#include <cstdlib>

#include "cli_parse.h"
#include "service/config_docs.h"
#include "service/config_keys.h"

namespace qwen3 {

namespace {

constexpr const char* kDefaultConfig = "/etc/qwen3-bpfd/qwen3-bpfd.conf";

}  // namespace

Flags parse_flags(int argc, char** argv) {
  Flags f;
  f.config_file = kDefaultConfig;
  CLI::App app{"Serves a Qwen3 model whose forward pass runs in verified eBPF programs, over gRPC on a Unix\n"
               "socket. Options override the configuration file's keys (docs/daemon.md)."};
  qwen3::cli_parse::init(app, "qwen3-bpfd");
  app.add_option("--config", f.config_file, "configuration file (a missing default is fine)")->capture_default_str();
  // The keys of the table that have a flag (config_keys.cpp).
  std::vector<const ConfigKey*> keyed;
  for (const auto& k : config_keys())
    if (!k.flag.empty()) keyed.push_back(&k);
  std::vector<std::string> values(keyed.size());
  std::vector<CLI::Option*> options;
  for (size_t i = 0; i < keyed.size(); ++i)
    options.push_back(app.add_option(keyed[i]->flag, values[i], flag_help(*keyed[i])));
  bool foreground = false;  // accepted and ignored
  app.add_flag("--foreground", foreground, "accepted for compatibility; the daemon never forks");
  app.add_flag("--check", f.check, "load everything, run a short self-test, exit 0 (ok) or 1");
  bool print_config = false;
  app.add_flag("--print-config", print_config,
               "print the commented configuration file (every key at its default) and exit");
  if (int rc = qwen3::cli_parse::parse(app, argc, argv); rc >= 0) std::exit(rc);
  if (print_config) {
    std::fputs(config_file_text().c_str(), stdout);
    std::exit(0);
  }
  f.config_given = app.count("--config") > 0;
  for (size_t i = 0; i < keyed.size(); ++i)
    if (options[i]->count() > 0) f.overrides.emplace_back(keyed[i]->name, values[i]);
  return f;
}

DaemonConfig read_config(const Flags& flags) {
  DaemonConfig c;
  load_config_file(flags.config_file, c, flags.config_given);
  for (const auto& [key, value] : flags.overrides) set_config_value(c, key, value, "command line (" + key + ")");
  validate_config(c);
  return c;
}

}  // namespace qwen3
