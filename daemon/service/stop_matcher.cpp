#include "service/stop_matcher.h"

#include <algorithm>

namespace qwen3 {

StopMatcher::StopMatcher(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

StopMatcher::Step StopMatcher::push(const std::string& text) {
  Step step;
  held_ += text;
  if (stops_.empty()) {
    step.release.swap(held_);
    return step;
  }
  // The earliest full match wins.
  size_t best = std::string::npos;
  for (const auto& s : stops_) {
    const size_t at = held_.find(s);
    if (at != std::string::npos && (best == std::string::npos || at < best)) {
      best = at;
      step.matched = s;
    }
  }
  if (best != std::string::npos) {
    step.release = held_.substr(0, best);
    step.stopped = true;
    held_.clear();
    return step;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t keep_from = held_.size();
  for (const auto& s : stops_) {
    const size_t longest = std::min(held_.size(), s.size() - 1);
    for (size_t len = longest; len > 0; --len) {
      if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
        keep_from = std::min(keep_from, held_.size() - len);
        break;
      }
    }
  }
  step.release = held_.substr(0, keep_from);
  held_.erase(0, keep_from);
  return step;
}

std::string StopMatcher::flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace qwen3
