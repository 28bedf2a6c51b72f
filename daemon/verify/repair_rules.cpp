#include "verify/repair_rules.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>

namespace qwen3::verify {
namespace {


std::string regex_escape(const std::string& s) {
  static const std::regex special(R"([.^$|()\[\]{}*+?\\])");
  return std::regex_replace(s, special, R"(\$&)");
}

// The name a function header defines: the last identifier before its '('.
std::string function_name(const std::string& header) {
  static const std::regex name(R"((\w+)\s*\()");
  std::smatch m;
  return std::regex_search(header, m, name) ? m[1].str() : "";
}

// `&x`, `x`, `(T *)&x`: the variable an argument names, "" for anything else.
std::string argument_variable(const std::string& arg) {
  static const std::regex var(R"(^(?:\([^()]*\)\s*)?&?\s*([A-Za-z_]\w*)$)");
  std::smatch m;
  return std::regex_match(arg, m, var) ? m[1].str() : "";
}

// Replaces "A, B" (any spacing) in line n by "A2, B2"; nullopt if not found.
std::optional<std::string> replace_arguments(const Source& src, int n, const std::string& a, const std::string& b,
                                             const std::string& a2, const std::string& b2) {
  const std::regex pair(regex_escape(a) + R"(\s*,\s*)" + regex_escape(b));
  const std::string l = src.line(n);
  std::smatch m;
  if (!std::regex_search(l, m, pair)) return std::nullopt;
  return src.replace_line(n, std::string(l).replace(m.position(0), m.length(0), a2 + ", " + b2));
}

// The declaration of `name` at line d with its type replaced by `type`.
std::optional<std::string> retype(const Source& src, const Declaration& d, const std::string& type) {
  const std::string l = src.line(d.line);
  const size_t at = find_word(l, d.name);
  const size_t first = l.find_first_not_of(" \t");
  if (at == std::string::npos || first == std::string::npos || first >= at) return std::nullopt;
  return src.replace_line(d.line, l.substr(0, first) + type + " " + l.substr(at));
}

// Calls to bpf_* functions on a line, in order, each once.
std::vector<std::string> helper_calls(const std::string& line) {
  static const std::regex call(R"(\b(bpf_\w+)\s*\()");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(line.begin(), line.end(), call); it != std::sregex_iterator(); ++it)
    if (std::find(out.begin(), out.end(), (*it)[1].str()) == out.end()) out.push_back((*it)[1]);
  return out;
}

}  // namespace

int function_start(const Source& src, int line) {
  for (int i = line; i >= 1; --i) {
    const std::string l = src.line(i);
    if (l.empty() || !(std::isalpha(static_cast<unsigned char>(l[0])) || l[0] == '_')) continue;
    if (contains(l, "(") && !contains(l, ";") && !contains(l, "SEC(")) return i;
  }
  return 0;
}

std::vector<std::string> return_values(const Source& src, int line) {
  std::vector<std::string> out;
  auto add = [&](const std::string& v) {
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  };
  const int start = function_start(src, line);
  static const std::regex ret(R"(\breturn\s+(-?\w+)\s*;)");
  if (start > 0) {
    const int end = src.block_end(start);
    std::vector<std::pair<int, std::string>> found;
    for (int i = start; i <= end; ++i) {
      std::smatch m;
      const std::string l = src.line(i);
      if (std::regex_search(l, m, ret)) found.push_back({i, m[1]});
    }
    for (const auto& [i, v] : found)
      if (i >= line) {
        add(v);
        break;
      }
    for (const auto& [i, v] : found) add(v);
  }
  const bool xdp = start > 0 && src.xdp_function_line() > 0 && src.xdp_function_line() < start &&
                   start - src.xdp_function_line() <= 2;
  if (xdp || out.empty()) {
    add("XDP_PASS");
    add("XDP_DROP");
  }
  if (out.size() > 3) out.resize(3);
  return out;
}

