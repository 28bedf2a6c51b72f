// One kernel client's request through the inference core, into its result slot.
#include <spdlog/spdlog.h>

#include "common/error.h"
#include "kclient/broker.h"
#include "kclient_abi.h"
#include "service/inference.h"
#include "sessions/session_manager.h"

namespace qwen3::kclient {

namespace {

uint32_t error_code(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid_argument: return QK_E_INVALID;
    case ErrorKind::not_found: return QK_E_NOT_FOUND;
    case ErrorKind::resource_exhausted: return QK_E_LIMIT;
    case ErrorKind::failed_precondition: return QK_E_SESSION_BUSY;
    case ErrorKind::unavailable: return QK_E_UNAVAILABLE;
    default: return QK_E_INTERNAL;
  }
}

uint32_t finish_code(FinishReason r) {
  switch (r) {
    case FinishReason::length: return QK_FINISH_LENGTH;
    case FinishReason::eos: return QK_FINISH_EOS;
    case FinishReason::stop_sequence: return QK_FINISH_STOP;
    default: return QK_FINISH_CANCELLED;
  }
}

// A session named by a kernel client that does not exist is created, owned by
// `uid`, within the usual budgets. One of another owner stays invisible: the
// generation's acquire reports not_found.
void ensure_session(InferenceCore& core, const std::string& id, uint32_t uid) {
  try {
    core.session(id, uid);
    return;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::not_found) throw;
  }
  try {
    core.create_session(0, id, uid);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::failed_precondition) throw;  // exists: another owner's, or just created
  }
}

}  // namespace

void Broker::run(Job& job) {
  const KernelRequest& k = job.request;
  SlotWriter writer(*slots_, job.slot, k.request_id);
  const std::function<bool()> stop = [this] { return stopping_.load(); };
  FinishStats st;
  if (writer.cancelled()) {
    st.finish = QK_FINISH_CANCELLED;
    ++counters_.served;
    ++counters_.cancelled;
    writer.finish("", st, stop);
    return;
  }
  try {
    ensure_session(core_, k.session, options_.owner_uid);
    GenerateOptions o;
    o.tokens = k.text ? encode_text(core_.tokenizer(), k.prompt_text, "prompt") : k.prompt_ids;
    o.session_id = k.session;
    o.append = k.append;
    o.caller_uid = options_.owner_uid;
    o.sampling = k.sampling;
    o.max_new_tokens = k.max_tokens;
    o.cancelled = [&writer, &stop] { return writer.cancelled() || stop(); };
    const GenerateOutcome r = core_.generate(std::move(o), [&](const GeneratedToken& t) {
      ++counters_.tokens;
      return writer.push(t.id, t.index, t.text, stop);
    });
    st.finish = finish_code(r.finish);
    st.prompt_tokens = static_cast<uint32_t>(r.prompt_tokens);
    st.cached_tokens = static_cast<uint32_t>(r.cached_tokens);
    st.tokens = static_cast<uint32_t>(r.completion_tokens);
    try {  // the session may have been deleted or evicted since; the answer stands
      st.positions = static_cast<uint32_t>(core_.session(k.session, options_.owner_uid).positions);
    } catch (const Error&) {
    }
    ++counters_.served;
    if (r.finish == FinishReason::cancelled) ++counters_.cancelled;
    spdlog::debug("kernel clients: {} session {} request {}: {} tokens, {}", k.source, k.session, k.request_id,
                  r.completion_tokens, to_string(r.finish));
    writer.finish(r.final_text, st, stop);
  } catch (const Error& e) {
    st.finish = QK_FINISH_ERROR;
    st.error = error_code(e.kind());
    ++counters_.failed;
    spdlog::info("kernel clients: {} session {} request {} failed: {}", k.source, k.session, k.request_id, e.what());
    writer.finish("", st, stop);
  } catch (const std::exception& e) {
    st.finish = QK_FINISH_ERROR;
    st.error = QK_E_INTERNAL;
    ++counters_.failed;
    spdlog::error("kernel clients: session {} request {}: {}", k.session, k.request_id, e.what());
    writer.finish("", st, stop);
  }
}

}  // namespace qwen3::kclient
