// The daemon's configuration file parser and validation (daemon/service/config.cpp).
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "service/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("fuzz.conf", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0) return 0;
  if (size > 0 && pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  return fuzz_expecting_rejections([&] {
    qwen3::DaemonConfig c;
    qwen3::load_config_file(path, c, true);
    qwen3::validate_config(c);
    qwen3::describe_config(c);
  });
}