void pointer_asm_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  const std::string& msg = r.verifier_message;
  if (!(contains(msg, "pointer arithmetic with") && contains(msg, "operator prohibited"))) return;
  static const std::regex asm_word(R"(\b(?:asm|__asm|__asm__)\b)");
  std::vector<int> lines;
  for (int n = 1; n <= src.size(); ++n)
    if (std::regex_search(src.line(n), asm_word)) lines.push_back(n);
  const int at = r.verifier_line;
  std::stable_sort(lines.begin(), lines.end(), [&](int a, int b) { return std::abs(a - at) < std::abs(b - at); });
  if (lines.size() > 4) lines.resize(4);
  for (int n : lines)
    out.push_back({"pointer_asm",
                   "remove the inline asm at line " + std::to_string(n) +
                       ": it does integer arithmetic on a register the verifier tracks as a pointer",
                   n, src.remove_lines(n, src.statement_end(n))});
}

void stale_packet_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  const int line = r.verifier_line, xdp = src.xdp_function_line();
  if (line <= 0 || xdp <= 0) return;
  // Functions that move the packet: their callers' packet pointers are stale after the call.
  static const std::regex adjust(R"(\bbpf_xdp_adjust_(?:head|tail|meta)\s*\()");
  std::set<std::string> movers;
  for (int n = 1; n < xdp; ++n)
    if (std::regex_search(src.line(n), adjust))
      if (int s = function_start(src, n); s > 0) movers.insert(function_name(src.line(s)));
  int site = 0;
  for (int n = xdp + 1; n < line; ++n) {
    const std::string l = src.line(n);
    bool calls = std::regex_search(l, adjust);
    for (const auto& f : movers) calls = calls || std::regex_search(l, std::regex("\\b" + f + "\\s*\\("));
    if (calls) site = n;
  }
  if (site == 0) return;
  const int at = src.block_end(site);
  const std::string data = src.data_var(at + 1), ctx = src.ctx_name(), end = src.data_end_expr(at + 1);
  if (data.empty()) return;
  std::string reload = data + " = (void *)(long)" + ctx + "->data;";
  if (!contains(end, "->")) reload += "\n" + end + " = (void *)(long)" + ctx + "->data_end;";
  out.push_back({"stale_packet_pointer", "reload " + data + " after the packet moved (line " + std::to_string(site) + ")",
                 at, src.insert_after(at, reload, site)});
  // Each pointer the rejected line dereferences, derived again from the fresh data.
  const std::string rejected = src.line(line);
  const std::string discards = discard_live_reservations(src, at + 1);
  for (const auto& p : src.identifiers(line)) {
    if (p == data || !(contains(rejected, p + "->") || contains(rejected, p + "["))) continue;
    const std::regex assign("\\b" + p + R"(\s*=\s*([^;=][^;]*);)");
    std::string init;
    for (int n = xdp + 1; n < site; ++n) {
      std::smatch m;
      const std::string l = src.line(n);
      if (std::regex_search(l, m, assign)) init = m[1];
    }
    if (init.empty()) continue;
    std::vector<std::string> inits = {init};
    if (init != data) inits.push_back(data);  // adjust_head moved the start onto this header
    for (const auto& e : inits)
      for (const auto& act : return_values(src, line)) {
        const std::string stmt = reload + "\n" + p + " = " + e + ";\n" +
                                 early_return("(void *)(" + p + " + 1) > " + end, discards, act);
        out.push_back({"stale_packet_pointer",
                       "reload " + data + " after line " + std::to_string(site) + " and derive " + p + " = " + e +
                           " again, with its bounds check (return " + act + ")",
                       at, src.insert_after(at, stmt, site)});
      }
  }
}

