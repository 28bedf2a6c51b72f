#include "verify/policy.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>

namespace qwen3::verify {
namespace {

// The source after translation phases 1-3 as far as the policy needs them:
// backslash-newlines spliced, comments removed. Every kept character remembers
// its original line so violations point at the right place.
struct Scanned {
  std::string code;          // comments replaced by one space, literals kept
  std::string bare;          // like code, but string/char literal contents blanked
  std::vector<int> line_of;  // original 1-based line of each char in code/bare
  std::vector<std::string> string_literals;  // contents as written (escapes not decoded)
  std::vector<int> string_literal_lines;
  std::vector<int> raw_string_lines;  // R"(...)" and its prefixed forms: refused
};

constexpr const char* kUtf8Bom = "\xEF\xBB\xBF";

bool is_ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// True when the '"' at `quote` starts a raw string literal: the identifier
// right before it is R, LR, uR, UR or u8R (clang-19 accepts these in C, gnu mode).
bool opens_raw_string(const std::string& text, size_t quote) {
  size_t b = quote;
  while (b > 0 && is_ident_char(text[b - 1])) --b;
  const std::string prefix = text.substr(b, quote - b);
  return prefix == "R" || prefix == "LR" || prefix == "uR" || prefix == "UR" || prefix == "u8R";
}

bool is_horizontal_space(char c) { return c == ' ' || c == '\t' || c == '\f' || c == '\v'; }

// Phases 1-2 as clang reads the file: a UTF-8 byte order mark at the start is
// skipped; CR LF and a lone CR end a line; a backslash followed by optional
// horizontal whitespace and a line end splices lines (clang warns, but splices).
// Trigraphs are not replaced (clang ignores them in gnu modes, -fno-trigraphs).
Scanned scan(const std::string& src) {
  std::string spliced;
  std::vector<int> lines;
  spliced.reserve(src.size());
  int line = 1;
  const size_t len = src.size();
  for (size_t i = src.rfind(kUtf8Bom, 0) == 0 ? 3 : 0; i < len; ++i) {
    if (src[i] == '\\') {
      size_t j = i + 1;
      while (j < len && is_horizontal_space(src[j])) ++j;
      if (j < len && (src[j] == '\n' || src[j] == '\r')) {
        if (src[j] == '\r' && j + 1 < len && src[j + 1] == '\n') ++j;
        i = j;
        ++line;
        continue;
      }
    }
    if (src[i] == '\r') {
      if (i + 1 < len && src[i + 1] == '\n') continue;  // the LF ends the line
      spliced.push_back('\n');
      lines.push_back(line++);
      continue;
    }
    spliced.push_back(src[i]);
    lines.push_back(line);
    if (src[i] == '\n') ++line;
  }

  Scanned out;
  out.code.reserve(spliced.size());
  out.bare.reserve(spliced.size());
  auto put = [&](char c, char bare_c, int ln) {
    out.code.push_back(c);
    out.bare.push_back(bare_c);
    out.line_of.push_back(ln);
  };
  size_t i = 0;
  const size_t n = spliced.size();
  while (i < n) {
    char c = spliced[i];
    if (c == '/' && i + 1 < n && spliced[i + 1] == '/') {
      while (i < n && spliced[i] != '\n') ++i;
      put(' ', ' ', lines[std::min(i, n - 1)]);
      continue;
    }
    if (c == '/' && i + 1 < n && spliced[i + 1] == '*') {
      int start_line = lines[i];
      i += 2;
      while (i + 1 < n && !(spliced[i] == '*' && spliced[i + 1] == '/')) {
        // Keep newlines so directive lines stay separate.
        if (spliced[i] == '\n') put('\n', '\n', lines[i]);
        ++i;
      }
      i = std::min(n, i + 2);
      put(' ', ' ', start_line);
      continue;
    }
    if (c == '"' || c == '\'') {
      char quote = c;
      int ln = lines[i];
      // A raw string's contents are not lexed like an ordinary literal's (no
      // escapes, newlines allowed): this scanner would lose track of what is
      // code, so raw strings are refused outright (check_policy).
      if (c == '"' && opens_raw_string(spliced, i)) out.raw_string_lines.push_back(ln);
      std::string literal;
      put(c, c, ln);
      ++i;
      while (i < n && spliced[i] != quote && spliced[i] != '\n') {
        if (spliced[i] == '\\' && i + 1 < n && spliced[i + 1] != '\n') {
          literal.push_back(spliced[i]);
          put(spliced[i], ' ', lines[i]);
          ++i;
        }
        literal.push_back(spliced[i]);
        put(spliced[i], ' ', lines[i]);
        ++i;
      }
      if (i < n && spliced[i] == quote) {
        put(quote, quote, lines[i]);
        ++i;
      }
      if (quote == '"') {
        out.string_literals.push_back(literal);
        out.string_literal_lines.push_back(ln);
      }
      continue;
    }
    put(c, c, lines[i]);
    ++i;
  }
  return out;
}

// Calls f(begin, end) for every word (a run of letters, digits and '_') of the
// comment- and literal-free code: the identifiers the policy judges.
template <typename F>
void for_each_word(const std::string& bare, F f) {
  for (size_t i = 0; i < bare.size();) {
    if (!is_ident_char(bare[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < bare.size() && is_ident_char(bare[j])) ++j;
    f(i, j);
    i = j;
  }
}

struct Reporter {
  std::vector<Diagnostic>& out;
  void operator()(int line, const std::string& what) {
    Diagnostic d;
    d.line = line;
    d.text = what;
    d.stage_message = "policy: line " + std::to_string(line) + ": " + what;
    out.push_back(std::move(d));
  }
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\f\v");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\f\v");
  return s.substr(b, e - b + 1);
}

// Identifiers that are never allowed in user code, with the reason.
const std::vector<std::pair<std::string, std::string>>& forbidden_identifiers() {
  static const std::vector<std::pair<std::string, std::string>> list = {
      {"__has_include", "__has_include probes files outside the allowed headers"},
      {"__has_include_next", "__has_include_next probes files outside the allowed headers"},
      {"__has_embed", "__has_embed probes files"},
      {"_Pragma", "_Pragma is not allowed (use #pragma unroll / #pragma clang loop only)"},
      {"__pragma", "__pragma is not allowed"},
      {"section", "raw section attributes are not allowed; use SEC(\"xdp\")"},
      {"__section__", "raw section attributes are not allowed; use SEC(\"xdp\")"},
      {"__kconfig", "kernel config externs (__kconfig) are not allowed"},
      {"pinning", "map pinning is not allowed: nothing may outlive the verification"},
      {"LIBBPF_PIN_BY_NAME", "map pinning is not allowed: nothing may outlive the verification"},
      {"__builtin_embed", "file embedding is not allowed"},
  };
  return list;
}

// The characters a C string literal's contents stand for (escapes decoded), so
// "\056incbin" is seen as ".incbin".
std::string decode_escapes(const std::string& lit) {
  std::string out;
  for (size_t i = 0; i < lit.size(); ++i) {
    if (lit[i] != '\\' || i + 1 >= lit.size()) {
      out.push_back(lit[i]);
      continue;
    }
    char e = lit[++i];
    auto hexval = [](char h) { return std::isdigit(static_cast<unsigned char>(h)) ? h - '0' : (std::tolower(h) - 'a' + 10); };
    if (e >= '0' && e <= '7') {
      int v = 0;
      for (int k = 0; k < 3 && i < lit.size() && lit[i] >= '0' && lit[i] <= '7'; ++k, ++i) v = v * 8 + (lit[i] - '0');
      --i;
      out.push_back(static_cast<char>(v));
    } else if (e == 'x') {
      int v = 0;
      while (i + 1 < lit.size() && std::isxdigit(static_cast<unsigned char>(lit[i + 1]))) v = v * 16 + hexval(lit[++i]);
      out.push_back(static_cast<char>(v));
    } else {
      static const std::string from = "ntrabfv", to = "\n\t\r\a\b\f\v";
      size_t k = from.find(e);
      out.push_back(k == std::string::npos ? e : to[k]);
    }
  }
  return out;
}

// Assembler directives an inline-asm template may use: data only. Directives
// that read or include files (.incbin, .include, .file, .cv_file, ...),
// define macros or switch sections are refused with everything else.
bool is_allowed_asm_directive(const std::string& d) {
  static const std::set<std::string> allowed = {"byte", "short", "hword", "word", "long", "int", "quad",
                                                "balign", "p2align", "align"};
  return allowed.count(d) > 0;
}

// Checks one asm statement starting at `at` (just after the asm keyword) in
// the comment-free code: the template must be string literals written right
// there (no macros, which could assemble a directive out of pieces), and the
// template may contain no assembler directive beyond the data ones.
void check_asm(const std::string& code, size_t at, int line, Reporter& report);

// The unroll count may be a macro name (Cilium writes `#pragma unroll(MAX_IPV4_OPTS)`): clang
// evaluates it as an integer constant expression, which cannot read a file (the tokens that could,
// __has_include and #embed, are refused wherever they appear).
bool is_allowed_pragma(const std::string& rest) {
  static const std::regex allowed(
      R"(^(once|unroll(\s*\(?\s*(\d+|[A-Za-z_]\w*)\s*\)?)?|nounroll|unroll_and_jam|clang\s+loop\s+[A-Za-z_]+\s*\([A-Za-z0-9_ ]*\)(\s+[A-Za-z_]+\s*\([A-Za-z0-9_ ]*\))*|GCC\s+unroll\s+(\d+|[A-Za-z_]\w*))\s*$)");
  // Length first: std::regex recurses per character.
  return rest.size() <= 256 && std::regex_match(rest, allowed);
}

void check_asm(const std::string& code, size_t at, int line, Reporter& report) {
  auto skip_space = [&](size_t k) {
    while (k < code.size() && std::isspace(static_cast<unsigned char>(code[k]))) ++k;
    return k;
  };
  size_t k = skip_space(at);
  static const std::set<std::string> qualifiers = {"volatile", "__volatile__", "__volatile", "inline",
                                                   "__inline", "__inline__", "goto"};
  for (;;) {
    size_t e = k;
    while (e < code.size() && is_ident_char(code[e])) ++e;
    if (e == k || !qualifiers.count(code.substr(k, e - k))) break;
    k = skip_space(e);
  }
  const char* shape = "inline assembly must be written asm [volatile] (\"template\" ...) with the template as string "
                      "literals in place (no macros)";
  if (k >= code.size() || code[k] != '(') return report(line, shape);
  k = skip_space(k + 1);
  std::string tmpl;
  bool any = false;
  while (k < code.size() && code[k] == '"') {
    size_t e = k + 1;
    while (e < code.size() && code[e] != '"' && code[e] != '\n') e += code[e] == '\\' ? 2 : 1;
    if (e >= code.size() || code[e] != '"') return report(line, shape);
    tmpl += decode_escapes(code.substr(k + 1, e - k - 1));
    any = true;
    k = skip_space(e + 1);
  }
  if (!any || k >= code.size() || (code[k] != ':' && code[k] != ')')) return report(line, shape);
  // A directive: '.' + name at the start of a token.
  for (size_t i = 0; i + 1 < tmpl.size(); ++i) {
    if (tmpl[i] != '.' || (i > 0 && (is_ident_char(tmpl[i - 1]) || tmpl[i - 1] == '.' || tmpl[i - 1] == '$'))) continue;
    size_t e = i + 1;
    while (e < tmpl.size() && (is_ident_char(tmpl[e]) || tmpl[e] == '.' || tmpl[e] == '$')) ++e;
    std::string name = tmpl.substr(i + 1, e - i - 1);
    if (name.empty() || !std::isalpha(static_cast<unsigned char>(name[0])) || is_allowed_asm_directive(name)) continue;
    report(line, "inline assembly uses the assembler directive ." + name.substr(0, 40) +
                     ", which is not allowed (only the data directives .byte .short .word .long .int .quad .balign "
                     ".p2align .align; never .incbin, .include, .file or the like)");
    return;
  }
}

}  // namespace

bool is_allowed_header(const std::string& name) {
  if (name.find("..") != std::string::npos || name.empty() || name[0] == '/' || name.size() > 256) return false;
  static const std::regex allowed(R"(^(vmlinux\.h|bpf/[A-Za-z0-9_]+\.h|linux/([a-z0-9_\-]+/)*[A-Za-z0-9_\-]+\.h)$)");
  // The minimal libc headers of the private include tree (include_tree.cpp).
  static const std::set<std::string> libc = {"stddef.h", "stdint.h",   "stdbool.h",  "limits.h",   "endian.h",
                                             "sys/types.h", "sys/time.h", "sys/ioctl.h", "sys/socket.h"};
  return libc.count(name) > 0 || std::regex_match(name, allowed);
}

bool is_xdp_section(const std::string& name) {
  return name == "xdp" || name == "xdp.frags" || name.rfind("xdp/", 0) == 0 ||
         name.rfind("xdp.frags/", 0) == 0;
}

namespace {

// Size, emptiness, encoding (byte order marks), NUL bytes and line lengths:
// true when the source cannot be read any further.
bool refuse_unreadable(const std::string& source, const PolicyLimits& limits, Reporter& report,
                       const std::vector<Diagnostic>& out) {
  if (source.size() > limits.max_source_bytes) {
    report(0, "source is " + std::to_string(source.size()) + " bytes; the limit is " +
                  std::to_string(limits.max_source_bytes) + " bytes");
    return true;
  }
  const bool utf8_bom = source.rfind(kUtf8Bom, 0) == 0;
  if (trim(utf8_bom ? source.substr(3) : source).empty()) {
    report(0, "source is empty");
    return true;
  }
  // Byte order marks of encodings clang refuses (it reads UTF-8 only).
  static const std::pair<std::string, const char*> foreign_boms[] = {
      {std::string("\x00\x00\xFE\xFF", 4), "UTF-32 (BE)"}, {std::string("\xFF\xFE\x00\x00", 4), "UTF-32 (LE)"},
      {"\xFE\xFF", "UTF-16 (BE)"}, {"\xFF\xFE", "UTF-16 (LE)"}, {"\x2B\x2F\x76", "UTF-7"},
      {"\xF7\x64\x4C", "UTF-1"}, {"\xDD\x73\x66\x73", "UTF-EBCDIC"}, {"\x0E\xFE\xFF", "SCSU"},
      {"\xFB\xEE\x28", "BOCU-1"}, {"\x84\x31\x95\x33", "GB-18030"}};
  for (const auto& [bom, encoding] : foreign_boms)
    if (source.rfind(bom, 0) == 0) {
      report(1, std::string("source starts with a ") + encoding + " byte order mark; only UTF-8 (or ASCII) source is accepted");
      return true;
    }
  if (source.find('\0') != std::string::npos) {
    report(0, "source contains a NUL byte");
    return true;
  }
  {
    int line = 1;
    size_t len = 0;
    for (size_t i = utf8_bom ? 3 : 0; i < source.size(); ++i) {
      const char c = source[i];
      if (c == '\r' && i + 1 < source.size() && source[i + 1] == '\n') continue;  // CR LF: one line end
      if (c == '\n' || c == '\r') {
        ++line;
        len = 0;
      } else if (++len == limits.max_line_bytes + 1) {
        report(line, "line is longer than " + std::to_string(limits.max_line_bytes) + " bytes");
      }
    }
    if (!out.empty()) return true;
  }

  return false;
}

// Preprocessor directives, one logical line at a time (#include, #pragma and the plain ones).
void check_directives(const Scanned& s, Reporter& report) {
  // "%:" is the digraph for '#'.
  size_t pos = 0;
  while (pos < s.code.size()) {
    size_t eol = s.code.find('\n', pos);
    if (eol == std::string::npos) eol = s.code.size();
    std::string text = s.code.substr(pos, eol - pos);
    int line = s.line_of.empty() ? 1 : s.line_of[std::min(pos, s.line_of.size() - 1)];
    std::string t = trim(text);
    bool directive = false;
    if (!t.empty() && t[0] == '#') {
      directive = true;
      t = trim(t.substr(1));
    } else if (t.rfind("%:", 0) == 0) {
      directive = true;
      t = trim(t.substr(2));
    }
    if (directive && !t.empty()) {
      size_t k = 0;
      while (k < t.size() && is_ident_char(t[k])) ++k;
      std::string name = t.substr(0, k);
      std::string rest = trim(t.substr(k));
      static const std::set<std::string> plain = {"define", "undef", "if", "ifdef", "ifndef",
                                                  "elif", "elifdef", "elifndef", "else", "endif",
                                                  "error", "warning"};
      if (name == "include") {
        std::string header;
        bool ok = false;
        if (rest.size() >= 2 && ((rest.front() == '<' && rest.back() == '>') ||
                                 (rest.front() == '"' && rest.back() == '"'))) {
          header = rest.substr(1, rest.size() - 2);
          ok = header.find_first_of("<>\"") == std::string::npos && is_allowed_header(header);
        }
        if (!ok)
          report(line, "#include " + rest.substr(0, 80) +
                           " is not allowed: only <bpf/NAME.h>, <linux/NAME.h>, <vmlinux.h> and the minimal libc headers "
                           "(stddef.h stdint.h stdbool.h limits.h endian.h sys/types.h sys/time.h sys/ioctl.h "
                           "sys/socket.h) may be included");
      } else if (name == "pragma") {
        if (!is_allowed_pragma(rest))
          report(line, "#pragma " + rest.substr(0, 80) +
                           " is not allowed (only once, unroll, nounroll, clang loop, GCC unroll)");
      } else if (!plain.count(name)) {
        report(line, "#" + name + " is not allowed");
      } else if (name == "define" || name == "if" || name == "elif") {
        // Conditions may not probe the file system; checked by the identifier scan below.
      }
    }
    pos = eol + 1;
  }

}

void check_token_pasting(const Scanned& s, Reporter& report) {
  // Token pasting can forge any forbidden identifier, so it is refused outright.
  for (size_t i = 0; i + 1 < s.bare.size(); ++i) {
    if (s.bare[i] == '#' && s.bare[i + 1] == '#') {
      report(s.line_of[i], "token pasting (##) is not allowed");
      break;
    }
    if (s.bare[i] == '%' && s.bare[i + 1] == ':' && i + 3 < s.bare.size() && s.bare[i + 2] == '%' &&
        s.bare[i + 3] == ':') {
      report(s.line_of[i], "token pasting (%:%:) is not allowed");
      break;
    }
  }

}

struct Sections {
  std::vector<std::string> names;
  std::vector<int> lines;
};

// Forbidden identifiers, inline assembly and SEC("literal") uses; the sections named.
Sections check_identifiers(const Scanned& s, Reporter& report) {
  Sections sec;
  // Identifier scan over code without comments and literal contents.
  for_each_word(s.bare, [&](size_t i, size_t j) {
    std::string ident = s.bare.substr(i, j - i);
    int line = s.line_of[i];
    for (const auto& [bad, why] : forbidden_identifiers()) {
      if (ident == bad) report(line, why);
    }
    if (ident == "asm" || ident == "__asm" || ident == "__asm__") check_asm(s.code, j, line, report);
    if (ident == "SEC") {
      // SEC must be applied to a string literal directly: SEC("xdp").
      size_t k = j;
      while (k < s.code.size() && std::isspace(static_cast<unsigned char>(s.code[k]))) ++k;
      bool ok = false;
      if (k < s.code.size() && s.code[k] == '(') {
        ++k;
        while (k < s.code.size() && std::isspace(static_cast<unsigned char>(s.code[k]))) ++k;
        if (k < s.code.size() && s.code[k] == '"') {
          size_t e = s.code.find('"', k + 1);
          if (e != std::string::npos) {
            std::string name = s.code.substr(k + 1, e - k - 1);
            size_t m = e + 1;
            while (m < s.code.size() && std::isspace(static_cast<unsigned char>(s.code[m]))) ++m;
            if (m < s.code.size() && s.code[m] == ')') {
              ok = true;
              sec.names.push_back(name);
              sec.lines.push_back(line);
            }
          }
        }
      }
      // "#define SEC(x) ..." redefinitions are caught as a non-literal use too.
      if (!ok) report(line, "SEC must be used as SEC(\"name\") with a string literal");
    }
  });

  return sec;
}

void check_string_literals(const Scanned& s, Reporter& report) {
  for (size_t i = 0; i < s.string_literals.size(); ++i) {
    const std::string lit = decode_escapes(s.string_literals[i]);
    for (const char* bad : {".incbin", ".include", ".file"}) {
      if (lit.find(bad) != std::string::npos)
        report(s.string_literal_lines[i], std::string("string literal contains the assembler directive ") + bad);
    }
  }

}

// Exactly one XDP section; besides it only .maps and license.
void check_sections(const Sections& sec, Reporter& report) {
  int xdp = 0;
  for (size_t i = 0; i < sec.names.size(); ++i) {
    const std::string& name = sec.names[i];
    if (is_xdp_section(name)) {
      ++xdp;
    } else if (name != ".maps" && name != "license") {
      report(sec.lines[i], "section \"" + name +
                                   "\" is not allowed: the program must be one SEC(\"xdp\") function, "
                                   "plus SEC(\".maps\") maps and SEC(\"license\")");
    }
  }
  if (xdp == 0) report(0, "no XDP program: exactly one function must be in SEC(\"xdp\")");
  if (xdp > 1) report(0, "found " + std::to_string(xdp) + " XDP program sections; exactly one is allowed");
}

}  // namespace

std::vector<Diagnostic> check_policy(const std::string& source, const PolicyLimits& limits) {
  std::vector<Diagnostic> out;
  Reporter report{out};
  if (refuse_unreadable(source, limits, report, out)) return out;
  const Scanned s = scan(source);
  for (int line : s.raw_string_lines)
    report(line, "raw string literals (R\"(...)\") are not allowed: the policy cannot see what they hide");
  check_directives(s, report);
  check_token_pasting(s, report);
  const Sections sec = check_identifiers(s, report);
  check_string_literals(s, report);
  check_sections(sec, report);
  return out;
}

LexicalView lexical_view(const std::string& source) {
  const Scanned s = scan(source);
  LexicalView v;
  v.raw_strings = !s.raw_string_lines.empty();
  // The same walk check_policy makes (numbers are words to it, not identifiers).
  for_each_word(s.bare, [&](size_t i, size_t j) {
    if (!std::isdigit(static_cast<unsigned char>(s.bare[i]))) v.identifiers.push_back({s.line_of[i], s.bare.substr(i, j - i)});
  });
  for (size_t i = 0; i < s.string_literals.size(); ++i)
    v.string_literals.push_back({s.string_literal_lines[i], s.string_literals[i]});
  return v;
}

int first_line_naming(const std::string& source, const std::string& identifier) {
  if (identifier.empty()) return 0;
  // The policy's own view of the source: comments and literal contents gone,
  // every character mapped back to its line.
  const Scanned s = scan(source);
  int first = 0;
  for (size_t at = s.bare.find(identifier); at != std::string::npos; at = s.bare.find(identifier, at + 1)) {
    const size_t end = at + identifier.size();
    if ((at != 0 && is_ident_char(s.bare[at - 1])) || (end != s.bare.size() && is_ident_char(s.bare[end]))) continue;
    if (first == 0) first = s.line_of[at];
    // Prefer a call (name followed by '(') outside an extern declaration:
    // that is where the instruction comes from.
    size_t k = end;
    while (k < s.bare.size() && std::isspace(static_cast<unsigned char>(s.bare[k]))) ++k;
    size_t bol = s.bare.rfind('\n', at);
    bol = bol == std::string::npos ? 0 : bol + 1;
    const bool declaration = s.bare.substr(bol, at - bol).find("extern") != std::string::npos;
    if (k < s.bare.size() && s.bare[k] == '(' && !declaration) return s.line_of[at];
  }
  return first;
}

}  // namespace qwen3::verify
