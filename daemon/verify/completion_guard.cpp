#include "verify/completion_guard.h"

#include <algorithm>
#include <cctype>

namespace qwen3::verify {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool has_word(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)); });
}

bool is_fence(const std::string& trimmed) { return trimmed.rfind("```", 0) == 0; }

constexpr size_t kMaxPeriod = 4;  // blocks of up to this many lines
constexpr int kCopies = 3;        // ... repeated this many times in a row stop the text

}  // namespace

const char* to_string(GuardStop s) {
  switch (s) {
    case GuardStop::none: return "none";
    case GuardStop::fence_closed: return "fence_closed";
    case GuardStop::repeated_lines: return "repeated_lines";
  }
  return "none";
}

bool CompletionGuard::feed(const std::string& piece) {
  if (stop_ != GuardStop::none) return true;
  for (char c : piece) {
    if (c != '\n') {
      pending_ += c;
      continue;
    }
    const size_t start = kept_.size();
    kept_ += pending_;
    kept_ += '\n';
    std::string line;
    line.swap(pending_);
    on_line(line, start);
    if (stop_ != GuardStop::none) return true;
  }
  return false;
}

void CompletionGuard::finish() {
  if (stop_ != GuardStop::none || pending_.empty()) return;
  const size_t start = kept_.size();
  kept_ += pending_;
  std::string line;
  line.swap(pending_);
  on_line(line, start);
}

// Whether the newest kCopies * period lines are one block of `period` lines, repeated.
bool CompletionGuard::repeats_block(size_t period) const {
  const size_t n = lines_.size();
  if (n < period * kCopies) return false;
  bool words = false;
  for (size_t i = 0; i < period; ++i) {
    const std::string& first = lines_[n - period + i];
    words |= has_word(first);
    for (int copy = 1; copy < kCopies; ++copy)
      if (lines_[n - period * (copy + 1) + i] != first) return false;
  }
  // "}" three times in a row closes nested blocks; only lines with words count.
  return words;
}

void CompletionGuard::on_line(const std::string& raw, size_t line_start) {
  const std::string line = trim(raw);
  if (line.empty()) return;
  if (is_fence(line)) {
    if (in_fence_) {
      in_fence_ = false;
      ++fences_closed_;
      // The first code block is the answer: nothing after it is used.
      stop_ = GuardStop::fence_closed;
      note_ = "stopped at the fence that closes the code block";
      return;
    }
    in_fence_ = true;
  }
  lines_.push_back(line);
  line_starts_.push_back(line_start);
  if (line.rfind("#include", 0) == 0 && std::count(lines_.begin(), lines_.end(), line) >= kCopies) {
    // Keep the text before the repeat's second copy.
    size_t seen = 0;
    for (size_t i = 0; i < lines_.size(); ++i)
      if (lines_[i] == line && ++seen == 2) {
        kept_.resize(line_starts_[i]);
        break;
      }
    stop_ = GuardStop::repeated_lines;
    note_ = "stopped: the line '" + line + "' repeats";
    return;
  }
  for (size_t period = 1; period <= kMaxPeriod; ++period) {
    if (!repeats_block(period)) continue;
    // Keep one copy of the block: cut where the second copy starts.
    const size_t second = lines_.size() - period * (kCopies - 1);
    kept_.resize(line_starts_[second]);
    stop_ = GuardStop::repeated_lines;
    note_ = period == 1 ? "stopped: the line '" + line + "' repeats"
                        : "stopped: a block of " + std::to_string(period) + " lines repeats";
    return;
  }
}

std::string tidy_completion(const std::string& completion, std::string* note) {
  CompletionGuard g;
  g.feed(completion);
  g.finish();
  if (note) *note = g.note();
  return g.text();
}

}  // namespace qwen3::verify
