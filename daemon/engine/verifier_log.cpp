#include "engine/verifier_log.h"

#include <vector>

namespace qwen3::engine {

std::string tail_lines(const std::string& text, int lines) {
  size_t pos = text.size();
  for (int i = 0; i <= lines && pos > 0; i++) {
    size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    pos = nl;
  }
  return text.substr(pos + 1);
}

std::string failed_program(const std::string& log) {
  // libbpf: "prog 'qn_matmul': failed to load: -13"
  size_t at = log.find("': failed to load");
  if (at == std::string::npos) return "unknown program";
  size_t start = log.rfind("prog '", at);
  if (start == std::string::npos) return "unknown program";
  return log.substr(start + 6, at - start - 6);
}

namespace {

// The kernel's (6.x) and libbpf's words for each limit a model shape can hit.
struct Limit {
  const char* needle;
  const char* what;
};
const Limit kLimits[] = {
    {"BPF program is too large", "the verifier's complexity limit (1,000,000 processed instructions)"},
    {"jumps is too complex", "the verifier's limit of 8,192 pending branches"},
    {"combined stack size", "the 512-byte BPF stack (across calls)"},
    {"is too deep", "the verifier's call depth (8 frames)"},
    {"stack depth", "the 512-byte BPF stack"},
    {"infinite loop", "a loop the verifier cannot bound"},
    {"back-edge", "a loop the verifier cannot bound"},
    {"invalid access to map value", "a map value's bounds (the access is past value_size)"},
    {"outside of the allowed memory range", "a map value's bounds (an offset the verifier cannot bound)"},
    {"unbounded min value", "a map value's bounds (an offset the verifier cannot bound)"},
    {"Argument list too long", "a size limit of the kernel (E2BIG)"},
    {"Cannot allocate memory", "kernel memory (ENOMEM: the memory cgroup or the host)"},
    {"failed to create", "map creation (the kernel refused a map's size)"},
    {"failed to mmap", "map creation (the kernel refused a map's size)"},
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    if (nl > pos) out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

// Lines that close every log, failed or not: never the reason.
bool boilerplate(const std::string& line) {
  return line.find("-- END PROG LOAD LOG --") != std::string::npos ||
         line.find("-- BEGIN PROG LOAD LOG --") != std::string::npos ||
         line.rfind("processed ", 0) == 0 || line.find("failed to load") != std::string::npos ||
         line.find("failed to load object") != std::string::npos;
}

}  // namespace

std::string verifier_limit(const std::string& log) {
  const std::vector<std::string> lines = lines_of(log);
  for (const Limit& l : kLimits)
    for (auto it = lines.rbegin(); it != lines.rend(); ++it)
      if (it->find(l.needle) != std::string::npos) return std::string(l.what) + ": " + *it;
  for (auto it = lines.rbegin(); it != lines.rend(); ++it)
    if (!boilerplate(*it)) return "verifier: " + *it;
  return "";
}

}  // namespace qwen3::engine
