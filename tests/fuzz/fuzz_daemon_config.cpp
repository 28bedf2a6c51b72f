// The daemon's configuration file parser and validation (daemon/service/config.cpp)
// over the key table (config_keys.cpp).
#include <cstdlib>

#include "fuzz_common.h"
#include "service/config.h"
#include "service/config_keys.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = as_file(data, size);
  if (path.empty()) return 0;
  return fuzz_expecting_rejections([&] {
    qwen3::DaemonConfig c;
    qwen3::load_config_file(path, c, true);
    qwen3::validate_config(c);
    qwen3::describe_config(c);
    // Every accepted value round-trips through its text (what a reload and GetStatus compare).
    qwen3::DaemonConfig again;
    for (const auto& k : qwen3::config_keys()) {
      try {
        k.parse(again, k.text(c), "round trip");
      } catch (...) {
        std::abort();
      }
      if (k.text(again) != k.text(c)) std::abort();
    }
  });
}
