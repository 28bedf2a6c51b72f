#include "verify/repair_text.h"

#include <algorithm>
#include <cctype>
#include <regex>
#include <set>
#include <sstream>

namespace qwen3::verify {
namespace {

bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string indent_unit(const std::string& indentation) {
  return !indentation.empty() && indentation[0] == ' ' ? "    " : "\t";
}

// "a\n\tb" -> lines "IND a", "IND+1 b".
std::vector<std::string> statement_lines(const std::string& statement, const std::string& indentation) {
  std::vector<std::string> out;
  std::stringstream ss(statement);
  std::string l;
  while (std::getline(ss, l)) {
    std::string ind = indentation;
    size_t tabs = 0;
    while (tabs < l.size() && l[tabs] == '\t') {
      ind += indent_unit(indentation);
      ++tabs;
    }
    out.push_back(ind + l.substr(tabs));
  }
  return out;
}

}  // namespace

size_t find_word(const std::string& text, const std::string& word, size_t from) {
  if (word.empty()) return std::string::npos;
  for (size_t at = text.find(word, from); at != std::string::npos; at = text.find(word, at + 1)) {
    const bool left = at == 0 || !ident_char(text[at - 1]);
    const bool right = at + word.size() >= text.size() || !ident_char(text[at + word.size()]);
    if (left && right) return at;
  }
  return std::string::npos;
}

Source::Source(const std::string& text) {
  std::stringstream ss(text);
  std::string l;
  while (std::getline(ss, l)) lines_.push_back(l);
  final_newline_ = text.empty() || text.back() == '\n';
}

std::string Source::join(const std::vector<std::string>& lines) const {
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    out += lines[i];
    if (i + 1 < lines.size() || final_newline_) out += '\n';
  }
  return out;
}

std::string Source::line(int n) const { return n >= 1 && n <= size() ? lines_[n - 1] : ""; }

std::string Source::indentation(int n) const {
  const std::string l = line(n);
  return l.substr(0, l.find_first_not_of(" \t") == std::string::npos ? 0 : l.find_first_not_of(" \t"));
}

std::string Source::insert_before(int n, const std::string& statement) const {
  std::vector<std::string> out = lines_;
  const auto add = statement_lines(statement, indentation(n));
  out.insert(out.begin() + std::clamp(n - 1, 0, size()), add.begin(), add.end());
  return join(out);
}

std::string Source::insert_after(int n, const std::string& statement, int indent_like) const {
  std::vector<std::string> out = lines_;
  const auto add = statement_lines(statement, indentation(indent_like > 0 ? indent_like : n));
  out.insert(out.begin() + std::clamp(n, 0, size()), add.begin(), add.end());
  return join(out);
}

std::string Source::replace_line(int n, const std::string& text) const {
  std::vector<std::string> out = lines_;
  if (n >= 1 && n <= size()) out[n - 1] = text;
  return join(out);
}

std::optional<std::string> Source::replace_word(int n, int column, const std::string& from, const std::string& to) const {
  std::string l = line(n);
  size_t at = find_word(l, from, column > 0 ? static_cast<size_t>(column - 1) : 0);
  if (at == std::string::npos) at = find_word(l, from);
  if (at == std::string::npos) return std::nullopt;
  return replace_line(n, l.replace(at, from.size(), to));
}

std::optional<std::string> Source::insert_text(int n, int column, const std::string& text) const {
  std::string l = line(n);
  if (n < 1 || n > size() || column < 1 || static_cast<size_t>(column - 1) > l.size()) return std::nullopt;
  return replace_line(n, l.insert(column - 1, text));
}

bool Source::includes(const std::string& header) const {
  for (const auto& l : lines_)
    if (l.find("#include") != std::string::npos && l.find(header) != std::string::npos) return true;
  return false;
}

int Source::include_line() const {
  int last = 0;
  for (int i = 1; i <= size(); ++i)
    if (line(i).rfind("#include", 0) == 0) last = i;
  return last;
}

std::string Source::add_include(const std::string& header) const {
  std::vector<std::string> out = lines_;
  out.insert(out.begin() + include_line(), "#include <" + header + ">");
  return join(out);
}

std::string Source::ctx_name() const {
  static const std::regex param(R"(struct\s+xdp_md\s*\*\s*(\w+))");
  for (const auto& l : lines_) {
    std::smatch m;
    if (std::regex_search(l, m, param)) return m[1];
  }
  return "ctx";
}

