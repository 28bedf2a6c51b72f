// GPT-2's byte-level alphabet: every byte maps to one printable code point so
// that vocabulary entries are valid strings. Printable Latin-1 bytes map to
// themselves; the others (controls, space, 0x7F-0xA0, 0xAD) map to U+0100+n.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace qwen3::byte_level {

// Code point standing for `byte`.
char32_t byte_to_code_point(uint8_t byte);

// The byte a code point stands for, if it belongs to the alphabet.
std::optional<uint8_t> code_point_to_byte(char32_t cp);

// UTF-8 of the alphabet string for raw bytes (what a vocabulary entry looks like).
std::string encode(std::string_view raw);

// Raw bytes of an alphabet string; nullopt if a character is not in the alphabet.
std::optional<std::string> decode(std::string_view alphabet_text);

}  // namespace qwen3::byte_level
