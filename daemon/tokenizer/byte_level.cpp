#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace qwen3::byte_level {
namespace {

bool maps_to_itself(unsigned b) {
  return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct Tables {
  std::array<char32_t, 256> to_cp{};
  std::array<int16_t, 512> from_cp{};  // every alphabet code point is < 0x200
  Tables() {
    from_cp.fill(-1);
    unsigned shifted = 0;
    for (unsigned b = 0; b < 256; ++b) {
      char32_t cp = maps_to_itself(b) ? b : 0x100 + shifted++;
      to_cp[b] = cp;
      from_cp[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_code_point(uint8_t byte) { return tables().to_cp[byte]; }

std::optional<uint8_t> code_point_to_byte(char32_t cp) {
  if (cp >= 512) return std::nullopt;
  int16_t b = tables().from_cp[cp];
  if (b < 0) return std::nullopt;
  return static_cast<uint8_t>(b);
}

std::string encode(std::string_view raw) {
  std::string out;
  out.reserve(raw.size() * 2);
  for (char c : raw) utf8::append_code_point(out, byte_to_code_point(static_cast<uint8_t>(c)));
  return out;
}

std::optional<std::string> decode(std::string_view alphabet_text) {
  if (utf8::find_invalid(alphabet_text) != std::string_view::npos) return std::nullopt;
  std::string out;
  out.reserve(alphabet_text.size());
  size_t i = 0;
  while (i < alphabet_text.size()) {
    auto b = code_point_to_byte(utf8::next_code_point(alphabet_text, i));
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

}  // namespace qwen3::byte_level
