// The verify policy scanner (daemon/verify/policy.cpp) on arbitrary C-like
// source, and on the same source re-encoded the ways clang reads alike: behind
// a UTF-8 byte order mark, with CR LF or lone CR line ends. Those must get the
// very same violations (a BOM once hid an #include from the policy); behind a
// UTF-16 byte order mark the source must be refused. A difference aborts: a finding.
#include <cstdlib>

#include "fuzz_common.h"
#include "verify/policy.h"

namespace {

std::string with_line_ends(const std::string& s, const std::string& end) {
  std::string out;
  for (char c : s) out += c == '\n' ? end : std::string(1, c);
  return out;
}

void expect_same(const std::vector<qwen3::verify::Diagnostic>& want, const std::string& variant) {
  const auto got = qwen3::verify::check_policy(variant, {});
  if (got.size() != want.size()) abort();
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].line != want[i].line || got[i].text != want[i].text) abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  QWEN3_FUZZ_INPUT(data, size);
  return fuzz_expecting_rejections([&] {
    using namespace qwen3::verify;
    const auto plain = check_policy(input, {});
    first_line_naming(input, "main");
    is_allowed_header(input);
    is_xdp_section(input);
    lexical_view(input);
    // Re-encodings: only of plain inputs (no CR, no byte order mark of their
    // own) short enough that the added bytes cannot cross a size limit.
    const unsigned char first = input.empty() ? 0 : static_cast<unsigned char>(input[0]);
    if (input.size() > 4096 || input.find('\r') != std::string::npos || first >= 0x80 || first == '+' ||
        first == 0x0e || first == 0)
      return;
    expect_same(plain, "\xEF\xBB\xBF" + input);
    expect_same(plain, with_line_ends(input, "\r\n"));
    expect_same(plain, with_line_ends(input, "\r"));
    if (check_policy("\xFF\xFE" + input, {}).empty() || check_policy("\xFE\xFF" + input, {}).empty()) abort();
  });
}
