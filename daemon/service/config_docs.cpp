#include "service/config_docs.h"

#include <sstream>

namespace qwen3 {

namespace {

constexpr size_t kWidth = 79;

// `text` as `# ` comment lines of at most kWidth columns (a longer word stays whole).
std::string comment_lines(const std::string& text) {
  std::istringstream words(text);
  std::string out, line, word;
  while (words >> word) {
    if (!line.empty() && line.size() + 1 + word.size() > kWidth) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "# " : " ") + word;
  }
  if (!line.empty()) out += line + "\n";
  return out;
}

std::string section_heading(const std::string& section) {
  std::string h = "# --- " + section + " ";
  if (h.size() < kWidth) h += std::string(kWidth - h.size(), '-');
  return h + "\n";
}

std::string markdown_cell(const std::string& text) {
  std::string out;
  bool in_code = false;  // inside `...`, where Markdown shows entities as written
  for (char c : text) {
    if (c == '`') in_code = !in_code;
    if (c == '|') out += "\\|";
    else if (!in_code && c == '<') out += "&lt;";
    else if (!in_code && c == '>') out += "&gt;";
    else out += c;
  }
  return out;
}

}  // namespace

const char* on_reload_word(OnReload on_reload) { return on_reload == OnReload::apply ? "reload" : "restart"; }

std::string config_file_text() {
  std::string out =
      "# qwen3-bpfd configuration (/etc/qwen3-bpfd/qwen3-bpfd.conf)\n"
      "#\n"
      "# Format: one `key = value` per line; `#` starts a comment. Every key is\n"
      "# optional: the commented-out lines show the built-in defaults. Command-line\n"
      "# flags (qwen3-bpfd --help) override this file. Mistakes are reported at start\n"
      "# with the file, line and key. `systemctl reload qwen3-bpfd` (SIGHUP) re-reads\n"
      "# the file and applies the keys marked [reload]; a changed key marked [restart]\n"
      "# keeps its running value until `systemctl restart qwen3-bpfd`, and the log and\n"
      "# `qwen3-bpf status` say so.\n"
      "#\n"
      "# Made from the key table, daemon/service/config_keys.cpp, by\n"
      "# `ninja -C build config-docs` (or `qwen3-bpfd --print-config`).\n";
  std::string section;
  for (const auto& k : config_keys()) {
    if (k.section != section) {
      section = k.section;
      out += "\n" + section_heading(section);
    }
    out += comment_lines(k.doc);
    out += comment_lines("Values: " + k.allowed + ". [" + on_reload_word(k.on_reload) + "]");
    out += "#" + k.name + " =" + (k.default_value.empty() ? "" : " " + k.default_value) + "\n";
  }
  return out;
}

std::string config_keys_markdown(const std::string& section) {
  std::string out =
      "| Key | Flag | Values | Default | SIGHUP | |\n"
      "|-----|------|--------|---------|--------|--|\n";
  for (const auto& k : config_keys()) {
    if (k.section.rfind(section, 0) != 0) continue;
    out += "| `" + k.name + "` | " + (k.flag.empty() ? "" : "`" + k.flag + "`") + " | " + markdown_cell(k.allowed) +
           " | " + (k.default_value.empty() ? "(empty)" : "`" + k.default_value + "`") + " | " +
           on_reload_word(k.on_reload) + " | " + markdown_cell(k.doc) + " |\n";
  }
  return out;
}

std::string flag_help(const ConfigKey& k) {
  return k.doc + " [key " + k.name + ": " + k.allowed + "; default " +
         (k.default_value.empty() ? "empty" : k.default_value) + "]";
}

}  // namespace qwen3
