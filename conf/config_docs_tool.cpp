// qwen3-bpfd-config-docs: makes conf/qwen3-bpfd.conf and the key table of
// docs/daemon.md from the key table (daemon/service/config_keys.cpp), or checks
// that they match it.
//   qwen3-bpfd-config-docs --write SOURCE_DIR   (ninja -C build config-docs)
//   qwen3-bpfd-config-docs --check SOURCE_DIR   (ctest -R config_docs_match_table)
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "service/config_docs.h"

namespace {

constexpr const char* kBegin = "<!-- config-keys:begin (made by `ninja -C build config-docs` from daemon/service/config_keys.cpp) -->\n";
constexpr const char* kEnd = "<!-- config-keys:end -->\n";

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream s;
  s << in.rdbuf();
  out = s.str();
  return true;
}

// `doc` with the text between the markers replaced by `body`; "" if a marker is missing.
std::string with_key_table(const std::string& doc, const std::string& body) {
  const auto begin = doc.find(kBegin);
  const auto end = doc.find(kEnd);
  if (begin == std::string::npos || end == std::string::npos || end < begin) return "";
  const auto body_at = begin + std::string(kBegin).size();
  return doc.substr(0, body_at) + body + doc.substr(end);
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
  const std::string doc_path = root + "/docs/daemon.md";
  std::string doc;
  if (!read_file(doc_path, doc)) {
    std::fprintf(stderr, "config-docs: cannot read %s\n", doc_path.c_str());
    return 1;
  }
  const std::string wanted = with_key_table(doc, qwen3::config_keys_markdown());
  if (wanted.empty()) {
    std::fprintf(stderr, "config-docs: %s lacks the config-keys:begin/end markers\n", doc_path.c_str());
    return 1;
  }
  ok = handle(doc_path, wanted, write) && ok;
  return ok ? 0 : 1;
}
