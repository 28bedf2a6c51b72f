// The tokenizer.json normalizer. Qwen3 uses Unicode NFC (via ICU).
#pragma once

#include <string>
#include <string_view>

namespace qwen3 {

class Normalizer {
 public:
  enum class Kind { none, nfc };
  explicit Normalizer(Kind kind = Kind::none);

  Kind kind() const { return kind_; }
  // `text` must be valid UTF-8. Returns a view of `text` itself when nothing
  // changes (the common case), else of `storage`.
  std::string_view normalize(std::string_view text, std::string& storage) const;

 private:
  Kind kind_;
  const void* nfc_ = nullptr;  // icu::Normalizer2*, owned by ICU
};

}  // namespace qwen3
