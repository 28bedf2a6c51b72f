// Stop strings in a text stream: text is released only once it is certain not
// to be the start of a stop string; a match ends the stream and neither the
// stop string nor anything after it is released.
#pragma once

#include <string>
#include <vector>

namespace qwen3 {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  struct Step {
    std::string release;  // text that is now safe to send
    bool stopped = false;
    std::string matched;  // the stop string that matched
  };
  // Adds complete UTF-8 text (from the StreamDecoder).
  Step push(const std::string& text);
  // End of stream: releases whatever is held.
  std::string flush();

 private:
  std::vector<std::string> stops_;
  std::string held_;
};

}  // namespace qwen3
