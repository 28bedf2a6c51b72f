#include "verify/repair_candidates.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "verify/repair_mutations.h"
#include "verify/repair_rules.h"
#include "verify/repair_text.h"
#include "verify/unified_diff.h"

namespace qwen3::verify {
namespace {

// The header that declares a name clang did not know.
std::string header_for(const std::string& name) {
  static const std::map<std::string, std::string> exact = {
      {"bpf_htons", "bpf/bpf_endian.h"}, {"bpf_ntohs", "bpf/bpf_endian.h"}, {"bpf_htonl", "bpf/bpf_endian.h"},
      {"bpf_ntohl", "bpf/bpf_endian.h"}, {"SEC", "bpf/bpf_helpers.h"},      {"__uint", "bpf/bpf_helpers.h"},
      {"__type", "bpf/bpf_helpers.h"},   {"ethhdr", "linux/if_ether.h"},    {"iphdr", "linux/ip.h"},
      {"ipv6hdr", "linux/ipv6.h"},       {"tcphdr", "linux/tcp.h"},         {"udphdr", "linux/udp.h"},
      {"icmphdr", "linux/icmp.h"},       {"icmp6hdr", "linux/icmpv6.h"},    {"arphdr", "linux/if_arp.h"},
      {"xdp_md", "linux/bpf.h"},         {"bool", "stdbool.h"},             {"true", "stdbool.h"},
      {"false", "stdbool.h"},            {"uint8_t", "stdint.h"},           {"uint16_t", "stdint.h"},
      {"uint32_t", "stdint.h"},          {"uint64_t", "stdint.h"},          {"__u8", "linux/types.h"},
      {"__u16", "linux/types.h"},        {"__u32", "linux/types.h"},        {"__u64", "linux/types.h"},
      {"__be16", "linux/types.h"},       {"__be32", "linux/types.h"},       {"NULL", "stddef.h"},
  };
  if (auto it = exact.find(name); it != exact.end()) return it->second;
  static const std::vector<std::pair<std::string, std::string>> prefixes = {
      {"ETH_P_", "linux/if_ether.h"}, {"ETH_", "linux/if_ether.h"}, {"IPPROTO_", "linux/in.h"},
      {"ICMPV6_", "linux/icmpv6.h"},  {"ICMP_", "linux/icmp.h"},   {"ARPOP_", "linux/if_arp.h"},
      {"XDP_", "linux/bpf.h"},        {"BPF_", "linux/bpf.h"},      {"bpf_", "bpf/bpf_helpers.h"},
      {"TC_ACT_", "linux/pkt_cls.h"},
  };
  for (const auto& [p, h] : prefixes)
    if (name.rfind(p, 0) == 0) return h;
  return "";
}

// Names a misspelt member may have meant: dest_port -> dest, port; saddrs -> saddr.
std::vector<std::string> member_guesses(const std::string& name) {
  std::vector<std::string> out;
  const size_t first = name.find('_'), last = name.rfind('_');
  if (first != std::string::npos && first > 0) out.push_back(name.substr(0, first));
  if (last != std::string::npos && last + 1 < name.size() && last != first) out.push_back(name.substr(last + 1));
  else if (last != std::string::npos && last + 1 < name.size() && first > 0) out.push_back(name.substr(last + 1));
  if (name.size() > 2 && name.back() == 's') out.push_back(name.substr(0, name.size() - 1));
  return out;
}

// "8" compared with a number: the digits without the quotes.
void quoted_number_candidates(const Source& src, int line, std::vector<Candidate>& out) {
  static const std::regex quoted(R"re("(\d+)")re");
  std::smatch q;
  const std::string l = src.line(line);
  if (line > 0 && std::regex_search(l, q, quoted))
    out.push_back({"compiler_fixit", "the string \"" + q[1].str() + "\" -> the number " + q[1].str(), line,
                   src.replace_line(line, std::string(l).replace(q.position(0), q.length(0), q[1].str()))});
}

void compile_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  static const std::regex mean(R"('(\w+)'.*did you mean '(\w+)')");
  static const std::regex unknown(
      R"((?:call to undeclared (?:library )?function|implicit declaration of function|undeclared identifier|unknown type name|incomplete (?:definition of )?type|has incomplete type) '(?:struct |union )?(\w+)')");
  std::set<std::string> headers;
  int seen = 0;
  for (const auto& d : r.compiler_diagnostics) {
    if (d.text.rfind("error", 0) != 0 || ++seen > 6) continue;
    const std::string first = d.text.substr(0, d.text.find('\n'));
    std::smatch m;
    if (d.line > 0 && std::regex_search(first, m, mean))
      if (auto c = src.replace_word(d.line, d.column, m[1], m[2]))
        out.push_back({"compiler_fixit", "clang's suggestion: '" + m[1].str() + "' -> '" + m[2].str() + "'", d.line, *c});
    if (d.line > 0 && first.find("expected ';'") != std::string::npos)
      if (auto c = src.insert_text(d.line, d.column, ";"))
        out.push_back({"compiler_fixit", "clang's suggestion: insert ';'", d.line, *c});
    static const std::regex member(R"(no member named '(\w+)' in '(?:struct|union) \w+')");
    if (d.line > 0 && first.find("did you mean") == std::string::npos && std::regex_search(first, m, member))
      for (const std::string& guess : member_guesses(m[1]))
        if (auto c = src.replace_word(d.line, d.column, m[1], guess))
          out.push_back({"compiler_fixit", "member '" + m[1].str() + "' -> '" + guess + "'", d.line, *c});
    if (d.line > 0 && first.find("comparison between pointer and integer") != std::string::npos)
      quoted_number_candidates(src, d.line, out);
    static const std::regex enumerator(R"(redefinition of enumerator '(\w+)')");
    if (d.line > 0 && std::regex_search(first, m, enumerator))  // the later duplicate goes; the first value stays
      out.push_back({"compiler_fixit", "remove the second definition of enumerator " + m[1].str(), d.line,
                     src.remove_lines(d.line, d.line)});
    if (d.line > 0 && first.find("incompatible integer to pointer conversion passing") != std::string::npos)
      if (auto c = src.insert_text(d.line, d.column, "&"))  // a helper wants the address of the value
        out.push_back({"compiler_fixit", "pass the address: '&' before the argument at line " + std::to_string(d.line) +
                                             " column " + std::to_string(d.column),
                       d.line, *c});
    // __uint/__type/SEC without libbpf's macros: "type name requires a specifier" on a map definition.
    static const std::regex libbpf_macro(R"(\b(__uint|__type|__array|SEC)\s*\()");
    if (d.line > 0 && !src.includes("bpf/bpf_helpers.h") && std::regex_search(src.line(d.line), libbpf_macro) &&
        headers.insert("bpf/bpf_helpers.h").second)
      out.push_back({"include", "#include <bpf/bpf_helpers.h> defines __uint, __type and SEC", src.include_line(),
                     src.add_include("bpf/bpf_helpers.h")});
    if (std::regex_search(first, m, unknown)) {
      const std::string h = header_for(m[1]);
      if (!h.empty() && headers.insert(h).second && !src.includes(h))
        out.push_back({"include", "#include <" + h + "> declares " + m[1].str(), src.include_line(), src.add_include(h)});
    }
  }
}

// The returns tried after an inserted check: the action near the line where the proof was
// lost, then what the function around the rejected line returns (at most 3).
std::vector<std::string> action_order(const Source& src, int proof_line, int line) {
  std::vector<std::string> acts;
  if (std::string a = src.action_near(proof_line); !a.empty()) acts.push_back(a);
  for (const auto& v : return_values(src, line))
    if (std::find(acts.begin(), acts.end(), v) == acts.end() && acts.size() < 3) acts.push_back(v);
  return acts;
}

void bounds_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  const int line = r.verifier_line;
  if (line <= 0) return;
  // In a subprogram that is handed data_end, the check uses its parameter.
  const int fn = function_start(src, line);
  const bool param = fn > 0 && (src.mentions(fn, "data_end") || src.mentions(fn + 1, "data_end"));
  const std::string end = param ? "data_end" : src.data_end_expr(line);
  std::vector<std::string> checks;
  static const std::regex arrow(R"((\w+)\s*->)");
  const std::string text = src.line(line);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), arrow); it != std::sregex_iterator(); ++it) {
    const std::string base = (*it)[1];
    if (base == src.ctx_name()) continue;
    checks.push_back("(void *)(" + base + " + 1) > " + end);
  }
  // p[K] with constant indexes: the check covers the largest one on the line (payload[4..9]).
  static const std::regex indexed(R"(\b(\w+)\s*\[\s*(\d+)\s*\])");
  std::map<std::string, long> top;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), indexed); it != std::sregex_iterator(); ++it)
    top[(*it)[1]] = std::max(top[(*it)[1]], std::stol((*it)[2]));
  for (const auto& [base, k] : top)
    if (src.array_size(base, line).empty()) checks.push_back("(void *)(" + base + " + " + std::to_string(k + 1) + ") > " + end);
  static const std::regex need(R"(data \+ (\d+) <= data_end)");
  std::smatch m;
  const std::string data = src.data_var(line);
  if (!data.empty() && std::regex_search(r.required_proof, m, need))
    checks.push_back("(void *)" + data + " + " + m[1].str() + " > " + end);
  std::set<std::string> seen;
  for (const auto& act : action_order(src, r.proof_line, line))
    for (const auto& cond : checks) {
      if (!seen.insert(cond + act).second) continue;
      const std::string stmt = early_return(cond, discard_live_reservations(src, line), act);
      out.push_back({"packet_bounds_check", "bounds check before line " + std::to_string(line) + ": if (" + cond +
                                                ") return " + act + ";",
                     line, src.insert_before(line, stmt)});
    }
}

