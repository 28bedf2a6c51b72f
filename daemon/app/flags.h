// qwen3-bpfd's command line: --config, the flags that set a key of the table
// (config_keys.cpp), --check and --print-config; and the configuration they make.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "service/config.h"

namespace qwen3 {

struct Flags {
  std::string config_file;
  bool config_given = false;
  bool check = false;
  std::vector<std::pair<std::string, std::string>> overrides;  // config key -> value
};

// Returns the flags, or exits (0 after --help/--version/--print-config, 2 on a usage error).
Flags parse_flags(int argc, char** argv);
// The file named by the flags with the flags' keys over it, validated. Throws qwen3::Error.
DaemonConfig read_config(const Flags& flags);

}  // namespace qwen3
