// Input lines for `chat`: on a terminal through libedit (line editing, the
// Up/Down history, saved in ~/.qwen3_bpf_history), from a pipe line by line.
// Either way a Ctrl-C at the prompt ends the read at once (a wake-up pipe the
// interrupt watcher writes to), instead of leaving it blocked in read().
#pragma once

#include <optional>
#include <string>

struct editline;
struct history;

namespace qwen3::cli {

class LineReader {
 public:
  explicit LineReader(bool terminal);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // The next line without its newline; nullopt at the end of input or after
  // Ctrl-C (then interrupted() is true).
  std::optional<std::string> read(const std::string& prompt);
  bool interrupted() const { return interrupted_; }

 private:
  // One byte from stdin, or -1 at EOF/error, -2 when woken by Ctrl-C.
  int next_byte();

  bool terminal_;
  bool interrupted_ = false;
  int wake_[2] = {-1, -1};
  editline* el_ = nullptr;
  history* hist_ = nullptr;
  std::string history_file_;
  std::string prompt_;
  char buf_[4096];
  size_t buf_pos_ = 0, buf_len_ = 0;
};

}  // namespace qwen3::cli
