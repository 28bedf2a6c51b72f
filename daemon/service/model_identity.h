// The identity of a loaded model: SHA-256 over its config.json and every
// tensor (name, dtype, shape and bytes, in name order), as 64 hex digits.
// Two directories with the same config and weights have the same identity,
// whatever their paths, file names or shard layout. Computed once per loaded
// model, on first use (at the 0.6B shape it reads the 1.2 GB of weights
// once: about a second with the CPU's SHA extensions); session exports name
// the model by it (session_file.h).
#pragma once

#include <memory>
#include <string>

namespace qwen3 {

class ModelDir;

// Throws qwen3::Error when config.json cannot be read.
std::string model_identity(const std::shared_ptr<const ModelDir>& model);

// SHA-256 of `data` as 64 lowercase hex digits.
std::string sha256_hex(const void* data, size_t size);

}  // namespace qwen3
