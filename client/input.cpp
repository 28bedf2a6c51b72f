#include "input.h"

#include <unistd.h>

#include <iostream>
#include <iterator>

#include "cli_error.h"

namespace qwen3::cli {

std::string read_all_stdin() {
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

std::string text_from_args_or_stdin(const std::vector<std::string>& words, const std::string& what) {
  if (words.size() == 1 && words[0] == "-") return read_all_stdin();
  if (words.empty()) {
    if (isatty(STDIN_FILENO)) throw usage_error("give the " + what + " as arguments, or pipe it on stdin");
    return read_all_stdin();
  }
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

}  // namespace qwen3::cli
