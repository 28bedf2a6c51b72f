// Shows a chat reply's thinking apart from its answer, as it streams: the
// <think>...</think> block (plain text tokens in Qwen3, so they arrive as
// text) dimmed on a terminal (ANSI faint) or between "[thinking]" and
// "[/thinking]" lines otherwise, never as the raw tags. An empty think block
// (thinking off) shows nothing.
#pragma once

#include <string>
#include <string_view>

namespace qwen3::cli {

class ThinkDisplay {
 public:
  enum class Style { faint, marked };
  explicit ThinkDisplay(Style style) : style_(style) {}
  // The style for stdout: faint on a terminal unless NO_COLOR is set.
  static Style for_stdout();

  // What to print for the next piece of the reply (a tag split across pieces
  // is held until it is complete).
  std::string push(std::string_view text);
  // What is still held, at the end of the reply.
  std::string flush();

  // The reply split, tags removed: for --json and the transcript.
  const std::string& thinking() const { return thinking_; }
  const std::string& answer() const { return answer_; }

 private:
  std::string emit(std::string_view text);
  std::string open_marker() const;
  std::string close_marker() const;

  Style style_;
  std::string pending_;          // a possible tag prefix
  bool in_think_ = false;
  bool opened_ = false;          // the open marker is out (the block had text)
  bool skip_newlines_ = true;    // after a tag (and at the start): leading newlines
  std::string held_newlines_;    // trailing newlines inside the block, dropped at its end
  std::string thinking_, answer_;
};

}  // namespace qwen3::cli
