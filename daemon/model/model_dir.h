// A Hugging Face model directory (config.json, generation_config.json,
// model.safetensors or a sharded index, tokenizer files), validated once and
// mmapped read-only. Every inconsistency is a qwen3::Error naming the file and
// the tensor or key.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/model_config.h"

namespace qwen3 {

enum class DType { bf16, f16, f32 };
const char* dtype_name(DType t);
size_t dtype_size(DType t);

// A tensor inside a mapped safetensors file. Row-major, as stored.
struct TensorView {
  std::string name;
  std::string file;              // the safetensors file it lives in
  DType dtype = DType::bf16;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;

  int64_t numel() const;
  int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  int64_t cols() const;          // product of all dimensions but the first
  float at(int64_t i) const;     // element i converted to float
  // Converts elements [first, first + out.size()) to float.
  void to_float(std::span<float> out, int64_t first = 0) const;
};

class ModelDir {
 public:
  // Opens and validates everything (config, headers, names, shapes, dtypes,
  // offsets, NaN/Inf). Throws qwen3::Error.
  static std::shared_ptr<const ModelDir> open(const std::string& dir);
  ~ModelDir();

  const std::string& path() const;
  const ModelConfig& config() const;
  std::vector<std::string> tensor_names() const;
  bool has_tensor(const std::string& name) const;
  // Throws qwen3::Error(not_found) naming the tensor and the directory.
  const TensorView& tensor(const std::string& name) const;
  const TensorView& embed_tokens() const;
  // lm_head.weight, or embed_tokens when the model ties them.
  const TensorView& lm_head() const;
  // "model.layers.<layer>.<suffix>", e.g. layer_tensor(3, "self_attn.q_proj.weight").
  const TensorView& layer_tensor(int layer, const std::string& suffix) const;
  // Total bytes of tensor data mapped.
  size_t tensor_bytes() const;

  struct Impl;

 private:
  explicit ModelDir(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace qwen3