std::string Source::data_var(int before) const {
  static const std::regex data(R"((\w+)\s*=\s*\(\s*void\s*\*\s*\)\s*\(\s*long\s*\)\s*\w+\s*->\s*data\s*;)");
  std::string name;
  for (int i = 1; i < before && i <= size(); ++i) {
    std::smatch m;
    const std::string l = line(i);
    if (std::regex_search(l, m, data)) name = m[1];
  }
  return name;
}

std::string Source::data_end_expr(int before) const {
  static const std::regex end(R"((\w+)\s*=\s*\(\s*void\s*\*\s*\)\s*\(\s*long\s*\)\s*\w+\s*->\s*data_end\s*;)");
  for (int i = 1; i < before && i <= size(); ++i) {
    std::smatch m;
    const std::string l = line(i);
    if (std::regex_search(l, m, end)) return m[1];
  }
  return "(void *)(long)" + ctx_name() + "->data_end";
}

std::string Source::action_near(int n) const {
  static const std::regex ret(R"(return\s+(XDP_\w+))");
  for (int i = n; n > 0 && i <= n + 3 && i <= size(); ++i) {
    std::smatch m;
    const std::string l = line(i);
    if (std::regex_search(l, m, ret)) return m[1];
  }
  return "";
}

std::vector<std::pair<int, std::string>> Source::lookups_before(int n) const {
  static const std::regex lookup(
      R"((\w+)\s*=\s*(?:\([^)]*\)\s*)?(?:bpf_map_lookup_elem|bpf_map_lookup_percpu_elem|bpf_dynptr_slice|bpf_dynptr_slice_rdwr|bpf_dynptr_data|bpf_ringbuf_reserve)\s*\()");
  std::vector<std::pair<int, std::string>> out;
  for (int i = n; i >= 1; --i) {
    std::smatch m;
    const std::string l = line(i);
    if (std::regex_search(l, m, lookup)) out.push_back({i, m[1]});
  }
  return out;
}

bool Source::mentions(int n, const std::string& word) const { return find_word(line(n), word) != std::string::npos; }

std::vector<std::string> Source::identifiers(int n) const {
  static const std::regex word(R"([A-Za-z_]\w*)");
  std::vector<std::string> out;
  std::set<std::string> seen;
  const std::string l = line(n);
  for (auto it = std::sregex_iterator(l.begin(), l.end(), word); it != std::sregex_iterator(); ++it)
    if (seen.insert(it->str()).second) out.push_back(it->str());
  return out;
}

int Source::statement_end(int n) const {
  for (int i = n; i <= size() && i < n + 8; ++i)
    if (line(i).find(';') != std::string::npos) return i;
  return n;
}

Declaration Source::declaration_of(const std::string& name, int before) const {
  // "struct flow_key key;", "__u32 x, y;" (one declarator: the name before ';'/'['/'=' or ',').
  const std::regex decl(R"(^\s*(?:const\s+|volatile\s+)*((?:struct|union)\s+\w+|(?:unsigned\s+|signed\s+)?\w+)\s+\**\s*)" +
                        name + R"(\s*(\[[^\]]*\])?\s*(=)?[^;]*;)");
  for (int i = before; i >= 1; --i) {
    std::smatch m;
    const std::string l = line(i);
    if (!std::regex_search(l, m, decl)) continue;
    const std::string type = m[1];
    if (type == "return" || type == "goto") continue;
    Declaration d;
    d.line = i;
    d.name = name;
    d.initialised = m[3].matched;
    d.aggregate = m[2].matched || type.rfind("struct", 0) == 0 || type.rfind("union", 0) == 0;
    return d;
  }
  return {};
}

std::optional<std::string> Source::initialise(const Declaration& d, const std::string& init) const {
  std::string l = line(d.line);
  size_t at = find_word(l, d.name);
  if (at == std::string::npos) return std::nullopt;
  size_t after = at + d.name.size();
  if (after < l.size() && l.find('[', after) != std::string::npos && l.find('[', after) < l.find(';', after))
    after = l.find(']', after) + 1;
  return replace_line(d.line, l.insert(after, init));
}

std::string Source::array_size(const std::string& array, int before) const {
  const std::regex decl(R"(\w\s+)" + array + R"(\s*\[\s*(\w+)\s*\]\s*[;=])");
  for (int i = before - 1; i >= 1; --i) {
    std::smatch m;
    const std::string l = line(i);
    if (std::regex_search(l, m, decl)) return m[1];
  }
  return "";
}

}  // namespace qwen3::verify

