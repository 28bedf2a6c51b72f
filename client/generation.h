// Streaming generation shared by `generate` and `chat`: sampling and stopping
// flags, and one Generate call that prints text as it arrives and can be
// cancelled with Ctrl-C.
#pragma once

#include <string>
#include <vector>

#include "args.h"
#include "daemon_client.h"
#include "think_display.h"

namespace qwen3::cli {

// --max-tokens, --temperature, --greedy, --top-k, --top-p, --min-p, --repetition-penalty,
// --seed, --stop (repeatable), --ignore-eos, --logprobs, --stats.
std::vector<OptionSpec> generation_options();
// Copies those flags into the request (validating ranges: usage errors).
void apply_generation_options(const Args& args, qwen3bpf::v1::GenerateRequest& request);

struct StreamOutcome {
  std::string text;                              // everything streamed
  qwen3bpf::v1::GenerateResponse final_message;  // finish_reason, usage, timings
  bool interrupted = false;                      // Ctrl-C cancelled it
  // Counted here, so a cancelled stream (which gets no final message) still
  // reports them.
  int received_tokens = 0;
  double first_token_ms = 0;  // request sent -> first message (queue + prefill)
  double elapsed_ms = 0;
};

enum class StreamOutput {
  text,        // text deltas to stdout as they arrive
  json_lines,  // one JSON line per stream message
  silent,      // nothing (the caller prints the outcome)
};

// Runs Generate, printing as `output` says (with a wait indicator on a
// terminal until the first text). Throws CliError on failure (but not on a
// Ctrl-C cancel: that is reported in the outcome).
// With `think` (chat replies), text output goes through it: thinking shown
// apart, never as raw tags.
StreamOutcome stream_generate(DaemonClient& client, const qwen3bpf::v1::GenerateRequest& request,
                              StreamOutput output, ThinkDisplay* think = nullptr);

// "length", "eos", "stop_sequence", "cancelled" (the words of --json)
std::string finish_reason_name(qwen3bpf::v1::FinishReason reason);
// "temperature 0.7, top_k 20, top_p 0.9, repetition_penalty 1.1, seed 42", or
// "greedy, repetition_penalty 1.1": what a generation used.
std::string describe_sampling(const qwen3bpf::v1::SamplingParams& p);
// One line: finish reason, usage and timings (for --stats and after Ctrl-C,
// on stderr). After Ctrl-C the counts are the ones received before it.
std::string describe_outcome(const StreamOutcome& outcome);

}  // namespace qwen3::cli