void null_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  const int line = r.verifier_line;
  if (line <= 0) return;
  std::vector<std::pair<int, std::string>> lookups = src.lookups_before(line);
  // The compiler may attribute the access to a neighbouring statement (a hoisted load):
  // when the rejected line names no lookup, each lookup never tested against NULL.
  bool named = false;
  for (const auto& [at, var] : lookups) named = named || src.mentions(line, var);
  auto untested = [&](int at, const std::string& var) {
    const std::regex test("(!\\s*" + var + "\\b|\\b" + var + "\\s*[!=]=\\s*(NULL|0)\\b|if\\s*\\(\\s*" + var + "\\s*\\))");
    for (int i = at + 1; i <= line; ++i)
      if (std::regex_search(src.line(i), test)) return false;
    return true;
  };
  // "T *r = &fallback; r = lookup(...);": NULL falls back to what r held before.
  for (const auto& [at, var] : lookups) {
    if (named ? !src.mentions(line, var) : !untested(at, var)) continue;
    const Declaration d = src.declaration_of(var, at - 1);
    std::smatch m;
    const std::string decl = src.line(d.line);
    if (d.line <= 0 || !d.initialised || !std::regex_search(decl, m, std::regex("\\b" + var + "\\s*=\\s*([^;]+);")))
      continue;
    const int stmt_end = src.statement_end(at);
    out.push_back({"null_check", "after the lookup at line " + std::to_string(at) + ": if (!" + var + ") " + var +
                                     " = " + m[1].str() + ";",
                   stmt_end, src.insert_after(stmt_end, "if (!" + var + ")\n\t" + var + " = " + m[1].str() + ";")});
  }
  for (const auto& act : action_order(src, 0, line))
    for (const auto& [at, var] : lookups) {
      if (named ? !src.mentions(line, var) : !untested(at, var)) continue;
      const int stmt_end = src.statement_end(at);
      out.push_back({"null_check", "NULL check after the lookup at line " + std::to_string(at) + ": if (!" + var +
                                       ") return " + act + ";",
                     stmt_end,
                     src.insert_after(stmt_end, early_return("!" + var, discard_live_reservations(src, at, var), act))});
    }
}