void map_type_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  static const std::regex wrong(R"(cannot pass map_type \d+ into func (\w+)#)");
  static const std::map<std::string, std::vector<std::string>> takes = {
      {"bpf_redirect_map", {"BPF_MAP_TYPE_XSKMAP", "BPF_MAP_TYPE_DEVMAP", "BPF_MAP_TYPE_DEVMAP_HASH", "BPF_MAP_TYPE_CPUMAP"}},
      {"bpf_perf_event_output", {"BPF_MAP_TYPE_PERF_EVENT_ARRAY"}},
      {"bpf_tail_call", {"BPF_MAP_TYPE_PROG_ARRAY"}},
      {"bpf_ringbuf_output", {"BPF_MAP_TYPE_RINGBUF"}},
      {"bpf_ringbuf_reserve", {"BPF_MAP_TYPE_RINGBUF"}},
      {"bpf_map_push_elem", {"BPF_MAP_TYPE_QUEUE", "BPF_MAP_TYPE_STACK"}},
      {"bpf_map_pop_elem", {"BPF_MAP_TYPE_QUEUE", "BPF_MAP_TYPE_STACK"}},
      {"bpf_map_peek_elem", {"BPF_MAP_TYPE_QUEUE", "BPF_MAP_TYPE_STACK"}},
  };
  std::smatch m;
  if (!std::regex_search(r.verifier_message, m, wrong)) return;
  const auto it = takes.find(m[1]);
  if (it == takes.end()) return;
  for (int n = r.verifier_line; n > 0 && n <= r.verifier_line + 1; ++n)
    for (const auto& arg : call_arguments(src.line(n), it->first)) {
      const std::string map = argument_variable(arg);
      const int type_line = map.empty() || arg.find('&') == std::string::npos ? 0 : src.map_type_line(map);
      if (type_line == 0) continue;
      static const std::regex type(R"(BPF_MAP_TYPE_\w+)");
      const std::string l = src.line(type_line);
      for (const auto& t : it->second)
        out.push_back({"map_type", "map " + map + " (line " + std::to_string(type_line) + "): " + t + ", the type " +
                                       it->first + " takes",
                       type_line, src.replace_line(type_line, std::regex_replace(l, type, t))});
      return;
    }
}

void helper_buffer_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  static const std::regex stack(R"(invalid (?:indirect )?(?:read|write) (?:from|to) stack R\d+ off[= ]?-?\d+(?:\+-?\d+)? size[= ]?(\d+))");
  std::smatch sm;
  const int line = r.verifier_line;
  if (line <= 0 || !std::regex_search(r.verifier_message, sm, stack)) return;
  const std::string l = src.line(line);
  for (const auto& fn : helper_calls(l)) {
    const std::vector<std::string> args = call_arguments(l, fn);
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string x = argument_variable(args[i]), len = i + 1 < args.size() ? args[i + 1] : "";
      const Declaration d = x.empty() ? Declaration{} : src.declaration_of(x, line);
      if (d.line <= 0 || d.line == line) continue;
      const bool map_call = fn == "bpf_map_lookup_elem" || fn == "bpf_map_update_elem" || fn == "bpf_map_delete_elem";
      if (map_call && i == 1) {  // a key narrower than the map's key
        const std::string type = src.map_key_type(argument_variable(args[0]));
        if (!type.empty())
          if (auto c = retype(src, d, type))
            out.push_back({"helper_buffer", "key " + x + " (line " + std::to_string(d.line) + ") takes the map's key type " + type,
                           d.line, *c});
        continue;
      }
      if (map_call || len.empty() || contains(len, "sizeof(" + x + ")")) continue;
      const std::string size = "sizeof(" + x + ")";
      const auto sized = replace_arguments(src, line, args[i], len, args[i], size);
      if (!sized) continue;
      // bpf_xdp_load_bytes into two neighbouring arrays: the rest goes to the second one.
      static const std::regex next_array(R"(^\s*[\w\s]*?\b(\w+)\s*\[[^\]]+\]\s*;)");
      static const std::regex assigned(R"((\w+)\s*=\s*bpf_xdp_(?:load|store)_bytes\s*\()");
      std::smatch na, as;
      const std::string next = src.line(d.line + 1);
      if ((fn == "bpf_xdp_load_bytes" || fn == "bpf_xdp_store_bytes") && d.aggregate && args.size() == 4 &&
          std::regex_search(next, na, next_array) && std::regex_search(l, as, assigned)) {
        const std::string y = na[1], err = as[1];
        const std::string rest = "if (!" + err + ")\n\t" + err + " = " + fn + "(" + args[0] + ", " + args[1] + " + " +
                                 size + ", " + y + ", sizeof(" + y + "));";
        out.push_back({"helper_buffer", "line " + std::to_string(line) + ": " + len + " bytes into " + x + " and " + y +
                                            ": " + size + " into " + x + ", the rest into " + y,
                       line, Source(*sized).insert_after(src.statement_end(line), rest)});
      }
      out.push_back({"helper_buffer", "line " + std::to_string(line) + ": length " + len + " -> " + size, line, *sized});
      // A scalar smaller than the length: a byte array of that length instead.
      const bool number = !len.empty() && std::all_of(len.begin(), len.end(), ::isdigit);
      if (!d.aggregate && number && args[i] == "&" + x) {
        const Source grown(src.replace_line(d.line, src.indentation(d.line) + "__u8 " + x + "[" + len + "] = {};"));
        if (auto c = replace_arguments(grown, line, args[i], len, x, size))
          out.push_back({"helper_buffer", x + " (line " + std::to_string(d.line) + ") becomes __u8 " + x + "[" + len +
                                              "], the length the helper uses",
                         d.line, *c});
      }
    }
  }
}

