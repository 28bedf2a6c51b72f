// The Split pre-tokenizer of tokenizer.json (behavior "Isolated"): the text is
// cut into the regex matches and the gaps between them. HF compiles the
// pattern with Oniguruma; we compile it once with PCRE2 (UTF + UCP, JIT) after
// rewriting \s / \S to Unicode White_Space, which is what Oniguruma means by
// them (PCRE2's own \s also accepts U+180E).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace qwen3 {

class PreTokenizer {
 public:
  // Throws qwen3::Error naming `where` (file and key) when the pattern does not compile.
  PreTokenizer(const std::string& onig_pattern, const std::string& where);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Calls sink(piece) for each piece of `text` (valid UTF-8), in order.
  template <typename Sink>
  void split(std::string_view text, Sink&& sink) const {
    size_t pos = 0;
    while (pos < text.size()) {
      size_t begin = 0, end = 0;
      if (!next_match(text, pos, begin, end)) {
        sink(text.substr(pos));
        return;
      }
      if (begin > pos) sink(text.substr(pos, begin - pos));
      sink(text.substr(begin, end - begin));
      pos = end;
    }
  }

  // The PCRE2 pattern actually compiled (for diagnostics and tests).
  const std::string& pcre2_pattern() const { return pattern_; }

  // Rewrites an Oniguruma pattern for PCRE2 (exposed for tests).
  static std::string translate_pattern(const std::string& onig_pattern);

 private:
  // Finds the next non-empty match at or after `from`; false if none.
  bool next_match(std::string_view text, size_t from, size_t& begin, size_t& end) const;
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
};

}  // namespace qwen3
