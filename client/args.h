// A small command-line parser: each command declares its options; options may
// appear anywhere among the positional arguments; "--" ends the options.
// "--name=value" and "--name value" are both accepted.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace qwen3::cli {

struct OptionSpec {
  std::string name;          // without the leading "--"
  bool takes_value = false;
  bool repeatable = false;
  std::string help;          // "VALUE  what it does" (shown by --help)
};

class Args {
 public:
  // Throws CliError(kExitUsage) naming the offending argument.
  static Args parse(const std::vector<std::string>& argv, const std::vector<OptionSpec>& specs);

  const std::vector<std::string>& positional() const { return positional_; }
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  std::vector<std::string> all(const std::string& name) const;
  // Typed getters; a malformed number is a usage error naming the option.
  std::optional<int64_t> get_int(const std::string& name, int64_t min, int64_t max) const;
  std::optional<double> get_double(const std::string& name, double min, double max) const;

 private:
  std::vector<std::string> positional_;
  std::map<std::string, std::vector<std::string>> values_;
};

// "  --name VALUE  help" lines for a command's --help.
std::string describe_options(const std::vector<OptionSpec>& specs);

// Parses "12", "12,13", "[12, 13]" style id lists; usage error on anything else.
std::vector<int32_t> parse_id_list(const std::vector<std::string>& words);

}  // namespace qwen3::cli
