// Rewrite rules for the verifier's (and clang's) resource limits
// (repair_rules.h): loops it cannot bound, and stacks over 512 bytes.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <regex>

#include "verify/repair_rules.h"

namespace qwen3::verify {
namespace {


// The position of the ')' matching the '(' at `open` on the same line; npos if none.
size_t matching_paren(const std::string& l, size_t open) {
  int depth = 0;
  for (size_t i = open; i < l.size(); ++i) {
    if (l[i] == '(') ++depth;
    if (l[i] == ')' && --depth == 0) return i;
  }
  return std::string::npos;
}

// Splits "a; b; c" at the semicolons outside parentheses.
std::vector<std::string> split_for_header(const std::string& h) {
  std::vector<std::string> parts(1);
  int depth = 0;
  for (char c : h) {
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c == ';' && depth == 0) parts.emplace_back();
    else parts.back() += c;
  }
  return parts;
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t");
  return a == std::string::npos ? "" : s.substr(a, s.find_last_not_of(" \t") - a + 1);
}

struct Loop {
  int start = 0;      // the first line of the statement (a do-while's `do`; 0: not found)
  int line = 0;       // the line of `for (` / `while (`
  int end = 0;        // the last line of its body
  bool is_for = false;
  size_t open = 0, close = 0;  // the header's parentheses on that line
};

// The line a new statement for the loop at `lp` goes before: a do-while's `do`.
int statement_line(const Source& src, const Loop& lp) {
  if (!contains(src.line(lp.line).substr(0, lp.open), "}")) return lp.line;
  static const std::regex do_kw(R"(^\s*do\b)");
  for (int i = lp.line - 1; i >= 1 && i > lp.line - 200; --i)
    if (std::regex_search(src.line(i), do_kw)) return i;
  return 0;
}

// Loops written `for (...)` / `while (...)` on one line; a do-while's `} while (...);` is the end of
// its body and carries the condition too.
std::vector<Loop> loops(const Source& src) {
  static const std::regex head(R"(^\s*(?:\}\s*)?(for|while)\s*\()");
  std::vector<Loop> out;
  for (int n = 1; n <= src.size(); ++n) {
    const std::string l = src.line(n);
    std::smatch m;
    if (!std::regex_search(l, m, head)) continue;
    Loop lp{0, n, src.block_end(n), m[1] == "for", static_cast<size_t>(m.position(0) + m.length(0) - 1), 0};
    lp.close = matching_paren(l, lp.open);
    if (lp.close == std::string::npos) continue;
    if (contains(l.substr(0, lp.open), "}")) lp.end = n;  // `} while (c);` closes a do-while
    lp.start = statement_line(src, lp);
    out.push_back(lp);
  }
  return out;
}

// The loop rewritten as `#pragma unroll` + `for (__u32 COUNTER = 0; COUNTER < CAP; COUNTER++)` whose body
// starts with `if (!(COND)) break;`: clang unrolls a constant trip count fully, so the verifier sees no
// back-edge (a rolled loop with a counter is refused by the unprivileged verifier: it follows the
// counter's exit test speculatively and never ends). A `for (INIT; COND; INC)` keeps INIT before it and
// INC at the end of the body; a do-while tests COND at the end. Braced bodies without `continue` only
// (a `continue` would skip INC or the do-while's test).
std::optional<std::string> unrolled_loop(const Source& src, const Loop& lp, const std::string& counter, int cap) {
  const std::string head = src.line(lp.start), close = src.line(lp.end);
  const bool do_while = lp.start != lp.line;
  if (head.find('{') == std::string::npos || lp.end <= lp.start) return std::nullopt;
  static const std::regex cont(R"(\bcontinue\s*;)");
  bool has_continue = false;
  for (int n = lp.start + 1; n < lp.end; ++n) has_continue |= std::regex_search(src.line(n), cont);
  const std::string l = src.line(lp.line);
  std::string init, cond = trim(l.substr(lp.open + 1, lp.close - lp.open - 1)), inc;
  if (lp.is_for) {
    const auto parts = split_for_header(cond);
    if (parts.size() != 3) return std::nullopt;
    init = trim(parts[0]), cond = trim(parts[1]), inc = trim(parts[2]);
  }
  if (has_continue && (do_while || !inc.empty())) return std::nullopt;
  // The unbraced body of an if/else cannot take the initialisation moved in front of the loop.
  static const std::regex bare_if(R"((^|\W)(if\s*\(.*\)|else)\s*$)");
  if (!init.empty() && std::regex_search(src.line(lp.start - 1), bare_if)) return std::nullopt;
  if (!do_while && trim(l.substr(lp.close + 1)) != "{") return std::nullopt;
  const std::string ind = src.indentation(lp.start), unit = !ind.empty() && ind[0] == ' ' ? "    " : "\t";
  const std::string test = cond.empty() ? "" : ind + unit + "if (!(" + cond + "))\n" + ind + unit + unit + "break;";
  // Edits from the bottom up, so the line numbers above stay valid.
  Source out = src;
  if (do_while) {
    out = Source(out.replace_line(lp.end, test.empty() ? ind + "}" : test + "\n" + ind + "}"));
  } else if (!inc.empty()) {
    out = Source(out.insert_before(lp.end, unit + inc + ";"));
  }
  std::string header = init.empty() ? "" : ind + init + ";\n";
  header += "#pragma unroll\n" + ind + "for (__u32 " + counter + " = 0; " + counter + " < " + std::to_string(cap) + "; " +
            counter + "++) {";
  if (!do_while && !test.empty()) header += "\n" + test;
  return out.replace_line(lp.start, header);
}


// Bytes of one element of a scalar type; 0 when unknown (a struct or typedef).
int scalar_size(const std::string& type) {
  static const std::map<std::string, int> sizes = {
      {"char", 1},  {"unsigned char", 1}, {"__u8", 1},   {"u8", 1},    {"__s8", 1},     {"uint8_t", 1},
      {"short", 2}, {"__u16", 2},         {"__be16", 2}, {"u16", 2},   {"uint16_t", 2}, {"int", 4},
      {"__u32", 4}, {"__be32", 4},        {"u32", 4},    {"__s32", 4}, {"uint32_t", 4}, {"unsigned int", 4},
      {"long", 8},  {"__u64", 8},         {"__be64", 8}, {"u64", 8},   {"__s64", 8},    {"uint64_t", 8}};
  const auto it = sizes.find(type);
  return it == sizes.end() ? 0 : it->second;
}

// A local that may take the stack over 512 bytes: `T name[N];` or `struct S name;` (= {} allowed).
struct Local {
  int line = 0;
  std::string type, name, count;  // count "" for a struct
  bool zeroed = false;
  int bytes = 0;                  // estimate for the order in which they are tried
};

std::vector<Local> large_locals(const Source& src, int from, int to) {
  static const std::regex array(R"(^\s*((?:struct\s+\w+)|(?:unsigned\s+)?\w+)\s+(\w+)\s*\[\s*(\w+)\s*\]\s*(=\s*\{\s*0?\s*\})?\s*;)");
  static const std::regex strct(R"(^\s*(struct\s+\w+)\s+(\w+)\s*(=\s*\{\s*0?\s*\})?\s*;)");
  std::vector<Local> out;
  for (int n = from; n <= to; ++n) {
    const std::string l = src.line(n);
    std::smatch m;
    if (std::regex_search(l, m, array) && m[1] != "return") {
      Local v{n, m[1], m[2], m[3], m[4].matched, 0};
      const int each = scalar_size(v.type);
      const long count = std::strtol(v.count.c_str(), nullptr, 0);
      v.bytes = (each ? each : 8) * (count > 0 ? static_cast<int>(std::min(count, 1L << 20)) : 64);
      if (v.bytes >= 64) out.push_back(v);
    } else if (std::regex_search(l, m, strct)) {
      out.push_back({n, m[1], m[2], "", m[3].matched, 256});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const Local& a, const Local& b) { return a.bytes > b.bytes; });
  return out;
}

// The function headers the stack error names: the function clang names, else every function.
std::vector<int> stack_functions(const Source& src, const std::string& name) {
  std::vector<int> out;
  for (int n = 1; n <= src.size(); ++n) {
    if (function_start(src, n) != n) continue;
    if (name.empty() || find_word(src.line(n), name) != std::string::npos) out.push_back(n);
  }
  return out;
}

// The program with local `v` of the function at `header` (ending at `end`) moved to a
// one-entry per-CPU array map, looked up at the declaration.
std::string move_to_percpu_map(const Source& src, const Local& v, int header, int end, const std::string& act) {
  const bool array = !v.count.empty();
  const std::string value_type = array ? v.type + "[" + v.count + "]" : v.type;
  const std::string size = array ? "sizeof(" + value_type + ")" : "sizeof(*" + v.name + ")";
  Source out = src;
  for (int n = v.line + 1; n <= end; ++n) {
    std::string l = out.line(n), was = l;
    l = std::regex_replace(l, std::regex(R"(\bsizeof\s*\(\s*)" + v.name + R"(\s*\))"), size);
    if (!array) {
      l = std::regex_replace(l, std::regex(R"(&\s*)" + v.name + R"(\b(?!\s*(\.|->|\[)))"), v.name);
      l = std::regex_replace(l, std::regex(R"(\b)" + v.name + R"(\s*\.)"), v.name + "->");
    }
    if (l != was) out = Source(out.replace_line(n, l));
  }
  const std::string map = v.name + "_percpu";
  const std::string ind = src.indentation(v.line);
  std::string decl = ind + "__u32 " + map + "_key = 0;\n" + ind + v.type + " *" + v.name +
                     " = bpf_map_lookup_elem(&" + map + ", &" + map + "_key);\n" + ind + "if (!" + v.name + ")\n" + ind +
                     (!ind.empty() && ind[0] == ' ' ? "    " : "\t") + "return " + act + ";";
  if (v.zeroed) decl += "\n" + ind + "__builtin_memset(" + v.name + ", 0, " + size + ");";
  out = Source(out.replace_line(v.line, decl));
  const int at = header > 1 && src.line(header - 1).find("SEC(") != std::string::npos ? header - 1 : header;
  return out.insert_before(at, "/* " + v.name + " lives in a per-CPU array map: the BPF stack holds 512 bytes */\n"
                               "struct {\n\t__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);\n\t__uint(max_entries, 1);\n"
                               "\t__type(key, __u32);\n\t__type(value, " + value_type + ");\n} " + map +
                               " SEC(\".maps\");\n\n");
}

}  // namespace

