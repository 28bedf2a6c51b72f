#include "verify/generate.h"


#include "common/error.h"
#include "verify/diagnosis.h"
#include "verify/pipeline.h"

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

std::string repair_message(const VerifyResult& r) {
  std::string m = "Your program did not pass. Stage: " + std::string(to_string(r.first_failed_stage)) + ".\n" +
                  clip(r.summary, 600) + "\n";
  if (r.first_failed_stage == Stage::policy || r.first_failed_stage == Stage::compile) {
    // Errors first: warnings matter less to a repair.
    std::vector<const Diagnostic*> ordered;
    for (const auto& d : r.compiler_diagnostics)
      if (d.text.rfind("warning", 0) != 0) ordered.push_back(&d);
    for (const auto& d : r.compiler_diagnostics)
      if (d.text.rfind("warning", 0) == 0) ordered.push_back(&d);
    size_t n = 0;
    for (const Diagnostic* dp : ordered) {
      const Diagnostic& d = *dp;
      if (++n > 10) break;
      m += "- " + (d.line > 0 ? "line " + std::to_string(d.line) + (d.column > 0 ? ":" + std::to_string(d.column) : "") + ": " : "") +
           clip(d.text, 300) + "\n";
    }
  }
  if (r.first_failed_stage == Stage::verify) {
    m += "The kernel verifier rejected it (" + std::string(to_string(r.verifier_class)) + ")";
    if (r.verifier_line > 0) m += " at line " + std::to_string(r.verifier_line) + ": " + clip(r.verifier_source_line, 200);
    m += "\nVerifier says: " + clip(r.verifier_message, 600) + "\n";
    // The last few log lines are the most telling part of the excerpt.
    std::string ex = r.verifier_log_excerpt;
    if (ex.size() > 1200) ex = "..." + ex.substr(ex.size() - 1200);
    if (!ex.empty()) m += "Log excerpt:\n" + ex + "\n";
  }
  if (!r.error_id.empty()) {
    m += "Diagnosis " + r.error_id + " (" + r.error_class + ")";
    if (r.span_line > 0) m += " at line " + std::to_string(r.span_line);
    m += ". Next: " + clip(r.next_action, 500) + "\n";
  }
  if (r.first_failed_stage == Stage::behaviour) {
    for (const auto& f : r.fixtures) {
      if (f.passed || !f.ran) continue;
      m += "- fixture " + f.name + ": expected " + f.expected_action + ", got " + f.got_action;
      if (!f.expected_packet_hex.empty() && f.expected_packet_hex != f.got_packet_hex)
        m += "; expected output " + clip(f.expected_packet_hex, 200) + ", got " + clip(f.got_packet_hex, 200);
      m += "\n";
    }
  }
  m += "Fix the program and reply with the complete corrected program in one ```c code block.";
  return m;
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

std::vector<Attempt> generate_verified(const std::string& task, const std::vector<Fixture>& fixtures, int attempts,
                                       const GenerateFn& generate, const Pipeline& pipeline) {
  if (attempts < 1 || attempts > 10)
    throw invalid_argument("attempts must be between 1 and 10 (got " + std::to_string(attempts) + ")");
  if (task.empty()) throw invalid_argument("the task description is empty");
  if (!generate) throw invalid_argument("no model to generate with");
  std::vector<ChatMessage> messages = {{"system", xdp_system_prompt()}, {"user", task_message(task, fixtures)}};
  std::vector<Attempt> out;
  for (int i = 0; i < attempts; ++i) {
    Attempt a;
    a.messages = messages;
    a.completion = generate(messages);
    a.source = extract_c_source(a.completion);
    if (a.source.empty()) {
      a.result.decision = Decision::fail;
      a.result.first_failed_stage = Stage::policy;
      a.result.summary =
          "policy: no C source found in the model's answer (expected one ```c fenced code block with an XDP program)";
      Diagnostic d;
      d.stage_message = a.result.summary;
      d.text = "no C source found in the answer";
      a.result.compiler_diagnostics.push_back(d);
      diagnose(a.result, a.source);
    } else {
      a.result = pipeline.verify(VerifyRequest{a.source, fixtures, {}});
    }
    const bool done = a.result.decision == Decision::pass || a.result.decision == Decision::error;
    messages.push_back({"assistant", a.completion});
    messages.push_back({"user", repair_message(a.result)});
    out.push_back(std::move(a));
    // An error is not the model's fault (infrastructure, unusable fixtures): retrying cannot help.
    if (done) break;
  }
  return out;
}

}  // namespace qwen3::verify
