// One pass over all weights looking for NaN or Inf, spread over a few threads
// so the 0.6B-shape model (1.2 GB) is scanned in well under a second when cached.
#pragma once

#include <vector>

#include "model/model_dir.h"

namespace qwen3 {

// Throws qwen3::Error naming the file, the tensor and the first bad element.
void check_finite(const std::vector<const TensorView*>& tensors, int threads = 2);

}  // namespace qwen3
