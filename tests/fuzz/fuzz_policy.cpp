// The verify policy scanner (daemon/verify/policy.cpp) on arbitrary C source.
#include "fuzz_common.h"
#include "verify/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  QWEN3_FUZZ_INPUT(data, size);
  return fuzz_expecting_rejections([&] {
    qwen3::verify::check_policy(input, {});
    qwen3::verify::first_line_naming(input, "main");
    qwen3::verify::is_allowed_header(input);
    qwen3::verify::is_xdp_section(input);
  });
}
