// generate_verified (pipeline.h): the generate-verify-repair loop in the daemon.
#include "common/error.h"
#include "verify/completion_guard.h"
#include "verify/generate.h"
#include "verify/pipeline.h"
#include "verify/repair.h"

namespace qwen3::verify {

std::vector<Attempt> generate_verified(const std::string& task, const std::vector<Fixture>& fixtures, int attempts,
                                       const GenerateFn& generate, const Pipeline& pipeline, bool repair_engine) {
  if (attempts < 1 || attempts > 10)
    throw invalid_argument("attempts must be between 1 and 10 (got " + std::to_string(attempts) + ")");
  if (task.empty()) throw invalid_argument("the task description is empty");
  if (!generate) throw invalid_argument("no model to generate with");
  std::vector<ChatMessage> messages = {{"system", xdp_system_prompt()}, {"user", task_message(task, fixtures)}};
  std::vector<Attempt> out;
  for (int i = 0; i < attempts; ++i) {
    Attempt a;
    a.messages = messages;
    a.completion = tidy_completion(generate(messages), &a.guard_note);
    a.source = extract_c_source(a.completion);
    if (a.source.empty()) {
      a.result = no_source_result(a.guard_note);
    } else {
      const VerifyRequest request{a.source, fixtures, {}};
      a.result = pipeline.verify(request);
      if (a.result.decision == Decision::pass) a.fixed_by = "model";
      else if (a.result.decision == Decision::fail && repair_engine) a.repair = repair_program(pipeline, request, a.result);
      if (a.repair.fixed) a.fixed_by = "engine";
    }
    const bool solved = !a.fixed_by.empty();
    // An error is not the model's fault (infrastructure, unusable fixtures): retrying cannot help.
    const bool done = solved || a.result.decision == Decision::error;
    messages.push_back({"assistant", a.completion});
    messages.push_back({"user", repair_message(a.result)});
    out.push_back(std::move(a));
    if (done) break;
  }
  return out;
}

}  // namespace qwen3::verify
