#include "verify/verifier_log.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <regex>
#include <sstream>
#include <vector>

namespace qwen3::verify {
namespace {

bool has(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

bool is_noise(const std::string& line) {
  // Precision-tracking chatter and state dumps at log level 2 are not the error.
  static const std::regex state(R"(^\d+: (R\d|frame\d)|^from \d+ to \d+|^\s*$)");
  static const std::regex safe(R"(^\d+: safe$)");
  return line.rfind("mark_precise", 0) == 0 || line.rfind("last_idx", 0) == 0 || line.rfind("regs=", 0) == 0 ||
         line.rfind("parent didn't have", 0) == 0 || line.rfind("; ", 0) == 0 || line == ";" ||
         line.rfind("func#", 0) == 0 || line.rfind("cur state:", 0) == 0 || line.rfind("old state:", 0) == 0 ||
         line.rfind("Live regs", 0) == 0 || std::regex_search(line, safe) || line.rfind("Validating ", 0) == 0 || line.rfind("btf_vmlinux", 0) == 0 ||
         std::regex_search(line, state);
}

std::string basename_of(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string clip(const std::string& s, size_t n) { return s.size() <= n ? s : s.substr(0, n) + "..."; }

}  // namespace

VerifierClass classify_verifier_error(const std::string& message, const std::string& insn_text) {
  const std::string& m = message;
  if (has(m, "!read_ok") || has(m, "invalid read from stack") || has(m, "invalid indirect read from stack") ||
      has(m, "uninit") || has(m, "invalid size of register fill"))
    return VerifierClass::uninitialized;
  if (has(m, "_or_null") || has(m, "or_null'") || has(m, "null pointer"))
    return VerifierClass::null_check_missing;
  if (has(m, "invalid access to packet") || has(m, "outside of the packet") || has(m, "pkt_end") ||
      has(m, "pkt pointer") || has(m, "packet pointer") || has(m, "invalid variable-offset access to packet"))
    return VerifierClass::packet_bounds;
  if (has(m, "bpf_context access") || has(m, "modified ctx ptr") || has(m, "ctx ptr") ||
      has(m, "invalid mem access 'ctx'") || has(m, "context access") || has(m, "into ctx"))
    return VerifierClass::invalid_context_access;
  if (has(m, "back-edge") || has(m, "infinite loop") || has(m, "program is too large") ||
      has(m, "too complex") || has(m, "loop is not bounded") || has(m, "unbounded loop"))
    return VerifierClass::unbounded_loop;
  // A helper that does not exist or is not offered to XDP is not an argument problem.
  if (has(m, "unknown func") || has(m, "invalid func") || has(m, "cannot use helper") || has(m, "cannot call"))
    return VerifierClass::other;
  static const std::regex call_insn(R"(^\(85\) call )");
  if (std::regex_search(insn_text, call_insn) || has(m, "expected=") ||
      has(m, "arg#") || has(m, "helper") || has(m, "min value is negative") || has(m, "zero-sized read") ||
      has(m, "invalid indirect access") || has(m, "cannot pass map_type") || has(m, "is not a known constant"))
    return VerifierClass::invalid_helper_argument;
  return VerifierClass::other;
}

VerifierAnalysis analyze_verifier_log(const std::string& log, const std::string& main_file) {
  VerifierAnalysis a;
  std::vector<std::string> lines;
  {
    std::stringstream ss(log);
    std::string l;
    // std::regex recurses per character: long lines (source text in
    // annotations, level-2 states) are clipped before any matching.
    // The middle goes, so "@ file:line" at the end of annotations survives.
    while (std::getline(ss, l))
      lines.push_back(l.size() > 1500 ? l.substr(0, 1000) + "..." + l.substr(l.size() - 300) : l);
  }
  static const std::regex processed(R"(^processed (\d+) insns)");
  static const std::regex insn(R"(^(\d+): (\([0-9a-f]{2}\) .*)$)");
  static const std::regex annotation(R"(^; (.*?)(?: @ (\S+):(\d+))?\s*$)");

  int end = static_cast<int>(lines.size());
  for (int i = end - 1; i >= 0; --i) {
    std::smatch m;
    if (std::regex_search(lines[i], m, processed)) {
      a.processed_insns = static_cast<uint32_t>(std::stoul(m[1]));
      end = i;
      break;
    }
  }
  int insn_at = -1;
  for (int i = end - 1; i >= 0; --i) {
    std::smatch m;
    if (std::regex_match(lines[i], m, insn)) {
      insn_at = i;
      a.insn = std::stoi(m[1]);
      std::string text = m[2];
      // Level-1 logs append the resulting state after "; " - keep only the instruction.
      size_t semi = text.find("  ; ");
      if (semi == std::string::npos) semi = text.find("\t; ");
      a.insn_text = semi == std::string::npos ? text : text.substr(0, semi);
      while (!a.insn_text.empty() && std::isspace(static_cast<unsigned char>(a.insn_text.back()))) a.insn_text.pop_back();
      break;
    }
  }
  // The error is what the verifier said after the last instruction (or, for
  // CFG checks like back-edges, before any instruction was simulated).
  std::string message;
  // The complexity limit can cut the instruction's line short: "18: (2d) if r2 > r4 goto pc-8 BPF program is too large. ..."
  if (size_t glued = a.insn_text.find(" BPF program is too large"); glued != std::string::npos) {
    message = a.insn_text.substr(glued + 1);
    a.insn_text.resize(glued);
  }
  for (int i = insn_at + 1; i < end; ++i) {
    if (is_noise(lines[i])) continue;
    if (!message.empty()) message += "\n";
    message += clip(lines[i], 400);
  }
  a.message = clip(message, 2000);

  // Source line: nearest annotation before the rejected instruction, preferring the program's own file.
  int first_any = -1;
  for (int i = (insn_at >= 0 ? insn_at : end) - 1; i >= 0; --i) {
    std::smatch m;
    if (lines[i].rfind("; ", 0) != 0 || !std::regex_match(lines[i], m, annotation)) continue;
    // The kernel prints the base name of the file in line info.
    bool is_main = m[2].matched && basename_of(m[2]) == basename_of(main_file);
    if (first_any < 0) first_any = i;
    if (is_main || !m[2].matched) {
      a.annotation = m[1];
      if (m[2].matched) {
        a.line = std::stoi(m[3]);
        a.line_file = m[2];
      }
      break;
    }
  }
  if (a.annotation.empty() && first_any >= 0) {
    std::smatch m;
    std::regex_match(lines[first_any], m, annotation);
    a.annotation = m[1];
    if (m[2].matched) {
      a.line_file = m[2];
      a.line = 0;  // a header line: not a line of the program
    }
  }

  // Excerpt: up to 24 lines leading to the rejected instruction and the error itself.
  int from = std::max(0, (insn_at >= 0 ? insn_at : end) - 24);
  int to = std::min(static_cast<int>(lines.size()), end + 1);
  std::string excerpt;
  for (int i = from; i < to; ++i) excerpt += clip(lines[i], 300) + "\n";
  if (excerpt.size() > 6000) excerpt = "...\n" + excerpt.substr(excerpt.size() - 6000);
  a.excerpt = excerpt;
  a.verifier_class = message.empty() && insn_at < 0 ? VerifierClass::other
                                                    : classify_verifier_error(message, a.insn_text);
  // "Rn min value is negative" at a load or store (not a helper call) through a
  // packet pointer: the offset added to the packet pointer may be negative, a
  // bounds problem (the state lines before it show Rn=pkt(...)).
  static const std::regex negative(R"(^R(\d+) min value is negative)");
  std::smatch nm;
  if (a.verifier_class == VerifierClass::invalid_helper_argument && a.insn_text.rfind("(85) call", 0) != 0 &&
      std::regex_search(message, nm, negative)) {
    const std::string pkt = "R" + nm[1].str() + "=pkt(";
    for (int i = insn_at; i >= 0 && i >= insn_at - 8; --i)
      if (lines[i].find(pkt) != std::string::npos) {
        a.verifier_class = VerifierClass::packet_bounds;
        break;
      }
  }
  return a;
}

namespace {

template <typename T>
bool read_at(const std::string& b, size_t off, T* out) {
  if (off > b.size() || b.size() - off < sizeof(T)) return false;
  std::memcpy(out, b.data() + off, sizeof(T));
  return true;
}

}  // namespace

SourcePosition btf_line_info_position(const std::string& elf, int insn) {
  SourcePosition pos;
  if (insn < 0) return pos;
  Elf64_Ehdr eh;
  if (!read_at(elf, 0, &eh) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_shentsize != sizeof(Elf64_Shdr))
    return pos;
  std::vector<Elf64_Shdr> sh(eh.e_shnum);
  for (size_t i = 0; i < sh.size(); ++i)
    if (!read_at(elf, eh.e_shoff + i * sizeof(Elf64_Shdr), &sh[i])) return pos;
  if (eh.e_shstrndx >= sh.size()) return pos;
  auto section_name = [&](const Elf64_Shdr& h) -> std::string {
    const Elf64_Shdr& strtab = sh[eh.e_shstrndx];
    size_t off = strtab.sh_offset + h.sh_name;
    if (off >= elf.size() || h.sh_name >= strtab.sh_size) return "";
    return std::string(elf.c_str() + off, strnlen(elf.c_str() + off, elf.size() - off));
  };
  std::string btf, ext, prog_section;
  for (const auto& h : sh) {
    const std::string name = section_name(h);
    if (h.sh_offset > elf.size() || h.sh_size > elf.size() - h.sh_offset) continue;
    if (name == ".BTF") btf = elf.substr(h.sh_offset, h.sh_size);
    else if (name == ".BTF.ext") ext = elf.substr(h.sh_offset, h.sh_size);
    else if ((h.sh_flags & SHF_EXECINSTR) && name.rfind("xdp", 0) == 0) prog_section = name;
  }
  // .BTF: header {magic u16, version u8, flags u8, hdr_len u32, type_off, type_len, str_off, str_len}.
  uint32_t btf_hdr_len = 0, str_off = 0, str_len = 0;
  uint16_t magic = 0;
  if (prog_section.empty() || !read_at(btf, 0, &magic) || magic != 0xeB9F || !read_at(btf, 4, &btf_hdr_len) ||
      !read_at(btf, 16, &str_off) || !read_at(btf, 20, &str_len))
    return pos;
  const size_t strings = size_t{btf_hdr_len} + str_off;
  auto btf_string = [&](uint32_t off) -> std::string {
    if (off >= str_len || strings + off >= btf.size()) return "";
    const char* p = btf.c_str() + strings + off;
    return std::string(p, strnlen(p, btf.size() - strings - off));
  };
  // .BTF.ext: header {magic u16, version u8, flags u8, hdr_len u32, func_info_off, func_info_len,
  // line_info_off, line_info_len}; line info: rec_size u32, then per section {name_off, count, records}.
  uint32_t ext_hdr_len = 0, li_off = 0, li_len = 0, rec_size = 0;
  if (!read_at(ext, 0, &magic) || magic != 0xeB9F || !read_at(ext, 4, &ext_hdr_len) || !read_at(ext, 16, &li_off) ||
      !read_at(ext, 20, &li_len))
    return pos;
  size_t at = size_t{ext_hdr_len} + li_off;
  const size_t end = std::min(ext.size(), at + li_len);
  if (!read_at(ext, at, &rec_size) || rec_size < 16) return pos;
  at += 4;
  const uint32_t want = static_cast<uint32_t>(insn) * 8;  // insn_off is in bytes
  while (at + 8 <= end) {
    uint32_t name_off = 0, count = 0;
    read_at(ext, at, &name_off);
    read_at(ext, at + 4, &count);
    at += 8;
    const bool ours = btf_string(name_off) == prog_section;
    // The record of the instruction: the last one at or before it.
    for (uint32_t i = 0; i < count && at + rec_size <= end; ++i, at += rec_size) {
      uint32_t insn_off = 0, line_col = 0;
      read_at(ext, at, &insn_off);
      read_at(ext, at + 12, &line_col);
      if (ours && insn_off <= want) {
        pos.line = static_cast<int>(line_col >> 10);
        pos.column = static_cast<int>(line_col & 0x3ff);
      }
    }
    if (ours) return pos;
  }
  return SourcePosition{};
}

}  // namespace qwen3::verify
