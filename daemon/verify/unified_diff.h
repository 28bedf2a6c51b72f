// A unified diff of two texts, line by line (what `verify --fix` prints).
#pragma once

#include <string>

namespace qwen3::verify {

// "" when the texts are equal; `name` labels both sides (a/NAME, b/NAME).
std::string unified_diff(const std::string& before, const std::string& after, const std::string& name,
                         int context = 3);

}  // namespace qwen3::verify
