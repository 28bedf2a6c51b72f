// The inference core's calls besides forward and generate: the tokenizer,
// the session table, the runtime's facts for status, and XDP verification.
// The transports reach the loaded runtime only through these.
#include <algorithm>
#include <chrono>

#include "common/error.h"
#include "service/elapsed.h"
#include "service/inference.h"

#include "engine/kernel_door.h"
#include "sessions/session.h"
#include "verify/generate.h"

namespace qwen3 {

namespace {

using Steady = std::chrono::steady_clock;

}  // namespace

const Tokenizer& InferenceCore::tokenizer() { return *runtime_for_work().tokenizer; }

int InferenceCore::vocab_size() { return runtime_for_work().backend->config().vocab_size; }

std::optional<RuntimeFacts> InferenceCore::runtime_facts() const {
  Runtime* rt = host_.runtime_if_ready();
  if (!rt) return std::nullopt;
  RuntimeFacts f;
  f.model = rt->backend->config();
  f.parameter_bytes = rt->model->tensor_bytes();
  f.backend = rt->backend->info();
  f.threads = rt->threads;
  f.totals = rt->sessions->totals();
  f.limits = rt->sessions->limits();
  return f;
}

std::vector<int32_t> InferenceCore::tokenize(const std::string& text, bool split_special, std::vector<std::string>* pieces) {
  Runtime& rt = host_.runtime();
  std::vector<int32_t> ids = encode_text(*rt.tokenizer, text, "text", !split_special);
  if (pieces)
    for (int32_t id : ids) pieces->push_back(rt.tokenizer->piece(id));
  return ids;
}

std::string InferenceCore::detokenize(std::vector<int32_t> ids, bool skip_special) {
  Runtime& rt = host_.runtime();
  validate_token_ids(ids, std::max(rt.tokenizer->vocab_size(), rt.backend->config().vocab_size), "ids");
  std::erase_if(ids, [&](int32_t id) { return id >= rt.tokenizer->vocab_size(); });
  return rt.tokenizer->decode(ids, skip_special);
}

SessionSnapshot InferenceCore::create_session(int max_context, const std::string& id, uint32_t caller_uid) {
  Runtime& rt = runtime_for_work();
  if (max_context < 0) throw invalid_argument("max_context must be >= 0 (0 = default)");
  return rt.sessions->create(max_context, id, caller_uid);
}

SessionSnapshot InferenceCore::session(const std::string& id, uint32_t caller_uid) {
  return host_.runtime().sessions->get(id, caller_uid);
}

std::vector<SessionSnapshot> InferenceCore::sessions(uint32_t caller_uid) {
  Runtime& rt = host_.runtime();
  std::vector<SessionSnapshot> out = rt.sessions->list(caller_uid);
  // The kernel path's sessions (engine/kernel_door.h): their KV and positions live in the kernel.
  if (engine::KernelDoor* door = rt.backend->kernel_door(); door && door->enabled())
    for (const engine::KernelSessionInfo& k : door->sessions())
      if (caller_uid == 0 || caller_uid == k.owner_uid)
        out.push_back({k.id, int(k.positions), int(k.positions), int(k.capacity), k.kv_bytes, {}, {}, k.running,
                       k.owner_uid});
  return out;
}

uint64_t InferenceCore::delete_session(const std::string& id, uint32_t caller_uid) {
  return host_.runtime().sessions->remove(id, caller_uid);
}

SessionLimits InferenceCore::session_limits() { return host_.runtime().sessions->limits(); }

std::string InferenceCore::export_session(const ExportRequest& request) {
  return qwen3::export_session(runtime_for_work(), request);
}

ImportOutcome InferenceCore::import_session(std::string_view file, const ImportRequest& request) {
  return qwen3::import_session(runtime_for_work(), file, request);
}

// The whole KV budget and room for the tokens.
size_t InferenceCore::max_import_bytes() { return runtime_for_work().sessions->limits().kv_budget_bytes + (size_t{64} << 20); }

VerifyOutcome InferenceCore::verify_program(const verify::VerifyRequest& request, const std::function<bool()>& cancelled,
                                            bool fix) {
  auto slot = verify_slots_.acquire(std::chrono::seconds(60), cancelled);
  if (request.source.empty()) throw invalid_argument("source is empty: give the C source of one XDP program");
  const auto t0 = Steady::now();
  VerifyOutcome r;
  r.result = pipeline_->verify(request);
  if (fix) r.repair = verify::repair_program(*pipeline_, request, r.result);
  r.elapsed_ms = ms_since(t0);
  return r;
}

XdpTaskOutcome InferenceCore::generate_verified(XdpTaskOptions x) {
  auto slot = verify_slots_.acquire(std::chrono::seconds(60), x.cancelled);
  if (x.task.empty()) throw invalid_argument("task is empty: describe what the XDP program should do");
  require_utf8(x.task, "task");
  const int attempts = x.attempts == 0 ? 2 : x.attempts;
  if (attempts < 1 || attempts > 5) throw invalid_argument("attempts must be in [1, 5] (got " + std::to_string(attempts) + ")");
  Runtime& rt = host_.runtime();
  const auto t0 = Steady::now();
  auto ask = [&](const std::vector<ChatMessage>& messages) {
    GenerateOptions o;
    o.tokens = rt.tokenizer->encode(rt.tokenizer->apply_chat_template(messages, true, false), true);
    o.sampling = x.sampling;
    // Code repeats itself less under a mild penalty (xdp-gen's default too, docs/xdp-verify.md).
    if (!o.sampling.repetition_penalty) o.sampling.repetition_penalty = verify::kCodeRepetitionPenalty;
    const int cap = rt.sessions->limits().max_context - static_cast<int>(o.tokens.size());
    if (cap < 1) throw invalid_argument("the task and diagnostics do not fit the context");
    o.max_new_tokens = std::min(x.max_new_tokens == 0 ? 1024 : x.max_new_tokens, cap);
    o.cancelled = x.cancelled;
    // Through generate() like any generation: the config's `speculative`, the
    // counters and the metrics apply to the attempts too.
    const auto r = this->generate(std::move(o), [](const GeneratedToken&) { return true; });
    if (r.finish == FinishReason::cancelled) throw unavailable("cancelled");
    return r.text;
  };
  XdpTaskOutcome r;
  r.attempts = verify::generate_verified(x.task, x.fixtures, attempts, ask, *pipeline_);
  r.elapsed_ms = ms_since(t0);
  return r;
}

}  // namespace qwen3
