#include "grpc/grpc_service.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>

#include "common/error.h"
#include "grpc/grpc_mapping.h"
#include "grpc/session_transfer_grpc.h"
#include "grpc/verify_mapping.h"

namespace qwen3 {

namespace pb = qwen3bpf::v1;

namespace {

using Steady = std::chrono::steady_clock;

}  // namespace

Qwen3BpfService::Qwen3BpfService(InferenceCore& core, const Listener* listener, const RestartNeeded* restart_needed)
    : core_(core), listener_(listener), restart_needed_(restart_needed), counters_(core.counters()) {
  started_unix_ms_ = unix_ms(Clock::now());
}

Qwen3BpfService::~Qwen3BpfService() = default;

grpc::Status Qwen3BpfService::fail(const std::exception& e) {
  if (const auto* err = dynamic_cast<const Error*>(&e)) {
    if (err->kind() == ErrorKind::internal) spdlog::error("request failed: {}", err->what());
    return grpc::Status(code_of(err->kind()), err->what());
  }
  spdlog::error("request failed unexpectedly: {}", e.what());
  return grpc::Status(grpc::StatusCode::INTERNAL, std::string("internal error: ") + e.what());
}

// The one shell of every handler: errors become statuses (an engine step
// abandoned because the client went away is CANCELLED), and every call is
// counted by method and status.
template <class Body>
grpc::Status Qwen3BpfService::handle(const char* method, grpc::ServerContext* ctx, Body&& body) {
  grpc::Status st;
  try {
    st = body();
  } catch (const Error& e) {
    st = e.kind() == ErrorKind::unavailable && ctx && ctx->IsCancelled()
             ? grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client")
             : fail(e);
  } catch (const std::exception& e) {
    st = fail(e);
  }
  if (!st.ok() && st.error_code() != grpc::StatusCode::CANCELLED) ++counters_.errors;
  core_.metrics().count_request("grpc", method, code_name(st.error_code()));
  return st;
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

grpc::Status Qwen3BpfService::Tokenize(grpc::ServerContext* ctx, const pb::TokenizeRequest* req,
                                       pb::TokenizeResponse* resp) {
  return handle("Tokenize", ctx, [&] {
    ++counters_.tokenize;
    // add_special_tokens adds nothing for Qwen3: like Hugging Face's Qwen2 tokenizer
    // (add_bos_token false), no BOS/EOS is added to plain text.
    std::vector<std::string> pieces;
    for (int32_t id : core_.tokenize(req->text(), req->split_special_tokens(), req->return_pieces() ? &pieces : nullptr))
      resp->add_ids(id);
    for (auto& p : pieces) resp->add_pieces(std::move(p));
    return grpc::Status::OK;
  });
}

grpc::Status Qwen3BpfService::Detokenize(grpc::ServerContext* ctx, const pb::DetokenizeRequest* req,
                                         pb::DetokenizeResponse* resp) {
  return handle("Detokenize", ctx, [&] {
    ++counters_.detokenize;
    resp->set_text(core_.detokenize({req->ids().begin(), req->ids().end()}, req->skip_special_tokens()));
    return grpc::Status::OK;
  });
}

grpc::Status Qwen3BpfService::Forward(grpc::ServerContext* ctx, const pb::ForwardRequest* req,
                                      pb::ForwardResponse* resp) {
  return handle("Forward", ctx, [&] {
    const Tokenizer& tok = core_.tokenizer();
    ForwardOptions o = forward_options_of(*req, tok);
    o.caller_uid = caller_uid(ctx);
    o.cancelled = [ctx] { return ctx->IsCancelled(); };
    fill_forward(core_.forward(std::move(o)), tok, resp);
    return grpc::Status::OK;
  });
}

grpc::Status Qwen3BpfService::Generate(grpc::ServerContext* ctx, const pb::GenerateRequest* req,
                                       grpc::ServerWriter<pb::GenerateResponse>* writer) {
  return handle("Generate", ctx, [&] {
    const Tokenizer& tok = core_.tokenizer();
    GenerateOptions o = generate_options_of(*req, tok, core_);
    o.caller_uid = caller_uid(ctx);
    o.cancelled = [ctx] { return ctx->IsCancelled(); };
    const GenerateOutcome r =
        core_.generate(std::move(o), [&](const GeneratedToken& t) { return writer->Write(token_message(t, tok)); });
    writer->Write(final_message(r, req->session_id()));  // may fail if the client is gone; nothing left to do then
    return grpc::Status::OK;
  });
}

grpc::Status Qwen3BpfService::CreateSession(grpc::ServerContext* ctx, const pb::CreateSessionRequest* req,
                                            pb::CreateSessionResponse* resp) {
  return handle("CreateSession", ctx, [&] {
    ++counters_.sessions;
    const auto snap = core_.create_session(req->max_context(), req->session_id(), caller_uid(ctx));
    fill_session(snap, core_.session_limits(), resp->mutable_session());
    return grpc::Status::OK;
  });
}

grpc::Status Qwen3BpfService::GetSession(grpc::ServerContext* ctx, const pb::GetSessionRequest* req,
                                         pb::GetSessionResponse* resp) {
  return handle("GetSession", ctx, [&] {
    ++counters_.sessions;
    fill_session(core_.session(req->session_id(), caller_uid(ctx)), core_.session_limits(), resp->mutable_session());
    return grpc::Status::OK;
  });
}

grpc::Status Qwen3BpfService::ListSessions(grpc::ServerContext* ctx, const pb::ListSessionsRequest*,
                                           pb::ListSessionsResponse* resp) {
  return handle("ListSessions", ctx, [&] {
    ++counters_.sessions;
    const auto limits = core_.session_limits();
    for (const auto& s : core_.sessions(caller_uid(ctx))) fill_session(s, limits, resp->add_sessions());
    return grpc::Status::OK;
  });
}

grpc::Status Qwen3BpfService::DeleteSession(grpc::ServerContext* ctx, const pb::DeleteSessionRequest* req,
                                            pb::DeleteSessionResponse* resp) {
  return handle("DeleteSession", ctx, [&] {
    ++counters_.sessions;
    resp->set_freed_bytes(core_.delete_session(req->session_id(), caller_uid(ctx)));
    return grpc::Status::OK;
  });
}

grpc::Status Qwen3BpfService::GetStatus(grpc::ServerContext* ctx, const pb::GetStatusRequest*,
                                        pb::GetStatusResponse* resp) {
  return handle("GetStatus", ctx, [&] { return status(resp); });
}

grpc::Status Qwen3BpfService::status(pb::GetStatusResponse* resp) {
  const DaemonConfig& cfg = core_.config();
  resp->set_version(QWEN3_BPFD_VERSION);
  const LoadProgress p = core_.progress();
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
  if (const auto rt = core_.runtime_facts()) {
    const ModelConfig& mc = rt->model;
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
    model->set_parameter_bytes(rt->parameter_bytes);
    const BackendInfo& info = rt->backend;
    backend->set_name(info.name);
    backend->set_weight_path(info.weight_path);
    backend->set_precision(info.precision);
    backend->set_threads(rt->threads);
    backend->set_bpf_programs(info.bpf_programs);
    backend->set_bpf_maps(info.bpf_maps);
    mem->set_weight_bytes(info.weight_bytes);
    const SessionTotals& totals = rt->totals;
    const SessionLimits& limits = rt->limits;
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
  if (restart_needed_) {
    for (const KeyChange& k : restart_needed_->keys()) {
      auto* r = resp->add_restart_needed();
      r->set_key(k.key);
      r->set_value_in_force(k.in_force);
      r->set_value_on_disk(k.on_disk);
    }
  }
  resp->set_uptime_seconds(std::chrono::duration<double>(Steady::now() - core_.started()).count());
  resp->set_started_unix_ms(started_unix_ms_);
  resp->set_active_streams(counters_.active_streams);
  return grpc::Status::OK;
}

grpc::Status Qwen3BpfService::VerifyProgram(grpc::ServerContext* ctx, const pb::VerifyProgramRequest* req,
                                            pb::VerifyProgramResponse* resp) {
  return handle("VerifyProgram", ctx, [&] {
    ++counters_.verify;
    if (auto st = check_admin(ctx); !st.ok()) return st;
    verify::VerifyRequest vr{req->source(), fixtures_from_proto(req->fixtures()), map_entries_from_proto(req->initial_maps())};
    const VerifyOutcome r = core_.verify_program(vr, [ctx] { return ctx->IsCancelled(); }, req->fix());
    verify_result_to_proto(r.result, resp->mutable_result());
    if (r.repair) repair_to_proto(*r.repair, resp->mutable_repair());
    resp->set_elapsed_ms(r.elapsed_ms);
    return grpc::Status::OK;
  });
}

grpc::Status Qwen3BpfService::GenerateVerified(grpc::ServerContext* ctx, const pb::GenerateVerifiedRequest* req,
                                               pb::GenerateVerifiedResponse* resp) {
  return handle("GenerateVerified", ctx, [&] {
    ++counters_.verify;
    if (auto st = check_admin(ctx); !st.ok()) return st;
    XdpTaskOptions x;
    x.task = req->task();
    x.fixtures = fixtures_from_proto(req->fixtures());
    x.attempts = req->attempts();
    // Greedy unless told otherwise, as xdp-gen documents (a sampled program is a worse first attempt).
    x.sampling = sampling_of(true, req->sampling());
    x.max_new_tokens = req->max_new_tokens();
    x.cancelled = [ctx] { return ctx->IsCancelled(); };
    const XdpTaskOutcome done = core_.generate_verified(std::move(x));
    for (const auto& a : done.attempts) attempt_to_proto(a, resp->add_attempts());
    resp->set_solved(!done.attempts.empty() && !done.attempts.back().fixed_by.empty());
    resp->set_elapsed_ms(done.elapsed_ms);
    return grpc::Status::OK;
  });
}

// Moving sessions: session_transfer_grpc.cpp.
grpc::Status Qwen3BpfService::ExportSession(grpc::ServerContext* ctx, const pb::ExportSessionRequest* req,
                                            grpc::ServerWriter<pb::SessionChunk>* writer) {
  return handle("ExportSession", ctx, [&] { return export_session_rpc(core_, caller_uid(ctx), *req, writer); });
}

grpc::Status Qwen3BpfService::ImportSession(grpc::ServerContext* ctx, grpc::ServerReader<pb::ImportSessionRequest>* reader,
                                            pb::ImportSessionResponse* resp) {
  return handle("ImportSession", ctx, [&] { return import_session_rpc(core_, caller_uid(ctx), ctx, reader, resp); });
}

}  // namespace qwen3
