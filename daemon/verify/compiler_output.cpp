// Reading what clang wrote: its diagnostics (scrubbed of sandbox paths,
// crash dumps, addresses and the text of files outside the program) and its
// dependency list (the files it read). Declared in sandbox_compiler.h.
#include <cctype>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "verify/sandbox_compiler.h"

namespace qwen3::verify {

namespace {

// A file whose text may be quoted: the program, a header of the include tree
// (scrubbed to its relative name) or clang's own pseudo files.
bool may_quote(const std::string& file) {
  static const std::regex tree(R"(^([A-Za-z0-9_\-]+/)*[A-Za-z0-9_\-.]+\.h$)");
  if (file == "prog.c" || (file.size() > 2 && file.front() == '<' && file.back() == '>')) return true;
  return file.find("..") == std::string::npos && std::regex_match(file, tree);
}

}  // namespace

std::string scrub_compiler_output(const std::string& raw) {
  std::stringstream in(raw);
  std::string line, out;
  static const std::regex inc_path(R"((^|[\s(:'"`])/inc/)");
  static const std::regex diag(R"(^([^:\s][^:]*):(\d+):(\d+): (fatal error|error|warning|note|remark): )");
  static const std::regex snippet(R"(^\s*(\d+\s*)?\|)");
  // Crash reports: stack frames (symbolised "#0 0x..." or raw "0  libLLVM.so 0x..."),
  // argument dumps and bug-report banners say nothing useful, and frames hold addresses.
  static const std::regex frame(R"(^\s*#?\d+\s+(\S+\s+)?0x[0-9a-fA-F]+)");
  static const std::regex crash_context(R"(^\d+\.\s)");
  static const std::regex address(R"(0x[0-9a-fA-F]{8,})");
  bool withheld = false;  // inside a diagnostic about a file that may not be quoted
  while (std::getline(in, line)) {
    // std::regex recurses per character: keep lines short (clang echoes whole source lines).
    if (line.size() > 1000) line = line.substr(0, 1000) + "...";
    if (std::regex_search(line, frame) || line.rfind("Stack dump", 0) == 0 ||
        line.find("PLEASE submit a bug report") != std::string::npos || std::regex_search(line, crash_context))
      continue;
    size_t p;
    while ((p = line.find("/src/prog.c")) != std::string::npos) line.replace(p, 11, "prog.c");
    line = std::regex_replace(line, inc_path, "$1");
    std::smatch m;
    if (std::regex_search(line, m, diag)) {
      // Files outside the program and the include tree (what a bypass of the
      // policy would reach: libc.so's text, ...) are named, never quoted.
      withheld = !may_quote(m[1]);
      if (withheld)
        line = m[1].str() + ":" + m[2].str() + ":" + m[3].str() + ": " + m[4].str() +
               ": (message withheld: the file is outside the program and the allowed headers)";
    } else if (withheld && (std::regex_search(line, snippet) || line.find_first_not_of(" \t^~") == std::string::npos)) {
      continue;  // its source excerpt and caret lines
    } else if (line.rfind("In file included from", 0) != 0) {
      withheld = false;
    }
    // No addresses outside the program's own lines (crash summaries, pointers in messages).
    if (!(m.size() > 1 && m[1] == "prog.c") && !std::regex_search(line, snippet))
      line = std::regex_replace(line, address, "0x(address withheld)");
    out += line;
    out += '\n';
  }
  return out;
}

std::vector<std::string> parse_dependency_list(const std::string& text) {
  std::vector<std::string> out;
  // "-: a.c b.h \\\n  c.h": skip the target, then whitespace-separated paths
  // with make's escapes ("\\ " for a space, "$$" for '$').
  size_t i = text.find(": ");
  if (i == std::string::npos) return out;
  i += 2;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty()) out.push_back(cur);
    cur.clear();
  };
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\\' && i + 1 < text.size() && (text[i + 1] == '\n' || text[i + 1] == '\r')) {
      flush();
      ++i;
    } else if (c == '\\' && i + 1 < text.size() && (text[i + 1] == ' ' || text[i + 1] == '#' || text[i + 1] == '\\')) {
      cur.push_back(text[++i]);
    } else if (c == '$' && i + 1 < text.size() && text[i + 1] == '$') {
      cur.push_back('$');
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      flush();
    } else {
      cur.push_back(c);
    }
  }
  flush();
  return out;
}

std::vector<Diagnostic> parse_clang_diagnostics(const std::string& text) {
  std::vector<Diagnostic> out;
  static const std::regex diag(R"(^([^:\s][^:]*):(\d+):(\d+): (fatal error|error|warning|note): (.*)$)");
  static const std::regex included(R"(^In file included from prog\.c:(\d+):)");
  std::stringstream in(text);
  std::string line;
  int include_line = 0;
  Diagnostic* last = nullptr;
  while (std::getline(in, line)) {
    if (line.size() > 1200) line = line.substr(0, 1200) + "...";
    std::smatch m;
    if (std::regex_search(line, m, included)) {
      include_line = std::stoi(m[1]);
      last = nullptr;
      continue;
    }
    if (line.rfind("In file included from", 0) == 0) {
      last = nullptr;
      continue;
    }
    if (std::regex_match(line, m, diag)) {
      if (m[4] == "note" && last) {
        last->text += "\n" + line;
        continue;
      }
      Diagnostic d;
      bool main_file = m[1] == "prog.c";
      d.line = main_file ? std::stoi(m[2]) : include_line;
      d.column = main_file ? std::stoi(m[3]) : 0;
      d.stage_message = line;
      d.text = m[4].str() + ": " + m[5].str();
      if (!main_file) d.text += " (in " + m[1].str() + ":" + m[2].str() + ")";
      if (out.size() < 50) {
        out.push_back(std::move(d));
        last = &out.back();
      } else {
        last = nullptr;
      }
      if (main_file) include_line = 0;
      continue;
    }
    if (line.rfind("clang", 0) == 0 && line.find("error:") != std::string::npos && out.size() < 50) {
      Diagnostic d;
      d.stage_message = line;
      d.text = line;
      out.push_back(std::move(d));
      last = &out.back();
    }
  }
  return out;
}

}  // namespace qwen3::verify