// A dynptr slice whose length is a number, not the size of what it is read as:
// eth = bpf_dynptr_slice(&ptr, 0, buf, 13) -> ..., sizeof(*eth)).
void slice_size_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  static const std::regex slice(R"((\w+)\s*=\s*(?:\([^)]*\)\s*)?bpf_dynptr_slice(?:_rdwr)?\s*\(.*,\s*(\d+)\s*\)\s*;)");
  for (const auto& [at, var] : src.lookups_before(r.verifier_line)) {
    std::smatch m;
    const std::string l = src.line(at);
    if (!std::regex_search(l, m, slice) || m[1] != var) continue;
    out.push_back({"slice_size", "line " + std::to_string(at) + ": slice length " + m[2].str() + " -> sizeof(*" + var + ")",
                   at, src.replace_line(at, std::string(l).replace(m.position(2), m.length(2), "sizeof(*" + var + ")"))});
  }
}

// "Unreleased reference": the return at the rejected line leaves a reservation
// open. The return becomes a block that discards it first (one line either way).
// The verifier names the function's exit (often its closing brace): every return up to
// that line with a reservation still open is a candidate.
void release_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  static const std::regex ret(R"(return\s+[^;]*;)");
  for (int line = 1; line <= r.verifier_line; ++line) {
    const std::string l = src.line(line);
    std::smatch m;
    // In "if (!r) return ...;" r is NULL: it has nothing to release.
    static const std::regex null_test(R"(if\s*\(\s*!\s*(\w+)\s*\))");
    std::smatch t;
    std::string tested;
    const std::string head = src.line(line - 1) + " " + l;
    if (std::regex_search(head, t, null_test)) tested = t[1];
    const std::string discards = discard_live_reservations(src, line, tested);
    if (discards.empty() || !std::regex_search(l, m, ret)) continue;
    out.push_back({"release_reference", "line " + std::to_string(line) + ": " + discards + "before the return", line,
                   src.replace_line(line, std::string(l).replace(m.position(0), m.length(0), "{ " + discards + m.str(0) + " }"))});
  }
}

