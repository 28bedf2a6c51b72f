#include "input.h"

#include <unistd.h>

#include <cstdint>

#include <iostream>
#include <iterator>

#include "cli_error.h"

namespace qwen3::cli {

std::string read_all_stdin() {
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

std::string text_from_args_or_stdin(const std::vector<std::string>& words, const std::string& what) {
  if (words.size() == 1 && words[0] == "-") return read_all_stdin();
  if (words.empty()) {
    if (isatty(STDIN_FILENO)) throw usage_error("give the " + what + " as arguments, or pipe it on stdin");
    return read_all_stdin();
  }
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

const std::string& require_utf8(const std::string& text, const std::string& what) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) ok = (p[i + k] & 0xc0) == 0x80;
    if (ok && len > 1) {
      // Overlong forms, surrogates and code points past U+10FFFF are not UTF-8 either.
      uint32_t cp = c & (0x7f >> len);
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (p[i + k] & 0x3f);
      static const uint32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= min_for_len[len] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
    }
    if (!ok) throw usage_error(what + " is not valid UTF-8 (byte " + std::to_string(i) + ")");
    i += len;
  }
  return text;
}

}  // namespace qwen3::cli
