#include "tokenizer/added_tokens.h"

#include <unicode/uchar.h>

#include "tokenizer/utf8.h"

namespace qwen3 {

bool is_unicode_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

bool is_word_character(char32_t cp) {
  if (cp < 0x80) {
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9') ||
           cp == '_';
  }
  auto c = static_cast<UChar32>(cp);
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC) || u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL)) {
    return true;
  }
  int8_t type = u_charType(c);
  return type == U_NON_SPACING_MARK || type == U_ENCLOSING_MARK ||
         type == U_COMBINING_SPACING_MARK || type == U_DECIMAL_DIGIT_NUMBER ||
         type == U_CONNECTOR_PUNCTUATION;
}

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens,
                                     std::vector<std::string> contents)
    : tokens_(std::move(tokens)) {
  trie_.push_back(Node{});
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& s = contents[t];
    if (s.empty()) continue;  // an empty token can never match
    first_byte_[static_cast<unsigned char>(s[0])] = true;
    int32_t node = 0;
    for (unsigned char b : s) {
      int32_t next = child(node, b);
      if (next < 0) {
        next = static_cast<int32_t>(trie_.size());
        Node n;
        n.byte = b;
        n.next_sibling = trie_[node].first_child;
        trie_.push_back(n);
        trie_[node].first_child = next;
      }
      node = next;
    }
    // A duplicate content keeps the first token (deterministic).
    if (trie_[node].token < 0) trie_[node].token = static_cast<int32_t>(t);
  }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char byte) const {
  for (int32_t c = trie_[node].first_child; c >= 0; c = trie_[c].next_sibling) {
    if (trie_[c].byte == byte) return c;
  }
  return -1;
}

int32_t AddedTokenMatcher::longest_at(std::string_view text, size_t pos, size_t& length) const {
  int32_t node = 0;
  int32_t best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<unsigned char>(text[i]));
    if (node < 0) break;
    if (trie_[node].token >= 0) {
      best = trie_[node].token;
      length = i + 1 - pos;
    }
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, bool parse_special,
                              std::vector<Piece>& out) const {
  size_t consumed = 0;  // end of the last emitted piece
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    size_t length = 0;
    int32_t t = longest_at(text, pos, length);
    if (t < 0) {
      ++pos;
      continue;
    }
    const AddedToken& token = tokens_[t];
    size_t start = pos;
    size_t stop = pos + length;
    pos = stop;  // like a non-overlapping match iterator, even when the match is discarded
    if (token.special && !parse_special) continue;
    if (token.single_word) {
      bool space_before = start == 0 || !is_word_character(utf8::last_code_point(text.substr(0, start)));
      bool space_after = stop == text.size();
      if (!space_after) {
        size_t i = stop;
        space_after = !is_word_character(utf8::next_code_point(text, i));
      }
      if (!space_before || !space_after) continue;
    }
    if (token.lstrip) {
      size_t new_start = start;
      while (new_start > 0) {
        size_t char_start = 0;
        char32_t cp = utf8::last_code_point(text.substr(0, new_start), &char_start);
        if (!is_unicode_white_space(cp)) break;
        new_start = char_start;
      }
      start = new_start > consumed ? new_start : consumed;
    }
    if (token.rstrip) {
      // The search resumes at the end of the match itself, as in HF.
      while (stop < text.size()) {
        size_t i = stop;
        if (!is_unicode_white_space(utf8::next_code_point(text, i))) break;
        stop = i;
      }
    }
    if (consumed < start) out.push_back({consumed, start, -1});
    out.push_back({start, stop, token.id});
    consumed = stop;
  }
  if (consumed < text.size()) out.push_back({consumed, text.size(), -1});
}

}  // namespace qwen3

