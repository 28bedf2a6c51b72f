// qwen3-bpfd-config-docs: makes conf/qwen3-bpfd.conf and the key tables of
// docs/daemon.md and docs/http-api.md from the key table (daemon/service/config_keys.cpp), or checks
// that they match it.
//   qwen3-bpfd-config-docs --write SOURCE_DIR   (ninja -C build config-docs)
//   qwen3-bpfd-config-docs --check SOURCE_DIR   (ctest -R config_docs_match_table)
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "service/config_docs.h"

namespace {

// A generated table sits between `<!-- config-keys:begin SECTION -->` (SECTION:
// the start of a section title, e.g. "HTTP API"; none for every key) and
// `<!-- config-keys:end -->`.
constexpr const char* kBegin = "<!-- config-keys:begin";
constexpr const char* kEnd = "<!-- config-keys:end -->\n";

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

// `doc` with every marked table made anew; "" if it has no marks or an unclosed one.
std::string with_key_tables(const std::string& doc) {
  std::string out;
  size_t at = 0;
  for (;;) {
    const auto begin = doc.find(kBegin, at);
    if (begin == std::string::npos) break;
    const auto close = doc.find("-->\n", begin);
    const auto end = close == std::string::npos ? close : doc.find(kEnd, close);
    if (end == std::string::npos) return "";
    std::string section = doc.substr(begin + std::string(kBegin).size(), close - begin - std::string(kBegin).size());
    while (!section.empty() && section.front() == ' ') section.erase(0, 1);
    while (!section.empty() && section.back() == ' ') section.pop_back();
    out += doc.substr(at, close + 4 - at) + qwen3::config_keys_markdown(section);
    at = end;
  }
  return at == 0 ? "" : out + doc.substr(at);
}

// The first line where `a` and `b` differ, 1-based.
int first_difference(const std::string& a, const std::string& b) {
  std::istringstream x(a), y(b);
  std::string lx, ly;
  for (int line = 1;; ++line) {
    const bool gx = static_cast<bool>(std::getline(x, lx)), gy = static_cast<bool>(std::getline(y, ly));
    if (!gx && !gy) return 0;
    if (gx != gy || lx != ly) return line;
  }
}

// Writes or checks one file; returns false on a mismatch or an I/O error.
bool handle(const std::string& path, const std::string& wanted, bool write) {
  std::string have;
  if (!read_file(path, have)) {
    std::fprintf(stderr, "config-docs: cannot read %s\n", path.c_str());
    return false;
  }
  if (have == wanted) return true;
  if (write) {
    std::ofstream(path) << wanted;
    std::printf("config-docs: wrote %s\n", path.c_str());
    return true;
  }
  std::fprintf(stderr, "config-docs: %s does not match the key table (daemon/service/config_keys.cpp) from line %d; "
               "run `ninja -C build config-docs` and commit the result\n", path.c_str(), first_difference(have, wanted));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc == 3 ? argv[1] : "";
  if (mode != "--write" && mode != "--check") {
    std::fprintf(stderr, "usage: qwen3-bpfd-config-docs --write|--check SOURCE_DIR\n");
    return 2;
  }
  const std::string root = argv[2];
  const bool write = mode == "--write";
  bool ok = handle(root + "/conf/qwen3-bpfd.conf", qwen3::config_file_text(), write);
  for (const char* doc_name : {"/docs/daemon.md", "/docs/http-api.md"}) {
    const std::string doc_path = root + doc_name;
    std::string doc;
    if (!read_file(doc_path, doc)) {
      std::fprintf(stderr, "config-docs: cannot read %s\n", doc_path.c_str());
      return 1;
    }
    const std::string wanted = with_key_tables(doc);
    if (wanted.empty()) {
      std::fprintf(stderr, "config-docs: %s lacks a closed config-keys:begin/end pair\n", doc_path.c_str());
      return 1;
    }
    ok = handle(doc_path, wanted, write) && ok;
  }
  return ok ? 0 : 1;
}
