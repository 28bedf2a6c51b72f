// Pieces of the generate-verify-repair loop (generate_verified in pipeline.h;
// the CLI's xdp-gen runs the same loop over the daemon's RPCs): prompts,
// repair messages, and the C source in a completion. No libbpf: the CLI links it.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "verify/verify_result.h"

namespace qwen3::verify {

// The repetition penalty xdp-gen asks for unless told otherwise: enough to
// break a loop of one include line, mild enough for code's own repetition.
constexpr float kCodeRepetitionPenalty = 1.1f;

// The system prompt that tells the model what to answer with.
const std::string& xdp_system_prompt();

// The first user message: the task plus the fixtures the program must satisfy.
std::string task_message(const std::string& task, const std::vector<Fixture>& fixtures);

// The repair request: the short diagnostic of a failed attempt (its
// short_diagnostic, under 1,200 characters) and what to answer with.
std::string repair_message(const VerifyResult& result);
std::string repair_message(const std::string& short_diagnostic);

// The repair request after an answer without C source: what the answer must
// look like, with the skeleton of an XDP program to start from.
std::string no_source_repair_message();

// The result of an attempt whose answer held no C source: decision fail at
// stage `answer`, with its own diagnosis and short diagnostic.
VerifyResult no_source_result(const std::string& guard_note);

// The C source in a completion: the first ```c (or ```C/```cpp/untagged) fenced
// block, else the whole text if it looks like C (an #include or SEC(...) and a
// brace). Qwen3 <think>...</think> sections are skipped. "" if none.
std::string extract_c_source(const std::string& completion);

}  // namespace qwen3::verify