void packet_to_stack_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  const int line = r.verifier_line;
  if (line <= 0 || !contains(r.verifier_message, "helper access to the packet is not allowed")) return;
  const std::string l = src.line(line), data = src.data_var(line);
  for (const auto& fn : helper_calls(l)) {
    const std::vector<std::string> args = call_arguments(l, fn);
    for (size_t i = 0; i + 1 < args.size(); ++i) {
      const std::string x = argument_variable(args[i]);
      if (x.empty() || args[i].find('&') != std::string::npos) continue;
      const Declaration d = src.declaration_of(x, line);
      const bool pointer = x == data || (d.line > 0 && contains(src.line(d.line), "*"));
      if (!pointer) continue;
      const std::string buf = "packet_copy";
      if (auto c = replace_arguments(src, line, args[i], args[i + 1], buf, "sizeof(" + buf + ")"))
        out.push_back({"packet_to_stack", "copy " + args[i + 1] + " packet bytes to a stack buffer for " + fn, line,
                       Source(*c).insert_before(line, "__u8 " + buf + "[" + args[i + 1] + "];\n__builtin_memcpy(" + buf +
                                                          ", " + x + ", sizeof(" + buf + "));")});
    }
  }
}

void dynptr_init_candidates(const Source& src, const VerifyResult& r, std::vector<Candidate>& out) {
  const int line = r.verifier_line, xdp = src.xdp_function_line();
  if (line <= 0 || xdp <= 0 || !contains(r.verifier_message, "Expected an initialized dynptr")) return;
  const std::string l = src.line(line);
  for (const auto& fn : helper_calls(l)) {
    const std::vector<std::string> args = call_arguments(l, fn);
    if (args.empty() || args[0].find('&') == std::string::npos) continue;
    const std::string ptr = argument_variable(args[0]);
    if (ptr.empty()) continue;
    bool declared = false;
    for (int n = 1; n <= src.size(); ++n) declared = declared || contains(src.line(n), "bpf_dynptr_from_xdp");
    for (const auto& act : return_values(src, line)) {
      std::string c = src.insert_before(line, "if (bpf_dynptr_from_xdp(" + src.ctx_name() + ", 0, &" + ptr +
                                                  "))\n\treturn " + act + ";");
      if (!declared)
        c = Source(c).insert_before(xdp, "extern int bpf_dynptr_from_xdp(struct xdp_md *x, __u64 flags, "
                                         "struct bpf_dynptr *ptr__uninit) __ksym;");
      out.push_back({"dynptr_init", "initialise " + ptr + " with bpf_dynptr_from_xdp before line " + std::to_string(line) +
                                        " (return " + act + " if it fails)",
                     line, c});
    }
    return;
  }
}

}  // namespace qwen3::verify
