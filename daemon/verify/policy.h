// Stage 1 of the pipeline: a conservative textual policy on the C source,
// checked before the compiler ever sees it (the sandbox is the second wall).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "verify/verify_result.h"

namespace qwen3::verify {

struct PolicyLimits {
  size_t max_source_bytes = 256 * 1024;
  size_t max_line_bytes = 16 * 1024;
};

// Empty when the source is acceptable; otherwise one diagnostic per violation
// (line numbers are 1-based source lines).
std::vector<Diagnostic> check_policy(const std::string& source, const PolicyLimits& limits);

// The first source line (1-based) that calls `identifier` (name followed by
// '(', not in an extern declaration), else the first that names it as a whole
// word, outside comments; 0 if none: where a refused helper call comes from
// when the object's instruction has no line of its own.
int first_line_naming(const std::string& source, const std::string& identifier);

// What the policy's lexer sees as code: every identifier outside comments and
// literals, and every ordinary string literal (contents as written), each with
// its 1-based source line; raw_strings is true when the source has a raw
// string literal (refused: past one, the view is not trusted). Tests compare
// it with clang's own raw lexer.
struct LexicalView {
  std::vector<std::pair<int, std::string>> identifiers;
  std::vector<std::pair<int, std::string>> string_literals;
  bool raw_strings = false;
};
LexicalView lexical_view(const std::string& source);

// True for the header names a program may include: bpf/NAME.h, linux/...NAME.h, vmlinux.h.
bool is_allowed_header(const std::string& name);

// True for section names that define the XDP program: "xdp", "xdp/...",
// "xdp.frags", "xdp.frags/...".
bool is_xdp_section(const std::string& name);

}  // namespace qwen3::verify
