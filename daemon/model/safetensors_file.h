// One mmapped .safetensors file: 8-byte little-endian header length, a JSON
// header {name: {dtype, shape, data_offsets}}, then the raw tensor bytes.
// Everything about the header is checked before any tensor is handed out.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/mapped_file.h"
#include "model/model_dir.h"

namespace qwen3 {

// Headers larger than this are rejected before they are parsed.
constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

class SafetensorsFile {
 public:
  // Maps and validates `path`: header length and JSON, dtypes (BF16/F16/F32),
  // shapes, data_offsets in range, matching the shape, and not overlapping.
  // Throws qwen3::Error naming the file and the tensor.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  size_t size() const { return file_.size(); }
  const uint8_t* data() const { return file_.data(); }

 private:
  MappedFile file_;
  std::vector<TensorView> tensors_;
};

}  // namespace qwen3
