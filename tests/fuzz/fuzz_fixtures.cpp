// The XDP fixtures JSON (daemon/verify/fixtures.cpp) and its hex packets.
#include "fuzz_common.h"
#include "verify/fixtures.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  QWEN3_FUZZ_INPUT(data, size);
  fuzz_expecting_rejections([&] {
    for (const auto& f : qwen3::verify::parse_fixtures_json(input)) (void)f;
  });
  std::string error;
  if (auto bytes = qwen3::verify::decode_hex(input, &error)) {
    if (qwen3::verify::decode_hex(qwen3::verify::encode_hex(*bytes), &error) != bytes) __builtin_trap();
  }
  qwen3::verify::parse_xdp_action(input);
  return 0;
}
