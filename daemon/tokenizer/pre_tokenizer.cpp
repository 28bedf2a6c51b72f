#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include <memory>

#include "common/error.h"

namespace qwen3 {
namespace {

// Unicode White_Space (the set Oniguruma and Rust's char::is_whitespace use).
constexpr const char* white_space_ranges =
    "\\x{09}-\\x{0D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}"
    "\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

std::string pcre2_error_text(int code) {
  PCRE2_UCHAR buffer[256];
  pcre2_get_error_message(code, buffer, sizeof buffer);
  return reinterpret_cast<const char*>(buffer);
}

// Per-thread matching state: a JIT stack big enough for long whitespace runs
// and the match data. Independent of the pattern, so shared by all tokenizers.
struct MatchState {
  pcre2_jit_stack* stack = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_match_data* data = nullptr;
  MatchState() {
    stack = pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr);
    context = pcre2_match_context_create(nullptr);
    data = pcre2_match_data_create(1, nullptr);
    if (!stack || !context || !data) throw Error("out of memory creating PCRE2 match state");
    pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchState() {
    pcre2_match_data_free(data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
  }
};

MatchState& match_state() {
  thread_local MatchState state;
  return state;
}

}  // namespace

std::string PreTokenizer::translate_pattern(const std::string& onig) {
  std::string out;
  out.reserve(onig.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < onig.size(); ++i) {
    char c = onig[i];
    if (c == '\\' && i + 1 < onig.size()) {
      char e = onig[i + 1];
      ++i;
      if (e == 's') {
        if (in_class) {
          out += white_space_ranges;
        } else {
          out += '[';
          out += white_space_ranges;
          out += ']';
        }
      } else if (e == 'S') {
        if (in_class) {
          throw Error("pre-tokenizer pattern uses \\S inside a character class, which is not supported");
        }
        out += "[^";
        out += white_space_ranges;
        out += ']';
      } else {
        out += '\\';
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end.
      if (i + 1 < onig.size() && onig[i + 1] == '^') out += onig[++i];
      if (i + 1 < onig.size() && onig[i + 1] == ']') out += onig[++i];
      continue;
    }
    if (in_class && c == '[') {
      throw Error("pre-tokenizer pattern uses a nested character class, which is not supported");
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

PreTokenizer::PreTokenizer(const std::string& onig_pattern, const std::string& where) {
  try {
    pattern_ = translate_pattern(onig_pattern);
  } catch (const Error& e) {
    throw invalid_argument(where + ": " + e.what());
  }
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern_.data()), pattern_.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (!code) {
    throw invalid_argument(where + ": regex does not compile (" + pcre2_error_text(error_code) +
                           " at offset " + std::to_string(error_offset) + " of '" + pattern_ + "')");
  }
  // JIT is an optimisation: if the platform lacks it the interpreter still works.
  pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

PreTokenizer::~PreTokenizer() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

bool PreTokenizer::next_match(std::string_view text, size_t from, size_t& begin,
                              size_t& end) const {
  MatchState& state = match_state();
  auto* code = static_cast<pcre2_code*>(code_);
  size_t start = from;
  while (start < text.size()) {
    int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start,
                         PCRE2_NO_UTF_CHECK, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
      throw Error("pre-tokenizer regex failed on input of " + std::to_string(text.size()) +
                  " bytes: " + pcre2_error_text(rc));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    if (ovector[1] > ovector[0]) {
      begin = ovector[0];
      end = ovector[1];
      return true;
    }
    // An empty match produces no piece (HF drops empty splits): move past one character.
    start = ovector[0] + 1;
    while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
  }
  return false;
}

}  // namespace qwen3
