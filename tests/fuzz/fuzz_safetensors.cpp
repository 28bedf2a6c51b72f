// The safetensors header parser (daemon/model/safetensors_file.cpp) on
// arbitrary file contents: header length, JSON header, dtypes, shapes, offsets.
#include "fuzz_common.h"
#include "model/safetensors_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = as_file(data, size);
  if (path.empty()) return 0;
  return fuzz_expecting_rejections([&] {
    qwen3::SafetensorsFile f(path);
    size_t bytes = 0;
    for (const auto& t : f.tensors()) bytes += t.nbytes;
    if (bytes > f.size()) __builtin_trap();  // a validated tensor must lie inside the file
  });
}
