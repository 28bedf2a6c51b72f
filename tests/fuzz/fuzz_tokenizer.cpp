// The Qwen3 tokenizer (daemon/tokenizer) on arbitrary bytes: encode (with and
// without special tokens), decode of arbitrary ids, streaming decode, and the
// round trip of valid UTF-8. QWEN3_FUZZ_TOKENIZER_DIR names the tokenizer.json
// directory (the script passes third_party/qwen3-tokenizer).
#include <vector>

#include "fuzz_common.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz_tokenizer();  // loaded before the first input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& tok = fuzz_tokenizer();
  QWEN3_FUZZ_INPUT(data, size);
  fuzz_expecting_rejections([&] {
    const auto ids = tok->encode(input, true);
    // Text that encoded is valid UTF-8: it must come back as its NFC form
    // (Qwen3's normalizer), which is the text itself when already NFC.
    static const qwen3::Normalizer nfc(qwen3::Normalizer::Kind::nfc);
    std::string storage;
    if (tok->decode(ids) != nfc.normalize(input, storage)) __builtin_trap();
    tok->encode(input, false);
  });
  // The bytes as token ids (in range or not), whole and streamed.
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 4 <= size; i += 4) {
    int32_t v;
    __builtin_memcpy(&v, data + i, 4);
    ids.push_back(v % (tok->vocab_size() + 8));
  }
  fuzz_expecting_rejections([&] { tok->decode(ids, size & 1); });
  fuzz_expecting_rejections([&] {
    qwen3::StreamDecoder s(tok, size & 2);
    for (int32_t id : ids) s.push(id);
    s.flush();
  });
  return 0;
}
