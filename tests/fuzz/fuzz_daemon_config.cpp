// The daemon's configuration file parser and validation (daemon/service/config.cpp).
#include "fuzz_common.h"
#include "service/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = as_file(data, size);
  if (path.empty()) return 0;
  return fuzz_expecting_rejections([&] {
    qwen3::DaemonConfig c;
    qwen3::load_config_file(path, c, true);
    qwen3::validate_config(c);
    qwen3::describe_config(c);
  });
}
