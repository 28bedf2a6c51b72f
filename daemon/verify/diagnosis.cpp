#include "verify/diagnosis.h"

#include "verify/short_diagnostic.h"

#include <cctype>
#include <regex>
#include <sstream>
#include <utility>
#include <vector>

namespace qwen3::verify {
namespace {

bool has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

// The span on `line`: the first of `tokens` found in it, else the line's text
// without its indentation. Columns are 1-based, end exclusive.
void set_span(VerifyResult& r, const std::string& source, int line, int column,
              const std::vector<std::string>& tokens = {}) {
  r.span_line = line;
  r.span_text = source_line_text(source, line);
  const std::string& t = r.span_text;
  if (line <= 0 || t.empty()) return;
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  size_t c = column > 0 ? static_cast<size_t>(column - 1) : t.size();
  // A dereference: the span starts at the '*' and covers its operand (*verdict).
  const bool deref = c + 1 < t.size() && t[c] == '*' && ident(t[c + 1]);
  if (c < t.size() && (ident(t[c]) || deref)) {
    // From the column over the operand there: a name and its member/index chain (eth->h_proto, ip[1]).
    size_t e = deref ? c + 1 : c;
    for (;;) {
      while (e < t.size() && ident(t[e])) ++e;
      if (e + 1 < t.size() && t[e] == '-' && t[e + 1] == '>' && e + 2 < t.size() && ident(t[e + 2])) e += 2;
      else if (e + 1 < t.size() && t[e] == '.' && ident(t[e + 1])) e += 1;
      else if (e < t.size() && t[e] == '[') {
        size_t close = t.find(']', e);
        if (close == std::string::npos) break;
        e = close + 1;
      } else break;
    }
    r.span_column_start = column;
    r.span_column_end = static_cast<int>(e) + 1;
    return;
  }
  for (const auto& tok : tokens) {
    size_t at = t.find(tok);
    if (at != std::string::npos) {
      r.span_column_start = static_cast<int>(at) + 1;
      r.span_column_end = static_cast<int>(at + tok.size()) + 1;
      return;
    }
  }
  size_t b = t.find_first_not_of(" \t");
  size_t e = t.find_last_not_of(" \t");
  if (b == std::string::npos) return;
  r.span_column_start = static_cast<int>(b) + 1;
  r.span_column_end = static_cast<int>(e) + 2;
}

void set(VerifyResult& r, const char* id, const char* cls, std::string next) {
  r.error_id = id;
  r.error_class = cls;
  r.next_action = std::move(next);
}

void diagnose_policy(VerifyResult& r, const std::string& source) {
  const std::string text = r.compiler_diagnostics.empty() ? r.summary : r.compiler_diagnostics.front().text;
  const int line = r.compiler_diagnostics.empty() ? 0 : r.compiler_diagnostics.front().line;
  std::vector<std::string> tokens;
  if (has(text, "clang reports that it read")) {
    set(r, "BPFV-POL-READ", "policy_violation",
        "Remove the #include/#embed of the file named: only prog.c and the private include tree (bpf/, linux/, "
        "vmlinux.h, the minimal libc headers) may be read.");
  } else if (has(text, "raw string")) {
    set(r, "BPFV-POL-RAWSTR", "policy_violation", "Write the text as an ordinary string literal (\"...\" with escapes).");
    tokens = {"R\""};
  } else if (has(text, "assembler directive")) {
    set(r, "BPFV-POL-ASMDIR", "policy_violation",
        "Remove the assembler directive from the inline assembly; keep only BPF instructions (and .byte/.long data).");
    tokens = {"asm"};
  } else if (has(text, "inline assembly must")) {
    set(r, "BPFV-POL-ASMFORM", "policy_violation",
        "Write the asm template as string literals directly inside asm volatile(\"...\" : outputs : inputs), not "
        "through a macro.");
    tokens = {"asm"};
  } else if (has(text, "#include")) {
    set(r, "BPFV-POL-INCLUDE", "policy_violation",
        "Include only <bpf/NAME.h>, <linux/NAME.h>, <vmlinux.h> or the minimal libc headers; copy the few "
        "definitions you need from other headers into the program.");
    tokens = {"include"};
  } else if (has(text, "token pasting")) {
    set(r, "BPFV-POL-PASTE", "policy_violation", "Spell the identifiers out instead of pasting tokens with ##.");
    tokens = {"##", "%:%:"};
  } else if (has(text, "SEC") || has(text, "section")) {
    set(r, "BPFV-POL-SECTION", "policy_violation",
        "Put exactly one function in SEC(\"xdp\"); besides it only SEC(\".maps\") maps and SEC(\"license\").");
    tokens = {"SEC", "section"};
  } else if (has(text, "source is") || has(text, "line is longer") || has(text, "NUL byte")) {
    set(r, "BPFV-POL-SIZE", "policy_violation", "Shorten the source (at most 256 KiB, lines at most 16 KiB, no NUL bytes).");
  } else if (has(text, "#") && has(text, "is not allowed")) {
    set(r, "BPFV-POL-DIRECTIVE", "policy_violation",
        "Remove the preprocessor directive; allowed are #define/#undef/#if.../#include as documented and #pragma "
        "once/unroll/clang loop.");
    tokens = {"#"};
  } else {
    set(r, "BPFV-POL-CONSTRUCT", "policy_violation", "Remove the construct named in the diagnostic: " + text);
  }
  set_span(r, source, line, 0, tokens);
}

void diagnose_compile(VerifyResult& r, const std::string& source) {
  const Diagnostic* first = nullptr;
  for (const auto& d : r.compiler_diagnostics)
    if (d.text.rfind("error", 0) == 0 || d.text.rfind("fatal", 0) == 0) {
      first = &d;
      break;
    }
  if (has(r.summary, "limit") || has(r.summary, "out of memory") || has(r.summary, "exceeded")) {
    set(r, "BPFV-CC-LIMIT", "compile_limit",
        "Make the program smaller for the compiler: fewer macro expansions, smaller unrolled loops.");
  } else if (first && has(first->text, "file not found")) {
    set(r, "BPFV-CC-HEADER", "compile_error",
        "The header does not exist in the private include tree; include a libbpf or uapi header that does, or "
        "declare what you need yourself.");
  } else {
    set(r, "BPFV-CC-ERROR", "compile_error",
        first ? "Fix the compiler error: " + first->text : "Fix the compiler errors listed in compiler_diagnostics.");
  }
  if (first) set_span(r, source, first->line, first->column);
}

struct Rule {
  const char* id;
  const char* next;
};

// One rule per verifier class (the class is the diagnosis class).
const Rule* verifier_class_rule(VerifierClass c) {
  static const Rule pkt{"BPFV-VER-PKT-BOUNDS",
                        "Before touching N bytes at packet pointer p, prove them: if ((void *)p + N > (void *)(long)"
                        "ctx->data_end) return XDP_DROP; using the same pointer the access uses; re-derive pointers "
                        "after bpf_xdp_adjust_head/tail/meta."};
  static const Rule null{"BPFV-VER-NULL",
                         "Check the pointer returned by bpf_map_lookup_elem (or another _OR_NULL helper) against NULL "
                         "before dereferencing it."};
  static const Rule uninit{"BPFV-VER-UNINIT",
                           "Initialise the variable or struct before it is read or passed to a helper (= {0} or "
                           "__builtin_memset), on every path."};
  static const Rule loop{"BPFV-VER-LOOP",
                         "Give the loop a constant upper bound the verifier can see (for (i = 0; i < MAX; i++) with an "
                         "early break), or use bpf_loop(); reduce unrolling if the program is too large."};
  static const Rule arg{"BPFV-VER-HELPER-ARG",
                        "Pass the helper what its prototype requires: a map for map arguments, initialised stack "
                        "memory of a constant, non-zero size for buffers, bounded non-negative lengths."};
  static const Rule ctx{"BPFV-VER-CTX",
                        "Read only the fields of struct xdp_md (data, data_end, data_meta, ingress_ifindex, "
                        "rx_queue_index, egress_ifindex) as 32-bit loads at their offsets, and never write ctx."};
  switch (c) {
    case VerifierClass::packet_bounds: return &pkt;
    case VerifierClass::null_check_missing: return &null;
    case VerifierClass::uninitialized: return &uninit;
    case VerifierClass::unbounded_loop: return &loop;
    case VerifierClass::invalid_helper_argument: return &arg;
    case VerifierClass::invalid_context_access: return &ctx;
    default: return nullptr;
  }
}

// Class "other": refusals of the call allowlist and map checks (security_policy), then the rest, by message.
struct MessageRule {
  std::vector<const char*> needles;  // any of them
  const char* id;
  const char* cls;
  const char* next;
};
const std::vector<MessageRule>& other_rules() {
  static const std::vector<MessageRule> rules = {
      {{"loop budget:"}, "BPFV-VER-LOOP-BUDGET", "verifier_limit",
       "Bound every bpf_loop / bpf_for / bpf_for_each_map_elem count by a small constant (n & 0xff, or if (n > 64) "
       "n = 64) and do not nest them with large counts: one test run may do at most max_loop_iterations iterations."},
      {{"socket lookup"}, "BPFV-SEC-SOCK-LOOKUP", "security_policy",
       "Do not look up host sockets (bpf_sk_lookup_*, bpf_skc_lookup_tcp): decide from the packet's own headers and "
       "maps."},
      {{"socket cast"}, "BPFV-SEC-SOCK-CAST", "security_policy",
       "Do not cast to kernel socket types (bpf_skc_to_*): verified programs may not read kernel objects."},
      {{"BTF cast", "pointer-returning lookup", "kfunc"}, "BPFV-SEC-KFUNC", "security_policy",
       "Use only the allowed kfuncs (bpf_dynptr_from_xdp, bpf_dynptr_slice[_rdwr], bpf_iter_num_*, "
       "bpf_xdp_metadata_*); others return or walk kernel objects."},
      {{"kernel memory read", "kernel variable"}, "BPFV-SEC-KMEM", "security_policy",
       "Do not read kernel memory (probe_read, kernel variables, BTF pointers): work on the packet and the program's "
       "maps only."},
      {{"side effect on the host"}, "BPFV-SEC-SIDE-EFFECT", "security_policy",
       "Remove bpf_trace_printk/bpf_send_signal; report through a map, ring buffer or the packet instead."},
      {{"allowlist"}, "BPFV-SEC-HELPER", "security_policy",
       "Use only the helpers packet programs need (docs/xdp-verify.md lists them)."},
      {{"has type", "asks to be pinned"}, "BPFV-SEC-MAP", "security_policy",
       "Use an allowed map type without pinning (array, hash, LRU, LPM, devmap, cpumap, xskmap, prog array, ringbuf, "
       "perf_event_array, queue/stack, bloom)."},
      {{"unknown func", "cannot call", "not supported", "invalid func"}, "BPFV-VER-HELPER-UNAVAILABLE", "other",
       "The helper is not available to XDP programs on this kernel; use an XDP helper instead."},
  };
  return rules;
}

void diagnose_verify(VerifyResult& r, const std::string& source) {
  const std::string& m = r.verifier_message;
  // Refusals before the verifier name what was called: the span is that name.
  std::vector<std::string> tokens;
  static const std::regex named(R"((?:calls the kfunc|declares the kernel variable|calls) (\w+))");
  std::smatch nm;
  if (std::regex_search(m, nm, named)) tokens.push_back(nm[1]);
  if (const Rule* rule = verifier_class_rule(r.verifier_class)) {
    set(r, rule->id, to_string(r.verifier_class), rule->next);
  } else {
    set(r, "BPFV-VER-OTHER", "other", "Read verifier_message and the log excerpt; fix the instruction at the span.");
    for (const auto& rule : other_rules()) {
      bool hit = false;
      for (const char* n : rule.needles) hit |= has(m, n);
      if (hit) {
        set(r, rule.id, rule.cls, rule.next);
        break;
      }
    }
  }
  set_span(r, source, r.verifier_line, r.verifier_column, tokens);
}

void diagnose_behaviour(VerifyResult& r) {
  if (r.decision == Decision::error) {
    if (has(r.summary, "none of the"))
      set(r, "BPFV-FIX-NONE-RAN", "fixtures",
          "Give at least one fixture the kernel can run (frames of 14 bytes or more).");
    else if (has(r.summary, "map contents"))
      set(r, "BPFV-FIX-MAPS", "fixtures", "Fix the fixture file's \"maps\": map names, key and value sizes.");
    else
      set(r, "BPFV-FIX-UNUSABLE", "fixtures", "Fix the fixtures named in the summary (hex, action names, sizes).");
    return;
  }
  const FixtureResult* first = nullptr;
  for (const auto& f : r.fixtures)
    if (f.ran && !f.passed) {
      first = &f;
      break;
    }
  const std::string note = first ? first->note : "";
  const std::string which = first ? "fixture " + first->name + ": " + note + ". " : "";
  if (has(note, "expected XDP_") || has(note, "expected UNKNOWN"))
    set(r, "BPFV-BEH-ACTION", "wrong_verdict",
        which + "Follow that packet through the program's parsing and find the branch that returns the wrong action.");
  else if (has(note, "output packet differs"))
    set(r, "BPFV-BEH-BYTES", "wrong_rewrite",
        which + "Compare got_packet_hex with expected_packet_hex from the first differing byte (checksums, byte order).");
  else
    set(r, "BPFV-BEH-MAP", "wrong_map_state", which + "Check which map update the program performs for that packet.");
}

}  // namespace

std::string source_line_text(const std::string& source, int line) {
  if (line <= 0) return "";
  std::stringstream ss(source);
  std::string l;
  for (int i = 1; std::getline(ss, l); ++i)
    if (i == line) {
      if (!l.empty() && l.back() == '\r') l.pop_back();
      return l;
    }
  return "";
}

namespace {

void diagnose_stage(VerifyResult& r, const std::string& source) {
  switch (r.first_failed_stage) {
    case Stage::policy: return diagnose_policy(r, source);
    case Stage::compile: return diagnose_compile(r, source);
    case Stage::verify: return diagnose_verify(r, source);
    case Stage::behaviour: return diagnose_behaviour(r);
    case Stage::infrastructure:
      set(r, "BPFV-INFRA", "infrastructure", "Not the program's fault: retry later or ask the operator (" + r.summary + ").");
      return;
    case Stage::answer:
      set(r, "BPFV-ANS-NOSRC", "no_source", "Answer with one ```c code block holding the whole program.");
      return;
    case Stage::none: return;
  }
}

}  // namespace

void diagnose(VerifyResult& r, const std::string& source) {
  r.error_id.clear();
  r.error_class.clear();
  r.next_action.clear();
  r.short_diagnostic.clear();
  if (r.decision == Decision::pass) return;
  diagnose_stage(r, source);
  r.short_diagnostic = short_diagnostic(r);
}

}  // namespace qwen3::verify
