// Reading the kernel verifier's log: which instruction was rejected, why, on
// which source line (the "; <code> @ file:line" BTF line-info annotations the
// verifier prints at log level >= 1), and which class of mistake it is.
#pragma once

#include <cstdint>
#include <string>

#include "verify/verify_result.h"

namespace qwen3::verify {

// A message up to its first line break (the verifier's and libbpf's messages
// put their gist first).
inline std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

struct VerifierAnalysis {
  VerifierClass verifier_class = VerifierClass::none;
  std::string message;      // the verifier's error line(s)
  int insn = -1;            // index of the rejected instruction, -1 if unknown
  std::string insn_text;    // its disassembly, e.g. "(71) r3 = *(u8 *)(r2 +12)"
  int line = 0;             // source line from BTF line info, 0 if unknown
  std::string line_file;    // the file that line belongs to
  std::string annotation;   // the source text the verifier printed for it
  std::string excerpt;      // log lines around the rejected instruction
  uint32_t processed_insns = 0;
};

// main_file is the name the program's own lines carry in line info.
VerifierAnalysis analyze_verifier_log(const std::string& log, const std::string& main_file);

// The source position clang recorded for instruction `insn` of the XDP
// program in the object's BTF line info (.BTF.ext): line and column (1-based;
// 0 when unknown). Only instructions of the program's own section are found
// (not those of subprograms libbpf appends).
struct SourcePosition {
  int line = 0;
  int column = 0;
};
SourcePosition btf_line_info_position(const std::string& elf_object, int insn);

// Classification of an error message (and the rejected instruction, since an
// error at a helper call is about the helper's arguments).
VerifierClass classify_verifier_error(const std::string& message, const std::string& insn_text);

}  // namespace qwen3::verify
