// Reads config.json (and generation_config.json when present) of a Qwen3
// directory into a ModelConfig, rejecting anything that is not a dense Qwen3
// model or whose numbers make no sense. Errors name the file and the key.
#pragma once

#include <string>

#include "model/model_config.h"

namespace qwen3 {

// `config_text` is the content of `config_path` (used only in messages).
ModelConfig parse_model_config(const std::string& config_text, const std::string& config_path);

// Merges eos ids and sampling defaults from generation_config.json into `config`.
void merge_generation_config(ModelConfig& config, const std::string& text, const std::string& path);

// Reads <dir>/config.json and, if it exists, <dir>/generation_config.json.
ModelConfig load_model_config(const std::string& dir);

}  // namespace qwen3
