#include "app/logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>

#include "common/error.h"

namespace qwen3 {

void setup_logging(const std::string& level) {
  auto logger = spdlog::stderr_logger_mt("qwen3-bpfd");
  if (std::getenv("JOURNAL_STREAM")) {
    logger->set_pattern("%l %v");
  } else {
    logger->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
  }
  spdlog::set_default_logger(logger);
  spdlog::flush_on(spdlog::level::info);
  set_log_level(level);
}

void set_log_level(const std::string& level) {
  const auto l = spdlog::level::from_str(level);
  if (l == spdlog::level::off && level != "off")
    throw invalid_argument("log_level must be trace|debug|info|warn|error|critical|off (got '" + level + "')");
  spdlog::set_level(l);
}

}  // namespace qwen3
