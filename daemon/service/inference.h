// Forward and generate on a loaded runtime, independent of gRPC (the service
// and `qwen3-bpfd --check` both use it): session continuation, ephemeral KV,
// sampling, streaming text with stop strings, cancellation.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "sampling/sampler.h"
#include "service/model_host.h"

namespace qwen3 {

// Throws invalid_argument naming the first id that is out of range.
void validate_token_ids(std::span<const int32_t> ids, int vocab_size, const std::string& field);

struct ScoredToken {
  int32_t id = 0;
  float logit = 0;
  float logprob = 0;
};

struct ForwardOptions {
  std::vector<int32_t> tokens;
  std::string session_id;
  bool append = false;
  uint32_t caller_uid = 0;         // whose sessions the request may use (0: root, any)
  int top_k = 10;
  bool all_positions = false;
  bool full_logits = false;
  std::function<bool()> cancelled;
};

struct ForwardOutcome {
  std::vector<ScoredToken> top;
  std::vector<int32_t> position_argmax;
  std::vector<float> logits;
  int prompt_tokens = 0;
  int cached_tokens = 0;
  int session_positions = 0;
  double forward_ms = 0;
  std::vector<int32_t> input_ids;
};

ForwardOutcome run_forward(Runtime& rt, const ForwardOptions& options);

struct GenerateOptions {
  std::vector<int32_t> tokens;
  std::string session_id;
  bool append = false;
  uint32_t caller_uid = 0;         // whose sessions the request may use (0: root, any)
  SamplingParams sampling;
  bool random_seed = false;        // choose a seed (sampling.seed is then ignored)
  int max_new_tokens = 256;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int logprobs = 0;
  std::function<bool()> cancelled;
};

struct GeneratedToken {
  int32_t id = 0;
  int index = 0;
  std::string text;                 // released text (may be empty)
  bool has_logprobs = false;
  float logprob = 0;
  std::vector<ScoredToken> top;
};

enum class FinishReason { length, eos, stop_sequence, cancelled };
const char* to_string(FinishReason r);

struct GenerateOutcome {
  FinishReason finish = FinishReason::length;
  std::string final_text;           // text released at the end (held back until then)
  std::string matched_stop;
  int prompt_tokens = 0;
  int cached_tokens = 0;
  int completion_tokens = 0;
  double queue_ms = 0, prefill_ms = 0, decode_ms = 0;
  uint64_t seed = 0;
  std::string text;                 // everything released, for callers that want it whole
};

// `emit` is called for every token as it is produced; returning false means the
// receiver is gone (finish = cancelled).
GenerateOutcome run_generate(Runtime& rt, const GenerateOptions& options,
                             const std::function<bool(const GeneratedToken&)>& emit);

}  // namespace qwen3
