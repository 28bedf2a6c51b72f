#include "think_display.h"

#include <unistd.h>

#include <cstdlib>

namespace qwen3::cli {

namespace {

constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";

// The length of the longest suffix of `s` that begins `tag`.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (tag.substr(0, n) == s.substr(s.size() - n)) return n;
  return 0;
}

}  // namespace

ThinkDisplay::Style ThinkDisplay::for_stdout() {
  const char* no_color = std::getenv("NO_COLOR");
  const bool color = isatty(STDOUT_FILENO) == 1 && !(no_color && *no_color);
  return color ? Style::faint : Style::marked;
}

std::string ThinkDisplay::open_marker() const { return style_ == Style::faint ? "\x1b[2m" : "[thinking]\n"; }
std::string ThinkDisplay::close_marker() const { return style_ == Style::faint ? "\x1b[0m\n" : "\n[/thinking]\n"; }

std::string ThinkDisplay::push(std::string_view text) {
  pending_ += text;
  std::string out;
  for (;;) {
    const std::string_view tag = in_think_ ? kClose : kOpen;
    const size_t at = pending_.find(tag);
    if (at == std::string::npos) break;
    out += emit(std::string_view(pending_).substr(0, at));
    if (in_think_ && opened_) out += close_marker();
    in_think_ = !in_think_;
    opened_ = false;
    held_newlines_.clear();
    skip_newlines_ = true;
    pending_.erase(0, at + tag.size());
  }
  const size_t keep = partial_tag(pending_, in_think_ ? kClose : kOpen);
  out += emit(std::string_view(pending_).substr(0, pending_.size() - keep));
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string ThinkDisplay::flush() {
  std::string out = emit(pending_);
  pending_.clear();
  if (in_think_ && opened_) out += close_marker();  // the reply ended inside its thinking
  opened_ = false;
  return out;
}

std::string ThinkDisplay::emit(std::string_view text) {
  if (skip_newlines_) {
    while (!text.empty() && text.front() == '\n') text.remove_prefix(1);
    if (text.empty()) return {};
    skip_newlines_ = false;
  }
  if (!in_think_) {
    answer_ += text;
    return std::string(text);
  }
  // Inside the block: trailing newlines wait, the block's end drops them.
  size_t body = text.size();
  while (body > 0 && text[body - 1] == '\n') --body;
  std::string out;
  if (body > 0) {
    if (!opened_) out += open_marker();
    opened_ = true;
    out += held_newlines_;
    thinking_ += held_newlines_;
    held_newlines_.clear();
    out += text.substr(0, body);
    thinking_ += text.substr(0, body);
  }
  held_newlines_ += text.substr(body);
  return out;
}

}  // namespace qwen3::cli
