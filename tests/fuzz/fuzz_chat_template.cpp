// The chat template (daemon/tokenizer/chat_template.cpp) on arbitrary
// conversations: roles and contents from the input, split at 0xff bytes; the
// first byte carries the flags.
#include <vector>

#include "fuzz_common.h"
#include "tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz_tokenizer();  // loaded before the first input
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& tok = fuzz_tokenizer();
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  std::vector<std::string> parts(1);
  for (size_t i = 1; i < size; ++i) {
    if (data[i] == 0xff) parts.emplace_back();
    else parts.back() += static_cast<char>(data[i]);
  }
  static const char* roles[] = {"system", "user", "assistant", "tool"};
  std::vector<qwen3::ChatMessage> messages;
  for (size_t i = 0; i < parts.size(); ++i) {
    // Mostly the known roles (as the service only lets those through), sometimes raw bytes.
    const std::string role = (flags & 4) && i == 0 ? parts[i] : roles[(flags + i) % 4];
    messages.push_back({role, parts[i]});
  }
  return fuzz_expecting_rejections([&] {
    const std::string text = tok->apply_chat_template(messages, flags & 1, flags & 2);
    tok->encode(text, true);
  });
}
