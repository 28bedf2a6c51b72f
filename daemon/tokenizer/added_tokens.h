// Added tokens (special and not) are found in the text before normalization and
// pre-tokenization, like HF's AddedVocabulary: leftmost-longest matches,
// honouring single_word / lstrip / rstrip, with `normalized` tokens matched on
// the normalized text in a second pass.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qwen3 {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

class AddedTokenMatcher {
 public:
  struct Piece {
    size_t begin;
    size_t end;
    int32_t id;  // -1: plain text to be tokenized normally
  };

  AddedTokenMatcher() = default;
  // `contents` are the strings to search for (already normalized for the
  // normalized pass); `tokens[i]` describes `contents[i]`.
  AddedTokenMatcher(std::vector<AddedToken> tokens, std::vector<std::string> contents);

  bool empty() const { return tokens_.empty(); }

  // Splits `text` into pieces. With parse_special=false, special tokens are not
  // recognised (their text is tokenized like any other), as HF does with
  // encode_special_tokens / split_special_tokens.
  void split(std::string_view text, bool parse_special, std::vector<Piece>& out) const;

 private:
  struct Node {
    int32_t first_child = -1;
    int32_t next_sibling = -1;
    int32_t token = -1;  // index into tokens_ when a token ends here
    unsigned char byte = 0;
  };
  // Longest token starting at `pos`: index into tokens_ and its length, or -1.
  int32_t longest_at(std::string_view text, size_t pos, size_t& length) const;
  int32_t child(int32_t node, unsigned char byte) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;
  bool first_byte_[256] = {};
};

// Unicode White_Space (Rust's char::is_whitespace), used by lstrip/rstrip.
bool is_unicode_white_space(char32_t cp);
// Regex \w in Rust's regex crate (used by single_word).
bool is_word_character(char32_t cp);

}  // namespace qwen3
