#include "verify/unified_diff.h"

#include <sstream>
#include <vector>

namespace qwen3::verify {
namespace {

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string l;
  while (std::getline(ss, l)) out.push_back(l);
  return out;
}

struct Edit {
  char op;  // ' ', '-', '+'
  int a, b; // line index in before / after (0-based)
};

// Longest common subsequence over the lines between the common prefix and suffix.
std::vector<Edit> edit_script(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre]) ++pre;
  size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre && a[a.size() - 1 - suf] == b[b.size() - 1 - suf]) ++suf;
  const size_t n = a.size() - pre - suf, m = b.size() - pre - suf;
  std::vector<Edit> out;
  for (size_t i = 0; i < pre; ++i) out.push_back({' ', int(i), int(i)});
  if (n * m > 4'000'000) {  // too large for the table: replace the middle wholesale
    for (size_t i = 0; i < n; ++i) out.push_back({'-', int(pre + i), -1});
    for (size_t j = 0; j < m; ++j) out.push_back({'+', -1, int(pre + j)});
  } else {
    std::vector<std::vector<int>> L(n + 1, std::vector<int>(m + 1, 0));
    for (size_t i = n; i-- > 0;)
      for (size_t j = m; j-- > 0;)
        L[i][j] = a[pre + i] == b[pre + j] ? L[i + 1][j + 1] + 1 : std::max(L[i + 1][j], L[i][j + 1]);
    size_t i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && a[pre + i] == b[pre + j]) {
        out.push_back({' ', int(pre + i), int(pre + j)});
        ++i, ++j;
      } else if (i < n && (j == m || L[i + 1][j] >= L[i][j + 1])) {
        out.push_back({'-', int(pre + i), -1});  // deletions before insertions, as diff -u prints them
        ++i;
      } else {
        out.push_back({'+', -1, int(pre + j)});
        ++j;
      }
    }
  }
  for (size_t k = 0; k < suf; ++k) out.push_back({' ', int(a.size() - suf + k), int(b.size() - suf + k)});
  return out;
}

}  // namespace

std::string unified_diff(const std::string& before, const std::string& after, const std::string& name, int context) {
  if (before == after) return "";
  const auto a = split_lines(before), b = split_lines(after);
  const std::vector<Edit> e = edit_script(a, b);
  std::string out = "--- a/" + name + "\n+++ b/" + name + "\n";
  size_t k = 0;
  while (k < e.size()) {
    while (k < e.size() && e[k].op == ' ') ++k;
    if (k == e.size()) break;
    // A hunk: from `context` lines before this change to `context` after the last change within reach.
    size_t start = k >= size_t(context) ? k - context : 0;
    size_t end = k;
    for (;;) {
      while (end < e.size() && e[end].op != ' ') ++end;
      size_t same = end;
      while (same < e.size() && e[same].op == ' ' && same - end < size_t(2 * context)) ++same;
      if (same < e.size() && e[same].op != ' ') {
        end = same;
        continue;
      }
      end = std::min(e.size(), end + context);
      break;
    }
    int a_start = -1, b_start = -1, a_len = 0, b_len = 0;
    std::string body;
    for (size_t i = start; i < end; ++i) {
      const Edit& x = e[i];
      if (x.op != '+') {
        if (a_start < 0) a_start = x.a;
        ++a_len;
      }
      if (x.op != '-') {
        if (b_start < 0) b_start = x.b;
        ++b_len;
      }
      body += x.op;
      body += (x.op == '+' ? b[x.b] : a[x.a]) + "\n";
    }
    // An empty side starts after the line before it (diff -u's convention).
    auto at = [&](int s, int len, bool left) {
      if (len > 0) return s + 1;
      for (size_t i = start; i-- > 0;)
        if (e[i].op != (left ? '+' : '-')) return (left ? e[i].a : e[i].b) + 1;
      return 0;
    };
    out += "@@ -" + std::to_string(at(a_start, a_len, true)) + "," + std::to_string(a_len) + " +" +
           std::to_string(at(b_start, b_len, false)) + "," + std::to_string(b_len) + " @@\n" + body;
    k = end;
  }
  return out;
}

}  // namespace qwen3::verify
