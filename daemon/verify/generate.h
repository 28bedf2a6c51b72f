// Pieces of the generate-verify-repair loop (generate_verified in pipeline.h),
// exposed for tests and for the service's logging.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "verify/verify_result.h"

namespace qwen3::verify {

// The system prompt that tells the model what to answer with.
const std::string& xdp_system_prompt();

// The first user message: the task plus the fixtures the program must satisfy.
std::string task_message(const std::string& task, const std::vector<Fixture>& fixtures);

// The repair request: the structured diagnostic of a failed attempt.
std::string repair_message(const VerifyResult& result);

// The C source in a completion: the first ```c (or ```C/```cpp/untagged) fenced
// block, else the whole text if it looks like C (an #include or SEC(...) and a
// brace). Qwen3 <think>...</think> sections are skipped. "" if none.
std::string extract_c_source(const std::string& completion);

}  // namespace qwen3::verify
