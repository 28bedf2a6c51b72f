// An external OpenAI-compatible chat-completions endpoint as xdp-gen's
// generator (`--generator-url`), for users who run a bigger model elsewhere.
// The CLI makes the request itself, as the user: the daemon never opens an
// outbound connection on a user's request (it only compiles, verifies and
// repairs). Plain HTTP/1.1, non-streaming; the API key comes from the
// environment (QWEN3_GENERATOR_API_KEY), never from the command line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "qwen3bpf/v1/qwen3bpf.pb.h"

namespace qwen3::cli {

inline constexpr const char* kGeneratorKeyEnv = "QWEN3_GENERATOR_API_KEY";

// Where a request goes: http://HOST[:PORT][/PATH]. A path ending in
// /chat/completions is used as given; one ending in /v1 (an OpenAI "base URL")
// gets /chat/completions; any other gets /v1/chat/completions.
struct GeneratorUrl {
  std::string host;
  std::string port = "80";
  std::string target;  // the HTTP request target, e.g. /v1/chat/completions
};
// Usage error (naming the option) for https://, no host or a bad port.
GeneratorUrl parse_generator_url(const std::string& url);

struct ExternalGenerator {
  std::string url;
  std::string model;    // "model" of the request
  std::string api_key;  // "Authorization: Bearer ..." when not empty
  double temperature = 0;
  int max_tokens = 1024;
  std::optional<uint64_t> seed;
  int timeout_s = 600;
};

struct ExternalAnswer {
  std::string content;        // choices[0].message.content
  std::string finish_reason;  // choices[0].finish_reason
  int completion_tokens = 0;  // usage.completion_tokens (0 when not reported)
};

// The request body (OpenAI chat completions, stream false). Only the standard
// fields: other servers reject unknown ones (no repetition penalty).
std::string chat_completion_body(const ExternalGenerator& g, const std::vector<qwen3bpf::v1::ChatMessage>& messages);

// The answer of an HTTP exchange: the content on 200, else a CliError with the
// status and the server's own error message (error.message, or the body).
ExternalAnswer parse_chat_completion(const std::string& url, int status, const std::string& body);

// One non-streaming chat completion. CliError (exit 3) when the endpoint
// cannot be reached or does not answer in timeout_s.
ExternalAnswer chat_completion(const ExternalGenerator& g, const std::vector<qwen3bpf::v1::ChatMessage>& messages);

}  // namespace qwen3::cli
