#include "verify/generate.h"

#include <cctype>

namespace qwen3::verify {
namespace {

std::string clip(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n) + " ..."; }

std::string strip_think(const std::string& text) {
  std::string out = text;
  for (;;) {
    size_t b = out.find("<think>");
    if (b == std::string::npos) break;
    size_t e = out.find("</think>", b);
    out.erase(b, e == std::string::npos ? std::string::npos : e + 8 - b);
  }
  return out;
}

bool looks_like_c(const std::string& s) {
  bool has_marker = s.find("#include") != std::string::npos || s.find("SEC(") != std::string::npos;
  return has_marker && s.find('{') != std::string::npos && s.find('}') != std::string::npos;
}

}  // namespace

const std::string& xdp_system_prompt() {
  static const std::string prompt =
      "You write eBPF XDP programs for the Linux kernel in C. Reply with exactly one C code block "
      "(```c ... ```) containing a complete XDP program and nothing else that matters:\n"
      "- one function in SEC(\"xdp\") taking struct xdp_md *ctx and returning XDP_ABORTED, XDP_DROP, XDP_PASS, "
      "XDP_TX or XDP_REDIRECT;\n"
      "- char LICENSE[] SEC(\"license\") = \"GPL\";\n"
      "- include only <linux/*.h> kernel uapi headers, <bpf/bpf_helpers.h>, <bpf/bpf_endian.h> or <vmlinux.h>; "
      "no other includes, no assembler directives in inline asm, no raw string literals, no #pragma except unroll, "
      "no token pasting (##);\n"
      "- before every packet access compare the pointer plus the access size against ctx->data_end, "
      "check map lookups for NULL, initialise every variable, and bound every loop.\n"
      "The program is compiled with clang -O2 -g -target bpf, loaded through the kernel verifier and run on test "
      "packets with BPF_PROG_TEST_RUN.";
  return prompt;
}

std::string task_message(const std::string& task, const std::vector<Fixture>& fixtures) {
  std::string m = "Task: " + task + "\n";
  if (fixtures.empty()) {
    m += "\nNo test packets are given; the program must compile and pass the verifier.\n";
  } else {
    m += "\nTest packets (hex, Ethernet frame) and what the program must do with them:\n";
    size_t shown = 0;
    for (const auto& f : fixtures) {
      if (++shown > 16) {
        m += "- ... and " + std::to_string(fixtures.size() - 16) + " more\n";
        break;
      }
      m += "- " + f.name + ": packet " + clip(f.packet_hex, 400) + " -> " + f.expected_action;
      if (!f.expected_packet_hex.empty()) m += ", output packet " + clip(f.expected_packet_hex, 400);
      m += "\n";
    }
  }
  m += "\nAnswer with one ```c code block.";
  return m;
}

std::string repair_message(const std::string& short_diagnostic) {
  return "Your program did not pass.\n" + clip(short_diagnostic, 1200) +
         "\nFix the program and reply with the complete corrected program in one ```c code block.";
}

std::string repair_message(const VerifyResult& r) {
  if (r.first_failed_stage == Stage::answer) return no_source_repair_message();
  return repair_message(r.short_diagnostic.empty() ? r.summary : r.short_diagnostic);
}

std::string no_source_repair_message() {
  return "Your program did not pass. Stage: answer: your answer contained no C program. Reply with the whole program in one code block that starts with "
         "```c and ends with ```, for example:\n"
         "```c\n#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n\nSEC(\"xdp\")\n"
         "int prog(struct xdp_md *ctx)\n{\n\treturn XDP_PASS;\n}\n\nchar LICENSE[] SEC(\"license\") = \"GPL\";\n```\n"
         "Replace the body with the packet checks the task needs.";
}

VerifyResult no_source_result(const std::string& guard_note) {
  VerifyResult r;
  r.decision = Decision::fail;
  r.first_failed_stage = Stage::answer;
  r.summary = "answer: no C source found in the model's answer (expected one ```c fenced code block with an XDP program)";
  if (!guard_note.empty()) r.summary += "; the answer was cut: " + guard_note;
  r.error_id = "BPFV-ANS-NOSRC";
  r.error_class = "no_source";
  r.next_action = "Answer with one ```c code block holding the whole program: the includes, one SEC(\"xdp\") "
                  "function taking struct xdp_md *ctx, and the license.";
  r.short_diagnostic = "Stage: answer: no C program was found in the answer. " + r.next_action;
  return r;
}

std::string extract_c_source(const std::string& completion) {
  const std::string text = strip_think(completion);
  // Fenced blocks found by hand (a regex over a long completion would recurse per character).
  std::string untagged;
  size_t pos = 0;
  for (;;) {
    size_t open = text.find("```", pos);
    if (open == std::string::npos) break;
    size_t eol = text.find('\n', open + 3);
    if (eol == std::string::npos) break;
    std::string tag = text.substr(open + 3, eol - open - 3);
    tag.erase(0, tag.find_first_not_of(" \t"));
    tag = tag.substr(0, tag.find_first_of(" \t\r{"));
    for (auto& c : tag) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t close = text.find("```", eol + 1);
    const bool c_tag = tag == "c" || tag == "cpp" || tag == "c++" || tag == "h";
    if (close == std::string::npos) {
      // An unterminated block (the model ran out of tokens): take the rest.
      std::string rest = text.substr(eol + 1);
      if (c_tag && looks_like_c(rest)) return rest;
      break;
    }
    std::string body = text.substr(eol + 1, close - eol - 1);
    if (c_tag) return body;
    if (tag.empty() && untagged.empty() && looks_like_c(body)) untagged = body;
    pos = close + 3;
  }
  if (!untagged.empty()) return untagged;
  if (looks_like_c(text)) return text;
  return "";
}

}  // namespace qwen3::verify
