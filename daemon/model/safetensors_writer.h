// Writes a .safetensors file front to back without holding the tensors in
// memory: declare every tensor first, then stream their bytes in order.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "model/model_dir.h"

namespace qwen3 {

struct TensorDecl {
  std::string name;
  DType dtype = DType::bf16;
  std::vector<int64_t> shape;
  size_t nbytes() const;
};

class SafetensorsWriter {
 public:
  // Creates `path` and writes the header. Throws qwen3::Error.
  SafetensorsWriter(const std::string& path, std::vector<TensorDecl> tensors,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  // Appends raw bytes of the tensors, in declaration order.
  void write(const void* data, size_t n);
  // Checks that exactly the declared bytes were written and closes the file.
  void finish();

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  uint64_t expected_bytes_ = 0;
  uint64_t written_bytes_ = 0;
};

}  // namespace qwen3
