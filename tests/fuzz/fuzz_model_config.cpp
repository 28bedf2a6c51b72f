// config.json and generation_config.json (daemon/model/config_parser.cpp).
// The first byte chooses which; the rest is the file's text.
#include "fuzz_common.h"
#include "model/config_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  return fuzz_expecting_rejections([&] {
    if (data[0] & 1) {
      qwen3::ModelConfig c;
      qwen3::merge_generation_config(c, text, "generation_config.json");
    } else {
      qwen3::parse_model_config(text, "config.json");
    }
  });
}
