#include "error_output.h"

#include <cstdio>
#include "json_output.h"

namespace qwen3::cli {

int ErrorOutput::report(const std::string& command, const CliError& e) const {
  if (json_) {
    nlohmann::json j = {{"code", e.code()}, {"exit_code", e.exit_code()}, {"message", e.what()}};
    if (!command.empty()) j["command"] = command;
    std::fprintf(stderr, "%s\n", dump_json(j).c_str());
  } else {
    std::fprintf(stderr, "qwen3-bpf%s%s: %s\n", command.empty() ? "" : " ", command.c_str(), e.what());
  }
  return e.exit_code();
}

}  // namespace qwen3::cli