namespace qwen3::verify {

std::string Source::remove_lines(int from, int to) const {
  std::vector<std::string> out = lines_;
  from = std::clamp(from, 1, size() + 1);
  to = std::clamp(to, from - 1, size());
  out.erase(out.begin() + (from - 1), out.begin() + to);
  return join(out);
}

int Source::block_end(int n) const {
  int braces = 0, parens = 0;
  bool opened = false;
  for (int i = n; i <= size() && i < n + 200; ++i) {
    for (char c : line(i)) {
      if (c == '(') parens++;
      if (c == ')') parens--;
      if (c == '{') braces++, opened = true;
      if (c == '}' && --braces <= 0 && opened) return i;
      if (c == ';' && !opened && parens == 0) return i;
    }
  }
  return n;
}

int Source::xdp_function_line() const {
  for (int i = 1; i <= size(); ++i)
    if (line(i).find("SEC(\"xdp") != std::string::npos) return i;
  return 0;
}

int Source::map_type_line(const std::string& map) const {
  const std::regex end(R"(^\s*\}\s*)" + map + R"(\s+SEC\s*\(\s*"\.maps"\s*\))");
  for (int i = 1; i <= size(); ++i) {
    if (!std::regex_search(line(i), end)) continue;
    for (int j = i - 1; j >= 1 && j > i - 12; --j) {
      if (line(j).find("__uint(type") != std::string::npos || line(j).find("__uint (type") != std::string::npos) return j;
      if (line(j).find("struct {") != std::string::npos) break;
    }
  }
  return 0;
}

std::string Source::map_key_type(const std::string& map) const {
  const int at = map_type_line(map);
  static const std::regex key(R"(__type\s*\(\s*key\s*,\s*([^)]+?)\s*\))");
  for (int j = at; at > 0 && j <= size() && j < at + 12; ++j) {
    std::smatch m;
    const std::string l = line(j);
    if (std::regex_search(l, m, key)) return m[1];
    if (l.find(".maps") != std::string::npos) break;
  }
  return "";
}

std::string discard_live_reservations(const Source& src, int before, const std::string& except) {
  static const std::regex reserve(R"((\w+)\s*=\s*(?:\([^)]*\)\s*)?bpf_ringbuf_reserve\s*\()");
  static const std::regex exit(R"(^\s*(?:\}\s*)?return\b)");
  std::string out;
  for (int i = 1; i < before; ++i) {
    std::smatch m;
    const std::string l = src.line(i);
    if (!std::regex_search(l, m, reserve) || m[1] == except) continue;
    bool released = false;
    for (int j = i + 1; j < before && !released; ++j) {
      const std::string u = src.line(j);
      const bool release = (u.find("bpf_ringbuf_submit") != std::string::npos ||
                            u.find("bpf_ringbuf_discard") != std::string::npos) && find_word(u, m[1]) != std::string::npos;
      released = release && !std::regex_search(src.line(j + 1), exit) && u.find("return") == std::string::npos;
    }
    if (!released) out += "bpf_ringbuf_discard(" + m[1].str() + ", 0); ";
  }
  return out;
}

std::string early_return(const std::string& cond, const std::string& discards, const std::string& act) {
  if (discards.empty()) return "if (" + cond + ")\n\treturn " + act + ";";
  return "if (" + cond + ") {\n\t" + discards + "\n\treturn " + act + ";\n}";
}

std::vector<std::string> call_arguments(const std::string& line, const std::string& function) {
  const size_t at = find_word(line, function);
  if (at == std::string::npos) return {};
  size_t open = line.find('(', at + function.size());
  if (open == std::string::npos || line.find_first_not_of(" \t", at + function.size()) != open) return {};
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (size_t i = open + 1; i < line.size(); ++i) {
    const char c = line[i];
    if (depth == 0 && (c == ',' || c == ')')) {
      const size_t b = cur.find_first_not_of(" \t"), e = cur.find_last_not_of(" \t");
      out.push_back(b == std::string::npos ? "" : cur.substr(b, e - b + 1));
      cur.clear();
      if (c == ')') return out;
      continue;
    }
    depth += c == '(' ? 1 : c == ')' ? -1 : 0;
    cur += c;
  }
  return {};  // the call continues on the next line
}

}  // namespace qwen3::verify
