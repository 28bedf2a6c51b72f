#include "args.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "cli_error.h"

namespace qwen3::cli {

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end() || it->second.empty()) return std::nullopt;
  return it->second.back();
}

std::string Args::get_or(const std::string& name, const std::string& fallback) const {
  auto v = get(name);
  return v ? *v : fallback;
}

std::vector<std::string> Args::all(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>{} : it->second;
}

std::optional<int64_t> Args::get_int(const std::string& name, int64_t min, int64_t max) const {
  auto v = get(name);
  if (!v) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  long long n = std::strtoll(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || errno == ERANGE)
    throw usage_error("--" + name + " wants an integer, got '" + *v + "'");
  if (n < min || n > max)
    throw usage_error("--" + name + " must be between " + std::to_string(min) + " and " +
                      std::to_string(max) + ", got " + *v);
  return n;
}

std::optional<double> Args::get_double(const std::string& name, double min, double max) const {
  auto v = get(name);
  if (!v) return std::nullopt;
  char* end = nullptr;
  double d = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || !std::isfinite(d))
    throw usage_error("--" + name + " wants a number, got '" + *v + "'");
  if (d < min || d > max) {
    std::ostringstream m;
    m << "--" << name << " must be between " << min << " and " << max << ", got " << *v;
    throw usage_error(m.str());
  }
  return d;
}

std::string describe_options(const std::vector<OptionSpec>& specs) {
  std::string out;
  for (const auto& s : specs) {
    std::string left = std::string("  ") + (s.short_name ? std::string("-") + s.short_name + ", " : "    ") +
                       "--" + s.name;
    std::string help = s.help;
    if (s.takes_value) {
      // The help text starts with the value's placeholder ("N  what it does").
      auto gap = help.find("  ");
      if (gap != std::string::npos) {
        left += " " + help.substr(0, gap);
        help = help.substr(gap + 2);
      } else {
        left += " VALUE";
      }
    }
    if (left.size() < 34) left.resize(34, ' ');
    else left += "  ";
    out += left + help + "\n";
  }
  return out;
}

std::vector<int32_t> parse_id_list(const std::vector<std::string>& words) {
  std::vector<int32_t> ids;
  for (const auto& word : words) {
    std::string token;
    auto flush = [&] {
      if (token.empty()) return;
      char* end = nullptr;
      errno = 0;
      long v = std::strtol(token.c_str(), &end, 10);
      if (*end != '\0' || errno == ERANGE || v < 0 || v > INT32_MAX)
        throw usage_error("not a token id: '" + token + "' (ids are integers >= 0)");
      ids.push_back(static_cast<int32_t>(v));
      token.clear();
    };
    for (char c : word) {
      if (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '[' || c == ']') flush();
      else token += c;
    }
    flush();
  }
  return ids;
}

}  // namespace qwen3::cli
