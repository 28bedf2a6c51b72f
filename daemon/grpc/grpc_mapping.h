// Between the qwen3bpf.v1 messages and the inference core: requests to core
// options, core outcomes to responses, qwen3::Error kinds to status codes.
#pragma once

#include <grpcpp/support/status.h>

#include "common/error.h"
#include "qwen3bpf/v1/qwen3bpf.pb.h"
#include "service/inference.h"

namespace qwen3 {

grpc::StatusCode code_of(ErrorKind kind);
// Milliseconds since the Unix epoch (the messages' timestamps).
int64_t unix_ms(Clock::time_point t);
// "OK", "INVALID_ARGUMENT", ... (the label of the request metric).
const char* code_name(grpc::StatusCode code);

void fill_session(const SessionSnapshot& s, const SessionLimits& limits, qwen3bpf::v1::SessionInfo* out);
void fill_score(const ScoredToken& t, const Tokenizer& tok, qwen3bpf::v1::TokenScore* out);

// An absent SamplingParams message leaves every field to the model's defaults;
// a present one states the fields its set_fields names, all six when empty
// (temperature 0 = greedy). Unknown names are INVALID_ARGUMENT.
SamplingRequest sampling_of(bool present, const qwen3bpf::v1::SamplingParams& s);
// The parameters a generation used, for the final message.
void fill_sampling(const SamplingParams& p, qwen3bpf::v1::SamplingParams* out);

ForwardOptions forward_options_of(const qwen3bpf::v1::ForwardRequest& req, const Tokenizer& tok);
// `default_max_new_tokens` resolves max_new_tokens 0.
GenerateOptions generate_options_of(const qwen3bpf::v1::GenerateRequest& req, const Tokenizer& tok,
                                    const InferenceCore& core);

void fill_forward(const ForwardOutcome& r, const Tokenizer& tok, qwen3bpf::v1::ForwardResponse* resp);
qwen3bpf::v1::GenerateResponse token_message(const GeneratedToken& t, const Tokenizer& tok);
qwen3bpf::v1::GenerateResponse final_message(const GenerateOutcome& r, const std::string& session_id);

}  // namespace qwen3
