// The safetensors header parser (daemon/model/safetensors_file.cpp) on
// arbitrary file contents: header length, JSON header, dtypes, shapes, offsets.
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz_common.h"
#include "model/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("fuzz.safetensors", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0) return 0;
  if (size > 0 && pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  return fuzz_expecting_rejections([&] {
    qwen3::SafetensorsFile f(path);
    size_t bytes = 0;
    for (const auto& t : f.tensors()) bytes += t.nbytes;
    if (bytes > f.size()) __builtin_trap();  // a validated tensor must lie inside the file
  });
}