void uninit_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  const int line = r.verifier_line;
  if (line <= 0) return;
  for (const auto& name : src.identifiers(line)) {
    const Declaration d = src.declaration_of(name, line);
    if (d.line <= 0 || d.initialised) continue;
    const std::string init = d.aggregate ? " = {}" : " = 0";
    if (auto c = src.initialise(d, init))
      out.push_back({"zero_init", "initialise " + name + " (line " + std::to_string(d.line) + ")" + init, d.line, *c});
    if (d.aggregate)
      out.push_back({"zero_init", "__builtin_memset(&" + name + ", 0, sizeof(" + name + ")) after line " +
                                      std::to_string(d.line),
                     d.line, src.insert_after(d.line, "__builtin_memset(&" + name + ", 0, sizeof(" + name + "));")});
  }
}

void index_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  const int line = r.verifier_line;
  if (line <= 0) return;
  static const std::regex indexed(R"((\w+)\s*\[\s*([A-Za-z_]\w*)\s*\])");
  const std::string text = src.line(line);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), indexed); it != std::sregex_iterator(); ++it) {
    const std::string array = (*it)[1], index = (*it)[2];
    const std::string size = src.array_size(array, line);
    if (size.empty()) continue;
    for (const auto& act : action_order(src, 0, line))
      out.push_back({"index_clamp", "bound " + index + " by " + size + " before line " + std::to_string(line),
                     line, src.insert_before(line, "if (" + index + " >= " + size + ")\n\treturn " + act + ";")});
  }
}

