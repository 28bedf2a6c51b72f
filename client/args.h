// What a command line parsed into: each command declares its options as
// OptionSpecs (command_line.cpp hands them to CLI11), and reads the result
// through Args, whose typed getters turn bad values into usage errors.
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
  char short_name = 0;       // 'n' for -n, or none
};

class Args {
 public:
  const std::vector<std::string>& positional() const { return positional_; }
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  std::vector<std::string> all(const std::string& name) const;
  // Typed getters; a malformed number is a usage error naming the option.
  std::optional<int64_t> get_int(const std::string& name, int64_t min, int64_t max) const;
  std::optional<double> get_double(const std::string& name, double min, double max) const;

  // Filled by the parser.
  void add_positional(std::string value) { positional_.push_back(std::move(value)); }
  void add_value(const std::string& name, std::string value) { values_[name].push_back(std::move(value)); }

 private:
  std::vector<std::string> positional_;
  std::map<std::string, std::vector<std::string>> values_;
};

// "  -n, --name VALUE  help" lines for a command's --help.
std::string describe_options(const std::vector<OptionSpec>& specs);

// Parses "12", "12,13", "[12, 13]" style id lists; usage error on anything else.
std::vector<int32_t> parse_id_list(const std::vector<std::string>& words);

}  // namespace qwen3::cli
