// The one table of qwen3-bpfd's configuration keys. Parsing (config files and
// flags), the defaults, --check's listing, what a SIGHUP applies and what needs a
// restart (config_reload), GetStatus's "restart needed", the daemon's --help and
// --print-config, conf/qwen3-bpfd.conf and the key table of docs/daemon.md all
// come from it (config_docs; the files are checked by the config_docs_match_table test).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "service/config.h"

namespace qwen3 {

// What a SIGHUP does with a changed key.
enum class OnReload {
  apply,    // the running daemon takes the new value
  restart,  // the running value stays in force; the log and GetStatus say a restart is needed
};

struct ConfigKey {
  std::string name;
  std::string section;        // the heading it is listed under (conf file, docs)
  std::string default_value;  // as a config file would say it
  std::string allowed;        // "1..100000", "bpf|reference", "absolute path or empty", ...
  OnReload on_reload = OnReload::restart;
  std::string flag;           // the command-line option that sets it ("" : none)
  std::string doc;            // what it does, one line
  // Sets the key from a file's text; a bad value throws qwen3::Error naming `where` and the key.
  std::function<void(DaemonConfig&, const std::string& value, const std::string& where)> parse;
  // The value as a config file would say it: parse(c, text(c)) leaves c unchanged.
  std::function<std::string(const DaemonConfig&)> text;
  // The value in force as --check shows it (e.g. the effective model directory).
  std::function<std::string(const DaemonConfig&)> describe;
  // Copies this key's value from `from` (what a reload keeps of a restart-only key).
  std::function<void(DaemonConfig& to, const DaemonConfig& from)> copy;
};

// Every key, in the order of the conf file.
const std::vector<ConfigKey>& config_keys();
// The key called `name`, or nullptr.
const ConfigKey* find_config_key(std::string_view name);
// "model_dir, backend, ...": for the unknown-key error.
std::string config_key_names();

// An integer in [lo, hi]; otherwise an error at `where` naming `key`.
int parse_config_int(const std::string& key, const std::string& value, const std::string& where, long lo, long hi);

}  // namespace qwen3
