// UTF-8 helpers shared by encode (strict validation) and decode (lossy
// replacement with the same policy as Rust's String::from_utf8_lossy and the
// WHATWG TextDecoder: one U+FFFD per maximal invalid subpart).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace qwen3::utf8 {

// Byte offset of the first invalid byte, or npos when `s` is valid UTF-8
// (no overlongs, no surrogates, nothing above U+10FFFF).
size_t find_invalid(std::string_view s);

// Length of the valid sequence starting at s[i] (1..4), or 0 if the bytes at i
// do not start a complete valid sequence. When the sequence is a valid but
// truncated prefix that reaches the end of `s`, `*truncated` is set.
size_t sequence_length(std::string_view s, size_t i, bool* truncated = nullptr);

// Appends `s` to `out`, replacing every maximal invalid subpart with U+FFFD.
void append_lossy(std::string& out, std::string_view s);

// Number of trailing bytes of `s` that form a valid but incomplete sequence
// (0 when `s` ends on a character boundary or with invalid bytes).
size_t incomplete_tail(std::string_view s);

// Decodes the code point starting at s[i] (which must be valid) and advances i.
char32_t next_code_point(std::string_view s, size_t& i);

// Code point of the last character of `s` (which must be valid and non-empty).
char32_t last_code_point(std::string_view s, size_t* start = nullptr);

void append_code_point(std::string& out, char32_t cp);

inline constexpr std::string_view replacement_character = "\xEF\xBF\xBD";

}  // namespace qwen3::utf8
