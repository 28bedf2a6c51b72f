// A kernel client's generate request, decoded from a submission record
// (bpf_ops/kclient_abi.h) and checked again in user space: the XDP program
// already validated UDP datagrams, but other BPF programs write the ring too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sampling/defaults.h"

struct qk_submission;

namespace qwen3::kclient {

struct KernelRequest {
  std::string session;
  uint32_t request_id = 0;
  bool append = false;
  bool text = false;              // prompt_text holds UTF-8 to tokenize; else prompt_ids
  std::string prompt_text;
  std::vector<int32_t> prompt_ids;
  int max_tokens = 0;
  SamplingRequest sampling;
  uint32_t origin = 0;            // enum qk_origin
  std::string source;             // "127.0.0.1:40000", "bpf"
};

// Throws qwen3::Error (invalid_argument) saying which field is wrong.
KernelRequest decode_submission(const qk_submission& record, size_t record_bytes);

// The session id of a header (NUL padded), or "" when it is not a valid one.
std::string session_of(const char (&bytes)[32]);

}  // namespace qwen3::kclient
