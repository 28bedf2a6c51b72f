// The program's text as the repair engine edits it: lines (1-based, as the
// diagnostics number them), what the XDP function calls its context and
// packet pointers, declarations and lookups, and edits that return a whole
// new source (the original is never changed).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace qwen3::verify {

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct Declaration {
  int line = 0;            // 0: not found
  std::string name;
  bool initialised = false;
  bool aggregate = false;  // struct, union or array
};

class Source {
 public:
  explicit Source(const std::string& text);
  int size() const { return static_cast<int>(lines_.size()); }
  std::string line(int n) const;  // "" outside the text
  std::string indentation(int n) const;

  // Edits: each returns the whole new source.
  std::string insert_before(int n, const std::string& statement) const;  // "\n\t" in it: the next line, one level deeper
  std::string insert_after(int n, const std::string& statement, int indent_like = 0) const;  // indentation of line indent_like (default n)
  std::string replace_line(int n, const std::string& text) const;
  std::optional<std::string> replace_word(int n, int column, const std::string& from, const std::string& to) const;
  std::optional<std::string> insert_text(int n, int column, const std::string& text) const;
  std::string add_include(const std::string& header) const;
  std::string remove_lines(int from, int to) const;  // lines from..to, both included
  bool includes(const std::string& header) const;
  int include_line() const;  // the line a new #include goes after (0: the top)

  // What the program calls things.
  std::string ctx_name() const;                // the XDP function's parameter ("ctx")
  std::string data_var(int before) const;      // the variable holding ctx->data, "" if none
  std::string data_end_expr(int before) const; // the data_end variable, else (void *)(long)ctx->data_end
  std::string action_near(int n) const;        // the XDP_* returned within 3 lines after line n, "" if none
  std::vector<std::pair<int, std::string>> lookups_before(int n) const;  // (line, variable) = a helper that may return NULL (map lookup, dynptr slice, ringbuf reserve)
  bool mentions(int n, const std::string& word) const;
  std::vector<std::string> identifiers(int n) const;  // the words of line n, in order, once each
  int statement_end(int n) const;  // the line where the statement starting at line n ends (its ';')
  // The last line of the statement starting at line n, with the body of an if/else
  // that starts there: the matching '}' of a '{' block, else the body's ';'.
  int block_end(int n) const;
  int xdp_function_line() const;  // the line of SEC("xdp...") (0: none)
  // The map defined as `} NAME SEC(".maps")`: the line of its __uint(type, ...), 0 if none.
  int map_type_line(const std::string& map) const;
  // The type a map's __type(key, T) names ("" if none).
  std::string map_key_type(const std::string& map) const;
  Declaration declaration_of(const std::string& name, int before) const;
  std::optional<std::string> initialise(const Declaration& d, const std::string& init) const;
  std::string array_size(const std::string& array, int before) const;  // the declared size, "" if unknown

 private:
  std::string join(const std::vector<std::string>& lines) const;
  std::vector<std::string> lines_;
  bool final_newline_ = true;
};

// Ring-buffer reservations made before line `before` (other than `except`) and not
// released in the text before it (a submit or discard that is followed by a return
// belongs to an early exit and does not count): "bpf_ringbuf_discard(r, 0); " each.
std::string discard_live_reservations(const Source& src, int before, const std::string& except = "");
// "if (COND)" + a return that first discards what is still reserved: one statement either way.
std::string early_return(const std::string& cond, const std::string& discards, const std::string& act);
// The arguments of the first call of `function` on `line`, split at top-level commas
// (trimmed); empty if the call is not there.
std::vector<std::string> call_arguments(const std::string& line, const std::string& function);

// Whether `word` occurs in `text` as a whole identifier, at or after `from`; npos if not.
size_t find_word(const std::string& text, const std::string& word, size_t from = 0);

}  // namespace qwen3::verify
