#include "service/grpc_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "common/error.h"
#include "service/inference.h"

#if __has_include("verify/pipeline.h") && defined(QWEN3_HAVE_VERIFY)
#include "service/verify_mapping.h"
#include "verify/pipeline.h"
#define QWEN3_VERIFY_AVAILABLE 1
#endif

namespace qwen3 {

namespace pb = qwen3bpf::v1;

namespace {

using Steady = std::chrono::steady_clock;

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

int64_t unix_ms(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
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

// An enum field of a request must name a known value (proto3 keeps unknown
// numbers as they came).
pb::HistoryMode history_mode_of(int value) {
  if (!pb::HistoryMode_IsValid(value))
    throw invalid_argument("history_mode " + std::to_string(value) +
                           " is not a HistoryMode (HISTORY_MODE_FULL = 0, HISTORY_MODE_APPEND = 1)");
  return static_cast<pb::HistoryMode>(value);
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

// Strict UTF-8 check (protobuf's own check only logs for proto3 strings in C++).
bool valid_utf8(const std::string& s) {
  size_t i = 0;
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  while (i < s.size()) {
    const unsigned c = b[i];
    int n;
    uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { n = 1; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { n = 2; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { n = 3; cp = c & 0x07; }
    else return false;
    if (i + n >= s.size()) return false;  // truncated sequence
    for (int k = 1; k <= n; ++k) {
      if ((b[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b[i + k] & 0x3F);
    }
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n + 1;
  }
  return true;
}

void require_utf8(const std::string& s, const std::string& field) {
  if (!valid_utf8(s)) throw invalid_argument(field + " is not valid UTF-8");
}

std::vector<int32_t> encode_text(const Tokenizer& tok, const std::string& text, const std::string& field,
                                 bool parse_special = true) {
  require_utf8(text, field);
  return tok.encode(text, parse_special);
}

}  // namespace

Qwen3BpfService::Qwen3BpfService(ModelHost& host, const Listener* listener)
    : host_(host), listener_(listener), started_(Steady::now()) {
  started_unix_ms_ = unix_ms(Clock::now());
  default_max_new_tokens_ = host.config().default_max_new_tokens;
#ifdef QWEN3_VERIFY_AVAILABLE
  verify::PipelineOptions po;
  po.data_dir = host.config().state_dir + "/verify";  // vmlinux.h and the header tree are cached there
  pipeline_ = std::make_unique<verify::Pipeline>(po);
#endif
}

Qwen3BpfService::~Qwen3BpfService() = default;

grpc::Status Qwen3BpfService::fail(const std::exception& e) {
  ++counters_.errors;
  if (const auto* err = dynamic_cast<const Error*>(&e)) {
    if (err->kind() == ErrorKind::internal) spdlog::error("request failed: {}", err->what());
    return grpc::Status(code_of(err->kind()), err->what());
  }
  spdlog::error("request failed unexpectedly: {}", e.what());
  return grpc::Status(grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what());
}

uint32_t Qwen3BpfService::caller_uid(grpc::ServerContext* ctx) const {
  if (!listener_) return 0;  // in-process use (tests, --check)
  const auto who = listener_->peer(ctx->peer());
  if (!who) throw failed_precondition("cannot tell who is calling: the connection's peer is unknown");
  return who->uid;
}

grpc::Status Qwen3BpfService::check_admin(grpc::ServerContext* ctx) const {
  if (!listener_) return grpc::Status::OK;  // in-process use (tests, --check)
  // Judged now, against the admin_group in force (a SIGHUP may have changed it
  // since the connection was accepted).
  const auto who = listener_->peer(ctx->peer());
  if (who && listener_->is_admin(*who)) return grpc::Status::OK;
  const std::string group = listener_->admin_group();
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      "VerifyProgram and GenerateVerified are for root" +
                          (group.empty() ? std::string(" only (set admin_group in qwen3-bpfd.conf to allow a group)")
                                         : " and members of group '" + group + "'"));
}

grpc::Status Qwen3BpfService::Tokenize(grpc::ServerContext*, const pb::TokenizeRequest* req,
                                       pb::TokenizeResponse* resp) {
  ++counters_.tokenize;
  try {
    Runtime& rt = host_.runtime();
    std::vector<int32_t> ids;
    // add_special_tokens adds nothing for Qwen3: like Hugging Face's Qwen2 tokenizer
    // (add_bos_token false), no BOS/EOS is added to plain text.
    const auto body = encode_text(*rt.tokenizer, req->text(), "text", !req->split_special_tokens());
    ids.insert(ids.end(), body.begin(), body.end());
    for (int32_t id : ids) {
      resp->add_ids(id);
      if (req->return_pieces()) resp->add_pieces(rt.tokenizer->piece(id));
    }
    return grpc::Status::OK;
  } catch (const std::exception& e) {
    return fail(e);
  }
}

grpc::Status Qwen3BpfService::Detokenize(grpc::ServerContext*, const pb::DetokenizeRequest* req,
                                         pb::DetokenizeResponse* resp) {
  ++counters_.detokenize;
  try {
    Runtime& rt = host_.runtime();
    std::vector<int32_t> ids(req->ids().begin(), req->ids().end());
    validate_token_ids(ids, std::max(rt.tokenizer->vocab_size(), rt.backend->config().vocab_size), "ids");
    // Model ids beyond the tokenizer's vocabulary (embedding padding) have no text.
    std::erase_if(ids, [&](int32_t id) { return id >= rt.tokenizer->vocab_size(); });
    resp->set_text(rt.tokenizer->decode(ids, req->skip_special_tokens()));
    return grpc::Status::OK;
  } catch (const std::exception& e) {
    return fail(e);
  }
}

grpc::Status Qwen3BpfService::Forward(grpc::ServerContext* ctx, const pb::ForwardRequest* req,
                                      pb::ForwardResponse* resp) {
  ++counters_.forward;
  try {
    if (shutting_down_) throw unavailable("the daemon is stopping");
    Runtime& rt = host_.runtime();
    ForwardOptions o;
    if (req->token_ids_size() > 0 && !req->text().empty())
      throw invalid_argument("give either token_ids or text, not both");
    if (req->token_ids_size() > 0) o.tokens.assign(req->token_ids().begin(), req->token_ids().end());
    else if (!req->text().empty()) o.tokens = encode_text(*rt.tokenizer, req->text(), "text");
    o.session_id = req->session_id();
    o.append = history_mode_of(req->history_mode()) == pb::HISTORY_MODE_APPEND;
    o.caller_uid = caller_uid(ctx);
    o.top_k = req->top_k() == 0 ? 10 : req->top_k();
    if (o.top_k < 0 || o.top_k > 1000) throw invalid_argument("top_k must be in [0, 1000] (got " + std::to_string(req->top_k()) + ")");
    o.all_positions = req->all_positions();
    o.full_logits = req->full_logits();
    o.cancelled = [this, ctx] { return ctx->IsCancelled() || shutting_down_; };
    const ForwardOutcome r = run_forward(rt, o);
    for (const auto& t : r.top) fill_score(t, *rt.tokenizer, resp->add_top());
    for (int32_t a : r.position_argmax) resp->add_position_argmax(a);
    resp->mutable_logits()->Assign(r.logits.begin(), r.logits.end());
    resp->mutable_usage()->set_prompt_tokens(r.prompt_tokens);
    resp->mutable_usage()->set_cached_tokens(r.cached_tokens);
    resp->set_session_positions(r.session_positions);
    resp->set_forward_ms(r.forward_ms);
    resp->mutable_input_ids()->Assign(r.input_ids.begin(), r.input_ids.end());
    counters_.prompt_tokens += r.prompt_tokens - r.cached_tokens;
    counters_.cached_tokens += r.cached_tokens;
    return grpc::Status::OK;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::unavailable && ctx->IsCancelled())
      return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client");
    return fail(e);
  } catch (const std::exception& e) {
    return fail(e);
  }
}

grpc::Status Qwen3BpfService::Generate(grpc::ServerContext* ctx, const pb::GenerateRequest* req,
                                       grpc::ServerWriter<pb::GenerateResponse>* writer) {
  ++counters_.generate;
  struct StreamCount {
    std::atomic<int>& n;
    explicit StreamCount(std::atomic<int>& c) : n(c) { ++n; }
    ~StreamCount() { --n; }
  } count(counters_.active_streams);
  try {
    if (shutting_down_) throw unavailable("the daemon is stopping");
    Runtime& rt = host_.runtime();
    const int inputs = (req->prompt().empty() ? 0 : 1) + (req->token_ids_size() > 0 ? 1 : 0) + (req->messages_size() > 0 ? 1 : 0);
    if (inputs > 1) throw invalid_argument("give exactly one of prompt, token_ids or messages");
    GenerateOptions o;
    o.append = history_mode_of(req->history_mode()) == pb::HISTORY_MODE_APPEND;
    o.caller_uid = caller_uid(ctx);
    if (inputs == 0 && !(o.append && !req->session_id().empty()))
      throw invalid_argument("empty input: give a prompt, token_ids or messages");
    if (!req->prompt().empty()) {
      o.tokens = encode_text(*rt.tokenizer, req->prompt(), "prompt");
    } else if (req->token_ids_size() > 0) {
      o.tokens.assign(req->token_ids().begin(), req->token_ids().end());
    } else if (req->messages_size() > 0) {
      std::vector<ChatMessage> msgs;
      for (const auto& m : req->messages()) {
        if (m.role() != "system" && m.role() != "user" && m.role() != "assistant" && m.role() != "tool")
          throw invalid_argument("messages: role must be system, user, assistant or tool (got '" + printable(m.role()) +
                                 "')");
        require_utf8(m.content(), "messages.content");
        msgs.push_back({m.role(), m.content()});
      }
      const std::string text = rt.tokenizer->apply_chat_template(msgs, true, req->enable_thinking());
      o.tokens = rt.tokenizer->encode(text, true);
    }
    o.session_id = req->session_id();
    const auto& s = req->sampling();
    o.sampling.temperature = s.temperature();
    o.sampling.top_k = s.top_k();
    o.sampling.top_p = s.top_p() == 0.0f ? 1.0f : s.top_p();
    o.sampling.min_p = s.min_p();
    o.sampling.repetition_penalty = s.repetition_penalty() == 0.0f ? 1.0f : s.repetition_penalty();
    o.sampling.seed = s.seed();
    o.random_seed = s.seed() == 0 && s.temperature() > 0.0f;
    const auto& st = req->stopping();
    if (st.max_new_tokens() < 0) throw invalid_argument("max_new_tokens must be >= 0 (0 = default)");
    o.max_new_tokens = st.max_new_tokens() == 0 ? default_max_new_tokens_.load() : st.max_new_tokens();
    for (const auto& stop : st.stop()) {
      require_utf8(stop, "stop");
      o.stop.push_back(stop);
    }
    o.stop_token_ids.assign(st.stop_token_ids().begin(), st.stop_token_ids().end());
    o.ignore_eos = st.ignore_eos();
    o.logprobs = req->logprobs();
    o.cancelled = [this, ctx] { return ctx->IsCancelled() || shutting_down_; };

    const Tokenizer& tok = *rt.tokenizer;
    auto emit = [&](const GeneratedToken& t) {
      pb::GenerateResponse m;
      m.set_token_id(t.id);
      m.set_text(t.text);
      m.set_index(t.index);
      if (t.has_logprobs) {
        auto* lp = m.mutable_logprobs();
        lp->set_logprob(t.logprob);
        for (const auto& c : t.top) fill_score(c, tok, lp->add_top());
      }
      return writer->Write(m);
    };
    const GenerateOutcome r = run_generate(rt, o, emit);

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
    auto* t = last.mutable_timings();
    t->set_queue_ms(r.queue_ms);
    t->set_prefill_ms(r.prefill_ms);
    t->set_decode_ms(r.decode_ms);
    if (r.decode_ms > 0) t->set_decode_tokens_per_second(r.completion_tokens * 1000.0 / r.decode_ms);
    last.set_seed(r.seed);
    last.set_stop_sequence(r.matched_stop);
    last.set_session_id(req->session_id());
    counters_.prompt_tokens += r.prompt_tokens - r.cached_tokens;
    counters_.cached_tokens += r.cached_tokens;
    counters_.completion_tokens += r.completion_tokens;
    if (r.finish == FinishReason::cancelled) {
      ++counters_.cancelled;
      spdlog::info("generation cancelled after {} tokens ({})", r.completion_tokens,
                   shutting_down_ ? "daemon stopping" : "client cancelled or disconnected");
    }
    writer->Write(last);  // may fail if the client is gone; nothing left to do then
    return grpc::Status::OK;
  } catch (const std::exception& e) {
    return fail(e);
  }
}

grpc::Status Qwen3BpfService::CreateSession(grpc::ServerContext* ctx, const pb::CreateSessionRequest* req,
                                            pb::CreateSessionResponse* resp) {
  ++counters_.sessions;
  try {
    if (shutting_down_) throw unavailable("the daemon is stopping");
    Runtime& rt = host_.runtime();
    if (req->max_context() < 0) throw invalid_argument("max_context must be >= 0 (0 = default)");
    const auto snap = rt.sessions->create(req->max_context(), req->session_id(), caller_uid(ctx));
    fill_session(snap, rt.sessions->limits(), resp->mutable_session());
    return grpc::Status::OK;
  } catch (const std::exception& e) {
    return fail(e);
  }
}

grpc::Status Qwen3BpfService::GetSession(grpc::ServerContext* ctx, const pb::GetSessionRequest* req,
                                         pb::GetSessionResponse* resp) {
  ++counters_.sessions;
  try {
    Runtime& rt = host_.runtime();
    fill_session(rt.sessions->get(req->session_id(), caller_uid(ctx)), rt.sessions->limits(), resp->mutable_session());
    return grpc::Status::OK;
  } catch (const std::exception& e) {
    return fail(e);
  }
}

grpc::Status Qwen3BpfService::ListSessions(grpc::ServerContext* ctx, const pb::ListSessionsRequest*,
                                           pb::ListSessionsResponse* resp) {
  ++counters_.sessions;
  try {
    Runtime& rt = host_.runtime();
    const auto limits = rt.sessions->limits();
    for (const auto& s : rt.sessions->list(caller_uid(ctx))) fill_session(s, limits, resp->add_sessions());
    return grpc::Status::OK;
  } catch (const std::exception& e) {
    return fail(e);
  }
}

grpc::Status Qwen3BpfService::DeleteSession(grpc::ServerContext* ctx, const pb::DeleteSessionRequest* req,
                                            pb::DeleteSessionResponse* resp) {
  ++counters_.sessions;
  try {
    Runtime& rt = host_.runtime();
    resp->set_freed_bytes(rt.sessions->remove(req->session_id(), caller_uid(ctx)));
    return grpc::Status::OK;
  } catch (const std::exception& e) {
    return fail(e);
  }
}

grpc::Status Qwen3BpfService::GetStatus(grpc::ServerContext*, const pb::GetStatusRequest*,
                                        pb::GetStatusResponse* resp) {
  const DaemonConfig& cfg = host_.config();
  resp->set_version(QWEN3_BPFD_VERSION);
  const LoadProgress p = host_.progress();
  resp->set_load_state(p.state == LoadState::ready    ? pb::LOAD_STATE_READY
                       : p.state == LoadState::failed ? pb::LOAD_STATE_FAILED
                                                      : pb::LOAD_STATE_LOADING);
  resp->set_load_progress(p.fraction);
  resp->set_load_message(p.text);
  auto* model = resp->mutable_model();
  model->set_path(cfg.effective_model_dir());
  model->set_is_default_model(cfg.uses_default_model());
  auto* backend = resp->mutable_backend();
  backend->set_name(cfg.backend);
  backend->set_weight_path(cfg.weight_path);
  backend->set_precision(cfg.precision);
  backend->set_threads(cfg.threads);
  auto* mem = resp->mutable_memory();
  mem->set_kv_budget_bytes(static_cast<uint64_t>(cfg.kv_budget_mib) * 1024 * 1024);
  auto* sl = resp->mutable_sessions();
  sl->set_max_sessions(cfg.max_sessions);
  sl->set_ttl_seconds(cfg.session_ttl_seconds);
  sl->set_default_context(cfg.default_context);
  sl->set_max_context(cfg.max_context);
  if (Runtime* rt = host_.runtime_if_ready()) {
    const ModelConfig& mc = rt->backend->config();
    model->set_hidden_size(mc.hidden_size);
    model->set_num_hidden_layers(mc.num_hidden_layers);
    model->set_num_attention_heads(mc.num_attention_heads);
    model->set_num_key_value_heads(mc.num_key_value_heads);
    model->set_head_dim(mc.head_dim);
    model->set_intermediate_size(mc.intermediate_size);
    model->set_vocab_size(mc.vocab_size);
    model->set_max_position_embeddings(mc.max_position_embeddings);
    model->set_rope_theta(mc.rope_theta);
    model->set_tie_word_embeddings(mc.tie_word_embeddings);
    model->set_parameter_bytes(rt->model->tensor_bytes());
    const BackendInfo info = rt->backend->info();
    backend->set_name(info.name);
    backend->set_weight_path(info.weight_path);
    backend->set_precision(info.precision);
    backend->set_threads(rt->threads);
    backend->set_bpf_programs(info.bpf_programs);
    backend->set_bpf_maps(info.bpf_maps);
    mem->set_weight_bytes(info.weight_bytes);
    const SessionTotals totals = rt->sessions->totals();
    const SessionLimits limits = rt->sessions->limits();
    mem->set_kv_bytes(totals.kv_bytes);
    mem->set_kv_budget_bytes(limits.kv_budget_bytes);
    sl->set_sessions(totals.sessions);
    sl->set_busy_sessions(totals.busy);
    sl->set_max_sessions(limits.max_sessions);
    sl->set_ttl_seconds(limits.ttl.count());
    sl->set_default_context(limits.default_context);
    sl->set_max_context(limits.max_context);
    resp->mutable_requests()->set_evicted_sessions(totals.evicted);
  }
  auto* rq = resp->mutable_requests();
  rq->set_tokenize(counters_.tokenize);
  rq->set_detokenize(counters_.detokenize);
  rq->set_forward(counters_.forward);
  rq->set_generate(counters_.generate);
  rq->set_sessions(counters_.sessions);
  rq->set_verify(counters_.verify);
  rq->set_errors(counters_.errors);
  rq->set_cancelled(counters_.cancelled);
  rq->set_prompt_tokens(counters_.prompt_tokens);
  rq->set_cached_tokens(counters_.cached_tokens);
  rq->set_completion_tokens(counters_.completion_tokens);
  if (listener_) {
    rq->set_rejected_connections(listener_->rejected());
    resp->set_socket_path(listener_->path());
  }
  resp->set_uptime_seconds(std::chrono::duration<double>(Steady::now() - started_).count());
  resp->set_started_unix_ms(started_unix_ms_);
  resp->set_active_streams(counters_.active_streams);
  return grpc::Status::OK;
}

grpc::Status Qwen3BpfService::VerifyProgram(grpc::ServerContext* ctx, const pb::VerifyProgramRequest* req,
                                            pb::VerifyProgramResponse* resp) {
  ++counters_.verify;
  if (auto st = check_admin(ctx); !st.ok()) {
    ++counters_.errors;
    return st;
  }
#ifdef QWEN3_VERIFY_AVAILABLE
  try {
    auto slot = verify_slots_.acquire(std::chrono::seconds(60), [ctx] { return ctx->IsCancelled(); });
    if (req->source().empty()) throw invalid_argument("source is empty: give the C source of one XDP program");
    const auto t0 = Steady::now();
    verify::VerifyRequest vr{req->source(), fixtures_from_proto(req->fixtures()), map_entries_from_proto(req->initial_maps())};
    const auto result = pipeline_->verify(vr);
    verify_result_to_proto(result, resp->mutable_result());
    resp->set_elapsed_ms(std::chrono::duration<double, std::milli>(Steady::now() - t0).count());
    return grpc::Status::OK;
  } catch (const std::exception& e) {
    return fail(e);
  }
#else
  (void)req;
  (void)resp;
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this build has no XDP verification pipeline");
#endif
}

grpc::Status Qwen3BpfService::GenerateVerified(grpc::ServerContext* ctx, const pb::GenerateVerifiedRequest* req,
                                               pb::GenerateVerifiedResponse* resp) {
  ++counters_.verify;
  if (auto st = check_admin(ctx); !st.ok()) {
    ++counters_.errors;
    return st;
  }
#ifdef QWEN3_VERIFY_AVAILABLE
  try {
    auto slot = verify_slots_.acquire(std::chrono::seconds(60), [ctx] { return ctx->IsCancelled(); });
    if (req->task().empty()) throw invalid_argument("task is empty: describe what the XDP program should do");
    require_utf8(req->task(), "task");
    const int attempts = req->attempts() == 0 ? 2 : req->attempts();
    if (attempts < 1 || attempts > 5) throw invalid_argument("attempts must be in [1, 5] (got " + std::to_string(attempts) + ")");
    Runtime& rt = host_.runtime();
    const auto t0 = Steady::now();
    const auto& s = req->sampling();
    auto generate = [&](const std::vector<ChatMessage>& messages) {
      GenerateOptions o;
      o.tokens = rt.tokenizer->encode(rt.tokenizer->apply_chat_template(messages, true, false), true);
      o.sampling.temperature = s.temperature();
      o.sampling.top_k = s.top_k();
      o.sampling.top_p = s.top_p() == 0.0f ? 1.0f : s.top_p();
      o.sampling.min_p = s.min_p();
      o.sampling.repetition_penalty = s.repetition_penalty() == 0.0f ? 1.0f : s.repetition_penalty();
      o.sampling.seed = s.seed();
      o.random_seed = s.seed() == 0 && s.temperature() > 0.0f;
      const int cap = rt.sessions->limits().max_context - static_cast<int>(o.tokens.size());
      if (cap < 1) throw invalid_argument("the task and diagnostics do not fit the context");
      o.max_new_tokens = std::min(req->max_new_tokens() == 0 ? 1024 : req->max_new_tokens(), cap);
      o.cancelled = [this, ctx] { return ctx->IsCancelled() || shutting_down_; };
      const auto r = run_generate(rt, o, [](const GeneratedToken&) { return true; });
      if (r.finish == FinishReason::cancelled) throw unavailable("cancelled");
      return r.text;
    };
    const auto result = verify::generate_verified(req->task(), fixtures_from_proto(req->fixtures()), attempts, generate, *pipeline_);
    for (const auto& a : result) {
      auto* o = resp->add_attempts();
      for (const auto& m : a.messages) {
        auto* pm = o->add_messages();
        pm->set_role(m.role);
        pm->set_content(m.content);
      }
      o->set_completion(a.completion);
      o->set_source(a.source);
      verify_result_to_proto(a.result, o->mutable_result());
    }
    resp->set_solved(!result.empty() && result.back().result.decision == verify::Decision::pass);
    resp->set_elapsed_ms(std::chrono::duration<double, std::milli>(Steady::now() - t0).count());
    return grpc::Status::OK;
  } catch (const std::exception& e) {
    return fail(e);
  }
#else
  (void)req;
  (void)resp;
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this build has no XDP verification pipeline");
#endif
}

}  // namespace qwen3
