// Keeps a model's answer to an XDP task fit for extraction, while it streams
// and afterwards: it stops at the fence that closes the first code block, and
// at a runaway repetition (the same line, or the same block of up to four
// lines, three times in a row; an #include line seen a third time). The text
// it keeps ends at the stop: the closing fence kept, the repeats dropped.
// Used by the CLI's xdp-gen while tokens arrive (it cancels the stream) and by
// generate_verified on a finished completion (tidy_completion).
#pragma once

#include <string>
#include <vector>

namespace qwen3::verify {

enum class GuardStop { none, fence_closed, repeated_lines };
const char* to_string(GuardStop s);

class CompletionGuard {
 public:
  // Feeds the next piece of text; true once generation should stop (further
  // pieces are ignored).
  bool feed(const std::string& piece);
  // Ends the text (a last line without a newline is judged too).
  void finish();
  GuardStop stop() const { return stop_; }
  // The text kept: everything fed, cut at the stop.
  const std::string& text() const { return kept_; }
  // What was cut, in words ("stopped at line 12: the line '#include <x>' repeated"), "" if nothing.
  const std::string& note() const { return note_; }

 private:
  void on_line(const std::string& line, size_t line_start);
  bool repeats_block(size_t period) const;
  std::string kept_;
  std::string pending_;              // the current line, not yet ended
  std::vector<std::string> lines_;   // complete non-blank lines (trimmed), newest last
  std::vector<size_t> line_starts_;  // offset in kept_ where each of lines_ begins
  bool in_fence_ = false;
  int fences_closed_ = 0;
  GuardStop stop_ = GuardStop::none;
  std::string note_;
};

// The whole completion through a CompletionGuard: what the guard keeps.
std::string tidy_completion(const std::string& completion, std::string* note = nullptr);

}  // namespace qwen3::verify
