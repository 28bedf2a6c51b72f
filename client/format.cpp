#include "format.h"

#include <cstdio>
#include <ctime>

namespace qwen3::cli {

std::string format_bytes(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::string format_duration(double seconds) {
  if (seconds < 0) seconds = 0;
  auto s = static_cast<long long>(seconds);
  char buf[48];
  if (s < 60) std::snprintf(buf, sizeof buf, "%.1fs", seconds);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%lldm %02llds", s / 60, s % 60);
  else if (s < 86400) std::snprintf(buf, sizeof buf, "%lldh %02lldm %02llds", s / 3600, s % 3600 / 60, s % 60);
  else std::snprintf(buf, sizeof buf, "%lldd %02lldh %02lldm", s / 86400, s % 86400 / 3600, s % 3600 / 60);
  return buf;
}

std::string format_unix_ms(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  time_t t = static_cast<time_t>(unix_ms / 1000);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace qwen3::cli