void loop_bound_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  if (r.verifier_class != VerifierClass::unbounded_loop) return;
  std::vector<Loop> ls = loops(src);
  // The loops around the rejected line, innermost first, then the others of its function in order.
  const int line = r.verifier_line;
  const int fn = function_start(src, line > 0 ? line : src.xdp_function_line() + 1);
  std::stable_sort(ls.begin(), ls.end(), [&](const Loop& a, const Loop& b) {
    const bool ia = a.start <= line && line <= a.end, ib = b.start <= line && line <= b.end;
    if (ia != ib) return ia;
    return ia ? a.start > b.start : false;
  });
  int tried = 0;
  for (const Loop& lp : ls) {
    if (tried == 3) break;
    const bool around = lp.start <= line && line <= lp.end;
    if (!around && line > 0 && function_start(src, lp.line) != fn) continue;
    const int at = lp.start;
    if (at <= 0) continue;
    const std::string counter = "loop_bound_" + std::to_string(at);
    bool made = false;
    // Up to 8 covers VLAN tags, 64 IP and TCP option bytes (40), 256 a larger scan.
    for (int cap : {8, 64, 256}) {
      const auto rewritten = unrolled_loop(src, lp, counter, cap);
      if (!rewritten) break;
      made = true;
      out.push_back({"loop_bound",
                     "bound the loop at line " + std::to_string(lp.line) + " to " + std::to_string(cap) +
                         " iterations, unrolled (#pragma unroll, for " + counter + " < " + std::to_string(cap) + ")",
                     lp.line, *rewritten});
    }
    tried += made;
  }
}

