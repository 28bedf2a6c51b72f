#include "verify/repair_mutations.h"

#include <regex>
#include <set>

namespace qwen3::verify {
namespace {

// Lines a mutation may touch: code inside functions, not directives or map definitions.
bool mutable_line(const std::string& l) {
  const size_t b = l.find_first_not_of(" \t");
  if (b == std::string::npos || l[b] == '#' || l.compare(b, 2, "//") == 0 || l.compare(b, 2, "/*") == 0 ||
      l.compare(b, 1, "*") == 0)
    return false;
  return l.find("__uint(") == std::string::npos && l.find("__type(") == std::string::npos &&
         l.find("SEC(") == std::string::npos;
}

bool decision_line(const std::string& l) {
  return find_word(l, "if") != std::string::npos || find_word(l, "while") != std::string::npos ||
         find_word(l, "return") != std::string::npos || l.find('?') != std::string::npos ||
         l.find("&&") != std::string::npos || l.find("||") != std::string::npos;
}

void add(std::vector<Candidate>& out, const Source& src, int n, size_t at, size_t len, const std::string& to,
         const char* kind) {
  std::string l = src.line(n);
  const std::string from = l.substr(at, len);
  l.replace(at, len, to);
  out.push_back({kind, "line " + std::to_string(n) + ": " + from + " -> " + to, n, src.replace_line(n, l)});
}

void actions(const Source& src, int n, const VerifyResult& r, std::vector<Candidate>& out) {
  const std::string l = src.line(n);
  std::set<std::pair<std::string, std::string>> swaps;
  for (const auto& f : r.fixtures)
    if (f.ran && !f.passed && f.got_action != f.expected_action && f.expected_action.rfind("XDP_", 0) == 0)
      swaps.insert({f.got_action, f.expected_action});
  for (const auto& [got, want] : swaps)
    for (size_t at = find_word(l, got); at != std::string::npos; at = find_word(l, got, at + 1))
      add(out, src, n, at, got.size(), want, "return_action");
}

void comparisons(const Source& src, int n, std::vector<Candidate>& out) {
  const std::string l = src.line(n);
  static const std::regex op(R"((==|!=|<=|>=|<|>))");
  for (auto it = std::sregex_iterator(l.begin(), l.end(), op); it != std::sregex_iterator(); ++it) {
    const size_t at = static_cast<size_t>(it->position());
    const std::string o = it->str();
    // Not ->, <<, >>, <<=, >>=, nor a header name.
    const char before = at > 0 ? l[at - 1] : ' ', after = at + o.size() < l.size() ? l[at + o.size()] : ' ';
    if ((o == ">" && before == '-') || before == '<' || before == '>' || after == '<' || after == '>') continue;
    static const std::vector<std::pair<std::string, std::vector<std::string>>> to = {
        {"==", {"!="}}, {"!=", {"=="}}, {"<", {"<=", ">"}}, {"<=", {"<", ">="}}, {">", {">=", "<"}}, {">=", {">", "<="}}};
    for (const auto& [from, alts] : to)
      if (from == o)
        for (const auto& a : alts) add(out, src, n, at, o.size(), a, "comparison");
  }
}

void byte_order(const Source& src, int n, std::vector<Candidate>& out) {
  const std::string l = src.line(n);
  // Remove a conversion: bpf_htons(X) -> X.
  static const std::regex conv(R"(\b((?:bpf_)?(?:htons|ntohs|htonl|ntohl))\s*\(([^()]*)\))");
  for (auto it = std::sregex_iterator(l.begin(), l.end(), conv); it != std::sregex_iterator(); ++it)
    add(out, src, n, static_cast<size_t>(it->position()), it->length(), (*it)[2].str(), "byte_order");
  // Add one: a constant compared with a network-order field.
  static const std::regex cmp(R"((?:==|!=)\s*((?:0x[0-9a-fA-F]+|\d+|[A-Z][A-Z0-9_]+)))");
  const bool wide = l.find("saddr") != std::string::npos || l.find("daddr") != std::string::npos;
  const bool field = wide || l.find("h_proto") != std::string::npos || l.find("source") != std::string::npos ||
                     l.find("dest") != std::string::npos || l.find("port") != std::string::npos ||
                     l.find("tot_len") != std::string::npos || l.find("proto") != std::string::npos ||
                     l.find("frag_off") != std::string::npos || l.find("h_vlan") != std::string::npos;
  if (!field || std::regex_search(l, conv)) return;
  // A mask over a network-order field: ip->frag_off & (0x2000 | 0x1FFF) -> & bpf_htons((...)).
  static const std::regex mask(R"(&\s*(\([^()]*\)|0x[0-9a-fA-F]+|\d+))");
  for (auto it = std::sregex_iterator(l.begin(), l.end(), mask); it != std::sregex_iterator(); ++it) {
    const size_t amp = static_cast<size_t>(it->position(0)), at = static_cast<size_t>(it->position(1));
    if ((amp > 0 && l[amp - 1] == '&') || (amp + 1 < l.size() && l[amp + 1] == '&')) continue;  // &&
    add(out, src, n, at, (*it)[1].length(), std::string(wide ? "bpf_htonl(" : "bpf_htons(") + (*it)[1].str() + ")",
        "byte_order");
  }
  for (auto it = std::sregex_iterator(l.begin(), l.end(), cmp); it != std::sregex_iterator(); ++it) {
    const std::string c = (*it)[1];
    if (c.rfind("XDP_", 0) == 0 || c.rfind("IPPROTO_", 0) == 0) continue;
    add(out, src, n, static_cast<size_t>(it->position(1)), c.size(), std::string(wide ? "bpf_htonl(" : "bpf_htons(") + c + ")",
        "byte_order");
  }
}

void constants(const Source& src, int n, std::vector<Candidate>& out, bool decision) {
  const std::string l = src.line(n);
  static const std::vector<std::vector<std::string>> families = {
      {"IPPROTO_TCP", "IPPROTO_UDP", "IPPROTO_ICMP", "IPPROTO_ICMPV6"},
      {"ETH_P_IP", "ETH_P_IPV6", "ETH_P_ARP", "ETH_P_8021Q"},
  };
  for (const auto& family : families)
    for (const auto& name : decision ? family : std::vector<std::string>{})
      for (size_t at = find_word(l, name); at != std::string::npos; at = find_word(l, name, at + 1))
        for (const auto& other : family)
          if (other != name) add(out, src, n, at, name.size(), other, "constant");
  // A number written as a string ("8" compares a pointer): the number.
  static const std::regex quoted(R"re("(\d+)")re");
  for (auto it = std::sregex_iterator(l.begin(), l.end(), quoted); it != std::sregex_iterator(); ++it)
    add(out, src, n, static_cast<size_t>(it->position()), it->length(), (*it)[1].str(), "constant");
  // A prefix mask one byte longer or shorter: 0xFF000000 <-> 0xFFFF0000.
  static const std::regex mask(R"(\b0x(F*)(0*)\b)", std::regex::icase);
  for (auto it = std::sregex_iterator(l.begin(), l.end(), mask); it != std::sregex_iterator(); ++it) {
    const std::string ones = (*it)[1], zeros = (*it)[2];
    if ((ones.size() + zeros.size()) % 2 || ones.empty() || zeros.empty()) continue;
    const size_t at = static_cast<size_t>(it->position());
    add(out, src, n, at, it->length(), "0x" + ones + "FF" + zeros.substr(2), "constant");
    if (ones.size() > 2) add(out, src, n, at, it->length(), "0x" + ones.substr(2) + "00" + zeros, "constant");
  }
  if (!decision) return;
  static const std::regex number(R"((?:[<>=!]=?|[<>])\s*(\d+)\b)");
  for (auto it = std::sregex_iterator(l.begin(), l.end(), number); it != std::sregex_iterator(); ++it) {
    const long v = std::stol((*it)[1]);
    if (v > 1000000) continue;
    const size_t at = static_cast<size_t>(it->position(1));
    add(out, src, n, at, (*it)[1].length(), std::to_string(v + 1), "constant");
    if (v > 0) add(out, src, n, at, (*it)[1].length(), std::to_string(v - 1), "constant");
  }
}

}  // namespace

void mutation_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  // Family by family, so the budget goes to the likeliest mistakes first.
  for (int family = 0; family < 4; ++family)
    for (int n = 1; n <= src.size(); ++n) {
      const std::string l = src.line(n);
      if (!mutable_line(l)) continue;
      if (family == 0) actions(src, n, r, out);
      if (family == 1 && decision_line(l)) comparisons(src, n, out);
      if (family == 2) byte_order(src, n, out);
      if (family == 3) constants(src, n, out, decision_line(l));
    }
}

}  // namespace qwen3::verify
