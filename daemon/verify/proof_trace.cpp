#include "verify/proof_trace.h"

#include <regex>
#include <sstream>
#include <vector>

namespace qwen3::verify {
namespace {

// One line of the log that matters to the trace.
struct Step {
  enum Kind { insn, jump } kind = insn;
  int index = -1;       // instruction index (insn), or the branch's source (jump: "from A to B")
  std::string text;     // the instruction, e.g. "if r3 > r2 goto pc+4"
  std::string state;    // registers after it ("R2=pkt_end() R3=pkt(off=14,r=14)"), level 2
  int line = 0;         // source line of the program (0: none, or a header's)
};

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::vector<Step> parse_steps(const std::string& log, const std::string& main_file) {
  static const std::regex insn_re(R"(^(\d+): \([0-9a-f]{2}\) ([^;]*?)\s*(?:;\s*(.*))?$)");
  static const std::regex from_re(R"(^from (\d+) to (\d+):)");
  static const std::regex note_re(R"(^; .* @ (\S+):(\d+)\s*$)");
  std::vector<Step> steps;
  std::stringstream ss(log);
  std::string l;
  int line = 0;
  while (std::getline(ss, l)) {
    if (l.size() > 1200) l = l.substr(0, 600) + " ... " + l.substr(l.size() - 400);
    std::smatch m;
    if (l.rfind("; ", 0) == 0) {
      if (std::regex_match(l, m, note_re)) line = basename_of(m[1]) == basename_of(main_file) ? std::stoi(m[2]) : 0;
    } else if (std::regex_match(l, m, insn_re)) {
      steps.push_back({Step::insn, std::stoi(m[1]), m[2], m[3], line});
    } else if (std::regex_search(l, m, from_re)) {
      steps.push_back({Step::jump, std::stoi(m[1]), "", "", 0});
    }
  }
  return steps;
}

// The path that led to the last step, newest first: "from A to B" is followed
// back to the branch A that the verifier took it from.
std::vector<const Step*> path_back(const std::vector<Step>& steps) {
  std::vector<const Step*> path;
  int i = static_cast<int>(steps.size()) - 1;
  while (i >= 0 && path.size() < 20000) {
    const Step& s = steps[i];
    if (s.kind == Step::jump) {
      int j = i - 1;
      while (j >= 0 && !(steps[j].kind == Step::insn && steps[j].index == s.index)) --j;
      i = j;
      continue;
    }
    path.push_back(&s);
    --i;
  }
  return path;
}

std::string at_line(int line) { return line > 0 ? " at line " + std::to_string(line) : ""; }
std::string before_line(int line) { return line > 0 ? " before line " + std::to_string(line) : ""; }

ProofTrace packet_bounds(const std::vector<const Step*>& path, int fail_line, const std::string& msg) {
  ProofTrace t;
  static const std::regex access(R"(off=(-?\d+) size=(\d+), R(\d+)\(id=(\d+),off=(-?\d+),r=(\d+)\))");
  std::smatch m;
  int off = 0, size = 0, id = 0, proven = -1;
  std::string reg;
  if (std::regex_search(msg, m, access)) {
    off = std::stoi(m[1]);
    size = std::stoi(m[2]);
    reg = "r" + m[3].str();
    id = std::stoi(m[4]);
    proven = std::stoi(m[6]);
  }
  static const std::regex cmp(R"(^if r(\d+) ([<>]=?) r(\d+) goto)");
  for (size_t k = 1; k < path.size(); ++k) {
    const Step& s = *path[k];
    std::smatch c;
    if (!std::regex_search(s.text, c, cmp) || s.state.find("pkt_end") == std::string::npos) continue;
    t.insn = s.index;
    t.line = s.line;
    t.note = "the bounds check" + at_line(s.line) + " (" + s.text + ")";
    t.note += proven >= 0 ? " proves " + std::to_string(proven) + " byte(s) of the packet" : " is the last on this path";
    if (size > 0) t.note += "; the access" + at_line(fail_line) + " needs " + std::to_string(off + size);
    break;
  }
  if (t.insn < 0) {
    // Never compared: point at where the packet pointer came from (ctx->data).
    for (size_t k = 1; k < path.size(); ++k) {
      const Step& s = *path[k];
      if (s.text.find("*(u32 *)(r") == std::string::npos || s.state.find("=pkt(") == std::string::npos) continue;
      if (s.state.find("r=0)") == std::string::npos && s.state.find("pkt()") == std::string::npos) continue;
      t.insn = s.index;
      t.line = s.line;
    }
    t.note = "the packet pointer" + (t.line > 0 ? " loaded at line " + std::to_string(t.line) : std::string()) +
             " is never compared with data_end on the path to line " + std::to_string(fail_line);
  }
  if (size > 0 && id == 0)
    t.required = "data + " + std::to_string(off + size) + " <= data_end" + before_line(fail_line) + " (" + reg +
                 " reads " + std::to_string(size) + " byte(s) at packet offset " + std::to_string(off) + ")";
  else if (size > 0)
    t.required = reg + " + " + std::to_string(off + size) + " <= data_end, compared on the same pointer" +
                 before_line(fail_line) + " (its offset is variable)";
  else
    t.required = "the accessed bytes must be compared with data_end" + before_line(fail_line);
  return t;
}

ProofTrace null_check(const std::vector<const Step*>& path, int fail_line, const std::string& msg) {
  ProofTrace t;
  static const std::regex reg_re(R"(R(\d+) invalid mem access '(\w+)')");
  std::smatch m;
  std::string reg = "the pointer";
  std::string id;
  if (std::regex_search(msg, m, reg_re)) {
    reg = "r" + m[1].str();
    // Its id, from the newest state that shows it.
    const std::string key = "R" + m[1].str() + "=";
    for (const Step* s : path) {
      size_t at = s->state.find(key);
      if (at == std::string::npos) continue;
      size_t idp = s->state.find("(id=", at);
      if (idp != std::string::npos && s->state.find("or_null", at) < idp) {
        id = s->state.substr(idp + 4, s->state.find_first_of(",)", idp + 4) - idp - 4);
        break;
      }
    }
  }
  for (const Step* s : path) {
    if (s->text.rfind("call ", 0) != 0) continue;
    if (s->state.find("or_null") == std::string::npos) continue;
    if (!id.empty() && s->state.find("(id=" + id) == std::string::npos) continue;
    std::string helper = s->text.substr(5);
    helper = helper.substr(0, helper.find('#'));
    t.insn = s->index;
    t.line = s->line;
    t.note = helper + at_line(s->line) + " may return NULL; " + reg + " is used" + at_line(fail_line) +
             " without a NULL check on this path";
    t.required = "the result of " + helper + at_line(s->line) + " must be compared with NULL (if (!p) return ...)" +
                 before_line(fail_line);
    return t;
  }
  t.required = reg + " must be checked against NULL" + before_line(fail_line);
  return t;
}

ProofTrace uninitialised(const std::vector<const Step*>& path, int fail_line, const std::string& msg) {
  ProofTrace t;
  static const std::regex reg_re(R"(R(\d+) !read_ok)");
  static const std::regex stack_re(R"(read from stack (?:R\d+ )?off (-?\d+)\+(\d+) size (\d+))");
  static const std::regex store_re(R"(^\*\(u(\d+) \*\)\(r10 (-\d+)\) = )");
  std::smatch m;
  if (std::regex_search(msg, m, reg_re)) {
    const std::string reg = "r" + m[1].str();
    if (!path.empty()) {
      t.insn = path.back()->index;
      t.line = path.back()->line;
    }
    t.note = reg + " is never written between the function's entry" + at_line(t.line) + " and line " +
             std::to_string(fail_line);
    t.required = reg + " must hold a value" + before_line(fail_line) +
                 " (initialise the variable or argument it carries on every path)";
    return t;
  }
  if (std::regex_search(msg, m, stack_re)) {
    const int base = std::stoi(m[1]), bad = base + std::stoi(m[2]), size = std::stoi(m[3]);
    for (size_t k = 1; k < path.size(); ++k) {
      std::smatch s;
      if (!std::regex_search(path[k]->text, s, store_re)) continue;
      const int at = std::stoi(s[2]), bytes = std::stoi(s[1]) / 8;
      if (at + bytes <= base || at >= base + size) continue;
      t.insn = path[k]->index;
      t.line = path[k]->line;
      break;
    }
    t.note = "the " + std::to_string(size) + "-byte stack object at fp" + std::to_string(base) + " has byte fp" +
             std::to_string(bad) + " unwritten" + (t.line > 0 ? "; its last write is at line " + std::to_string(t.line) : "");
    t.required = "all " + std::to_string(size) + " bytes at fp" + std::to_string(base) + " must be written" +
                 before_line(fail_line) + " (= {} or __builtin_memset over the whole variable, padding included)";
    return t;
  }
  t.required = "every variable read" + at_line(fail_line) + " must be initialised on every path";
  return t;
}

ProofTrace last_write(const std::vector<const Step*>& path, const std::string& msg) {
  ProofTrace t;
  static const std::regex reg_re(R"(\bR(\d+)\b)");
  std::smatch m;
  if (!std::regex_search(msg, m, reg_re)) return t;
  const std::string reg = "r" + m[1].str();
  const int n = std::stoi(m[1]);
  for (size_t k = 1; k < path.size(); ++k) {
    const Step& s = *path[k];
    const bool writes = s.text.rfind(reg + " ", 0) == 0 && s.text.find('=') != std::string::npos;
    const bool clobbers = s.text.rfind("call ", 0) == 0 && n <= 5;
    if (!writes && !clobbers) continue;
    t.insn = s.index;
    t.line = s.line;
    t.note = reg + " was last set" + at_line(s.line) + " (" + s.text + ")" +
             (clobbers && n > 0 ? ": a helper call leaves r1-r5 unreadable and packet pointers invalid after "
                                  "bpf_xdp_adjust_*" : "");
    break;
  }
  return t;
}

}  // namespace

ProofTrace trace_lost_proof(const std::string& log, const std::string& main_file, int failing_line,
                            VerifierClass cls, const std::string& message) {
  const std::vector<Step> steps = parse_steps(log, main_file);
  const std::vector<const Step*> path = path_back(steps);
  if (path.empty()) return {};
  switch (cls) {
    case VerifierClass::packet_bounds: return packet_bounds(path, failing_line, message);
    case VerifierClass::null_check_missing: return null_check(path, failing_line, message);
    case VerifierClass::uninitialized: return uninitialised(path, failing_line, message);
    default: return last_write(path, message);
  }
}

}  // namespace qwen3::verify