void stack_size_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  bool over = false;
  std::string fn;
  if (r.first_failed_stage == Stage::compile) {
    static const std::regex in_function(R"(in function (\w+))");
    for (const auto& d : r.compiler_diagnostics) {
      if (!contains(d.text, "stack limit")) continue;
      over = true;
      std::smatch m;
      if (std::regex_search(d.text, m, in_function)) fn = m[1];
    }
  } else if (r.first_failed_stage == Stage::verify) {
    const std::string& m = r.verifier_message;
    over = contains(m, "combined stack size") || (contains(m, "stack size") && contains(m, "Too large")) ||
           contains(m, "stack depth");
  }
  if (!over) return;
  int made = 0;
  for (int header : stack_functions(src, fn)) {
    const int end = src.block_end(header);
    for (const Local& v : large_locals(src, header + 1, end)) {
      if (made++ == 4) return;
      const auto acts = return_values(src, v.line);
      const std::string act = acts.empty() ? "0" : acts.front();
      out.push_back({"stack_to_map",
                     "move " + v.name + " (line " + std::to_string(v.line) + ", " +
                         (v.count.empty() ? v.type : v.type + "[" + v.count + "]") +
                         ") off the stack into a per-CPU array map",
                     v.line, move_to_percpu_map(src, v, header, end, act)});
    }
  }
}

}  // namespace qwen3::verify