// The unprivileged verifier refuses a packet pointer moved by a variable
// ("pointer arithmetic with it prohibited for !root"): (void *)ip + ip->ihl * 4, or a TCP
// header's tcp->doff * 4.
// An IPv4 header without options has a constant length: the program keeps
// parsing those (ihl == 5, sizeof(*ip)) and returns early for the others; likewise a TCP
// header without options (doff == 5).
void variable_offset_candidates(const Source& src, std::vector<Candidate>& out) {
  static const std::regex ihl(R"((?:\(\s*\w+\s*\)\s*)?(?:\(\s*)?(\w+)\s*->\s*(ihl|doff)\s*\*\s*4(?:\s*\))?)");
  for (int n = 1; n <= src.size(); ++n) {
    const std::string l = src.line(n);
    std::smatch m;
    if (!std::regex_search(l, m, ihl)) continue;
    const std::string ip = m[1];
    const Source fixed(src.replace_line(n, std::string(l).replace(m.position(0), m.length(0), "sizeof(*" + ip + ")")));
    for (const auto& act : action_order(src, 0, n))
      out.push_back({"variable_offset", "line " + std::to_string(n) + ": " + m.str(0) + " -> sizeof(*" + ip +
                                            "), for headers without options (if (" + ip + "->" + m[2].str() + " != 5) return " + act + ";)",
                     n, fixed.insert_before(n, "if (" + ip + "->" + m[2].str() + " != 5)\n\treturn " + act + ";")});
    return;
  }
}

}  // namespace

std::vector<Candidate> repair_candidates(const std::string& source, const VerifyResult& r) {
  std::vector<Candidate> out;
  const Source src(source);
  switch (r.first_failed_stage) {
    case Stage::compile:
      compile_candidates(src, r, out);
      stack_size_candidates(src, r, out);
      break;
    case Stage::verify:
      switch (r.verifier_class) {
        case VerifierClass::packet_bounds: bounds_candidates(src, r, out); break;
        case VerifierClass::null_check_missing: null_candidates(src, r, out); break;
        case VerifierClass::uninitialized:
        case VerifierClass::invalid_helper_argument: uninit_candidates(src, r, out); break;
        default:
          if (r.verifier_message.find("Unreleased reference") != std::string::npos) release_candidates(src, r, out);
          slice_size_candidates(src, r, out);
          if (r.verifier_message.find("prohibited for !root") != std::string::npos) variable_offset_candidates(src, out);
          quoted_number_candidates(src, r.verifier_line, out);  // "8" compared with a byte: a pointer comparison
          break;
      }
      loop_bound_candidates(src, r, out);
      stack_size_candidates(src, r, out);
      pointer_asm_candidates(src, r, out);
      map_type_candidates(src, r, out);
      helper_buffer_candidates(src, r, out);
      packet_to_stack_candidates(src, r, out);
      dynptr_init_candidates(src, r, out);
      if (out.empty()) index_candidates(src, r, out);
      stale_packet_candidates(src, r, out);
      break;
    case Stage::behaviour: mutation_candidates(src, r, out); break;
    default: break;
  }
  return out;
}

std::vector<FixIt> proposed_fixits(const std::string& source, const VerifyResult& r, size_t max) {
  std::vector<FixIt> out;
  if (r.decision != Decision::fail || (r.first_failed_stage != Stage::compile && r.first_failed_stage != Stage::verify))
    return out;
  for (const Candidate& c : repair_candidates(source, r)) {
    if (out.size() >= max) break;
    std::string diff = unified_diff(source, c.source, "prog.c");
    if (!diff.empty()) out.push_back({c.kind, c.description, c.line, std::move(diff)});
  }
  return out;
}

}  // namespace qwen3::verify
