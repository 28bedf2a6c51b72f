#include "grpc/grpc_mapping.h"

#include "common/error.h"

namespace qwen3 {

namespace pb = qwen3bpf::v1;

int64_t unix_ms(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

namespace {

// An enum field of a request must name a known value (proto3 keeps unknown
// numbers as they came).
pb::HistoryMode history_mode_of(int value) {
  if (!pb::HistoryMode_IsValid(value))
    throw invalid_argument("history_mode " + std::to_string(value) +
                           " is not a HistoryMode (HISTORY_MODE_FULL = 0, HISTORY_MODE_APPEND = 1)");
  return static_cast<pb::HistoryMode>(value);
}

}  // namespace

grpc::StatusCode code_of(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid_argument: return grpc::StatusCode::INVALID_ARGUMENT;
    case ErrorKind::not_found: return grpc::StatusCode::NOT_FOUND;
    case ErrorKind::resource_exhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case ErrorKind::failed_precondition: return grpc::StatusCode::FAILED_PRECONDITION;
    case ErrorKind::unavailable: return grpc::StatusCode::UNAVAILABLE;
    case ErrorKind::internal: return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

const char* code_name(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return "OK";
    case grpc::StatusCode::CANCELLED: return "CANCELLED";
    case grpc::StatusCode::INVALID_ARGUMENT: return "INVALID_ARGUMENT";
    case grpc::StatusCode::NOT_FOUND: return "NOT_FOUND";
    case grpc::StatusCode::PERMISSION_DENIED: return "PERMISSION_DENIED";
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case grpc::StatusCode::UNIMPLEMENTED: return "UNIMPLEMENTED";
    case grpc::StatusCode::INTERNAL: return "INTERNAL";
    case grpc::StatusCode::UNAVAILABLE: return "UNAVAILABLE";
    default: return "OTHER";
  }
}

void fill_session(const SessionSnapshot& s, const SessionLimits& limits, pb::SessionInfo* out) {
  out->set_session_id(s.id);
  out->set_positions(s.positions);
  out->set_history_tokens(s.history_tokens);
  out->set_max_context(s.max_context);
  out->set_memory_bytes(s.bytes);
  out->set_created_unix_ms(unix_ms(s.created));
  out->set_last_used_unix_ms(unix_ms(s.last_used));
  out->set_busy(s.busy);
  out->set_expires_unix_ms(limits.ttl.count() > 0 ? unix_ms(s.last_used + limits.ttl) : 0);
  out->set_owner_uid(s.owner_uid);
}

void fill_score(const ScoredToken& t, const Tokenizer& tok, pb::TokenScore* out) {
  out->set_id(t.id);
  out->set_logit(t.logit);
  out->set_logprob(t.logprob);
  try {
    const int32_t one[1] = {t.id};
    out->set_text(tok.decode(one));
  } catch (const std::exception&) {
  }
}

SamplingRequest sampling_of(bool present, const pb::SamplingParams& s) {
  SamplingRequest r;
  if (!present) return r;
  for (const std::string& name : s.set_fields())
    if (!is_sampling_field(name))
      throw invalid_argument("sampling.set_fields: '" + printable(name) +
                             "' is not a sampling field (temperature, top_k, top_p, min_p, repetition_penalty, seed)");
  // Empty set_fields: the message sets every field.
  auto set = [&](const char* name) {
    if (s.set_fields().empty()) return true;
    for (const std::string& f : s.set_fields())
      if (f == name) return true;
    return false;
  };
  if (set("temperature")) r.temperature = s.temperature();
  if (set("top_k")) r.top_k = s.top_k();
  if (set("top_p")) r.top_p = s.top_p();
  if (set("min_p")) r.min_p = s.min_p();
  if (set("repetition_penalty")) r.repetition_penalty = s.repetition_penalty();
  if (set("seed")) r.seed = s.seed();
  return r;
}

void fill_sampling(const SamplingParams& p, pb::SamplingParams* out) {
  out->set_temperature(p.temperature);
  out->set_top_k(p.top_k);
  out->set_top_p(p.top_p);
  out->set_min_p(p.min_p);
  out->set_repetition_penalty(p.repetition_penalty);
  out->set_seed(p.seed);
}

ForwardOptions forward_options_of(const pb::ForwardRequest& req, const Tokenizer& tok) {
  ForwardOptions o;
  if (req.token_ids_size() > 0 && !req.text().empty()) throw invalid_argument("give either token_ids or text, not both");
  if (req.token_ids_size() > 0) o.tokens.assign(req.token_ids().begin(), req.token_ids().end());
  else if (!req.text().empty()) o.tokens = encode_text(tok, req.text(), "text");
  o.session_id = req.session_id();
  o.append = history_mode_of(req.history_mode()) == pb::HISTORY_MODE_APPEND;
  o.top_k = req.top_k() == 0 ? 10 : req.top_k();
  if (o.top_k < 0 || o.top_k > 1000) throw invalid_argument("top_k must be in [0, 1000] (got " + std::to_string(req.top_k()) + ")");
  o.all_positions = req.all_positions();
  o.full_logits = req.full_logits();
  return o;
}

GenerateOptions generate_options_of(const pb::GenerateRequest& req, const Tokenizer& tok, const InferenceCore& core) {
  const int inputs = (req.prompt().empty() ? 0 : 1) + (req.token_ids_size() > 0 ? 1 : 0) + (req.messages_size() > 0 ? 1 : 0);
  if (inputs > 1) throw invalid_argument("give exactly one of prompt, token_ids or messages");
  GenerateOptions o;
  o.append = history_mode_of(req.history_mode()) == pb::HISTORY_MODE_APPEND;
  if (inputs == 0 && !(o.append && !req.session_id().empty()))
    throw invalid_argument("empty input: give a prompt, token_ids or messages");
  if (!req.prompt().empty()) {
    o.tokens = encode_text(tok, req.prompt(), "prompt");
  } else if (req.token_ids_size() > 0) {
    o.tokens.assign(req.token_ids().begin(), req.token_ids().end());
  } else if (req.messages_size() > 0) {
    std::vector<ChatMessage> msgs;
    for (const auto& m : req.messages()) msgs.push_back({m.role(), m.content()});
    // APPEND on a session: the messages continue the chat it holds.
    if (o.append && !req.session_id().empty()) {
      validate_messages(msgs);
      o.chat_continuation = ChatContinuation{std::move(msgs), req.enable_thinking()};
    } else {
      o.tokens = encode_chat(tok, msgs, req.enable_thinking());
    }
  }
  o.session_id = req.session_id();
  o.sampling = sampling_of(req.has_sampling(), req.sampling());
  const auto& st = req.stopping();
  o.max_new_tokens = core.max_new_tokens(st.max_new_tokens());
  o.stop.assign(st.stop().begin(), st.stop().end());
  o.stop_token_ids.assign(st.stop_token_ids().begin(), st.stop_token_ids().end());
  o.ignore_eos = st.ignore_eos();
  o.logprobs = req.logprobs();
  switch (req.speculative()) {
    case pb::SPECULATIVE_ON: o.speculative = true; break;
    case pb::SPECULATIVE_OFF: o.speculative = false; break;
    case pb::SPECULATIVE_DEFAULT: break;
    default: throw invalid_argument("speculative must be SPECULATIVE_DEFAULT, SPECULATIVE_ON or SPECULATIVE_OFF (got " +
                                    std::to_string(static_cast<int>(req.speculative())) + ")");
  }
  switch (req.driver()) {
    case pb::DRIVER_USER: o.driver = Driver::user; break;
    case pb::DRIVER_KERNEL: o.driver = Driver::kernel; break;
    case pb::DRIVER_DEFAULT: break;
    default: throw invalid_argument("driver must be DRIVER_DEFAULT, DRIVER_USER or DRIVER_KERNEL (got " +
                                    std::to_string(static_cast<int>(req.driver())) + ")");
  }
  return o;
}

void fill_forward(const ForwardOutcome& r, const Tokenizer& tok, pb::ForwardResponse* resp) {
  for (const auto& t : r.top) fill_score(t, tok, resp->add_top());
  for (int32_t a : r.position_argmax) resp->add_position_argmax(a);
  resp->mutable_logits()->Assign(r.logits.begin(), r.logits.end());
  resp->mutable_usage()->set_prompt_tokens(r.prompt_tokens);
  resp->mutable_usage()->set_cached_tokens(r.cached_tokens);
  resp->set_session_positions(r.session_positions);
  resp->set_forward_ms(r.forward_ms);
  resp->mutable_input_ids()->Assign(r.input_ids.begin(), r.input_ids.end());
}

pb::GenerateResponse token_message(const GeneratedToken& t, const Tokenizer& tok) {
  pb::GenerateResponse m;
  m.set_token_id(t.id);
  m.set_text(t.text);
  m.set_index(t.index);
  if (t.has_logprobs) {
    auto* lp = m.mutable_logprobs();
    lp->set_logprob(t.logprob);
    for (const auto& c : t.top) fill_score(c, tok, lp->add_top());
  }
  return m;
}

pb::GenerateResponse final_message(const GenerateOutcome& r, const std::string& session_id) {
  pb::GenerateResponse last;
  last.set_token_id(-1);
  last.set_index(r.completion_tokens);
  last.set_text(r.final_text);
  switch (r.finish) {
    case FinishReason::length: last.set_finish_reason(pb::FINISH_REASON_LENGTH); break;
    case FinishReason::eos: last.set_finish_reason(pb::FINISH_REASON_EOS); break;
    case FinishReason::stop_sequence: last.set_finish_reason(pb::FINISH_REASON_STOP_SEQUENCE); break;
    case FinishReason::cancelled: last.set_finish_reason(pb::FINISH_REASON_CANCELLED); break;
  }
  last.mutable_usage()->set_prompt_tokens(r.prompt_tokens);
  last.mutable_usage()->set_cached_tokens(r.cached_tokens);
  last.mutable_usage()->set_completion_tokens(r.completion_tokens);
  last.mutable_usage()->set_speculative_draft_tokens(r.draft_tokens);
  last.mutable_usage()->set_speculative_accepted_tokens(r.accepted_tokens);
  auto* t = last.mutable_timings();
  t->set_queue_ms(r.queue_ms);
  t->set_prefill_ms(r.prefill_ms);
  t->set_decode_ms(r.decode_ms);
  if (r.decode_ms > 0) t->set_decode_tokens_per_second(r.completion_tokens * 1000.0 / r.decode_ms);
  last.set_seed(r.seed);
  last.set_stop_sequence(r.matched_stop);
  last.set_session_id(session_id);
  fill_sampling(r.sampling, last.mutable_sampling());
  return last;
}

}  // namespace qwen3
