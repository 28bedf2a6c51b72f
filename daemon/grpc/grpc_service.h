// The qwen3bpf.v1.Qwen3Bpf gRPC service: a thin adapter over the inference
// core (grpc_mapping.h maps the messages); every handler runs in one shell
// that maps errors to statuses and counts the call.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "qwen3bpf/v1/qwen3bpf.grpc.pb.h"
#include "service/config_reload.h"
#include "service/counters.h"
#include "listener/listener.h"
#include "service/inference.h"

namespace qwen3 {

class Qwen3BpfService final : public qwen3bpf::v1::Qwen3Bpf::Service {
 public:
  // `restart_needed` (may be null): the restart-only keys a reload left pending, for GetStatus.
  Qwen3BpfService(InferenceCore& core, const Listener* listener, const RestartNeeded* restart_needed = nullptr);
  ~Qwen3BpfService() override;

  grpc::Status Tokenize(grpc::ServerContext*, const qwen3bpf::v1::TokenizeRequest*,
                        qwen3bpf::v1::TokenizeResponse*) override;
  grpc::Status Detokenize(grpc::ServerContext*, const qwen3bpf::v1::DetokenizeRequest*,
                          qwen3bpf::v1::DetokenizeResponse*) override;
  grpc::Status Forward(grpc::ServerContext*, const qwen3bpf::v1::ForwardRequest*,
                       qwen3bpf::v1::ForwardResponse*) override;
  grpc::Status Generate(grpc::ServerContext*, const qwen3bpf::v1::GenerateRequest*,
                        grpc::ServerWriter<qwen3bpf::v1::GenerateResponse>*) override;
  grpc::Status CreateSession(grpc::ServerContext*, const qwen3bpf::v1::CreateSessionRequest*,
                             qwen3bpf::v1::CreateSessionResponse*) override;
  grpc::Status GetSession(grpc::ServerContext*, const qwen3bpf::v1::GetSessionRequest*,
                          qwen3bpf::v1::GetSessionResponse*) override;
  grpc::Status ListSessions(grpc::ServerContext*, const qwen3bpf::v1::ListSessionsRequest*,
                            qwen3bpf::v1::ListSessionsResponse*) override;
  grpc::Status DeleteSession(grpc::ServerContext*, const qwen3bpf::v1::DeleteSessionRequest*,
                             qwen3bpf::v1::DeleteSessionResponse*) override;
  grpc::Status GetStatus(grpc::ServerContext*, const qwen3bpf::v1::GetStatusRequest*,
                         qwen3bpf::v1::GetStatusResponse*) override;
  grpc::Status VerifyProgram(grpc::ServerContext*, const qwen3bpf::v1::VerifyProgramRequest*,
                             qwen3bpf::v1::VerifyProgramResponse*) override;
  grpc::Status GenerateVerified(grpc::ServerContext*, const qwen3bpf::v1::GenerateVerifiedRequest*,
                                qwen3bpf::v1::GenerateVerifiedResponse*) override;
  grpc::Status ExportSession(grpc::ServerContext*, const qwen3bpf::v1::ExportSessionRequest*,
                             grpc::ServerWriter<qwen3bpf::v1::SessionChunk>*) override;
  grpc::Status ImportSession(grpc::ServerContext*, grpc::ServerReader<qwen3bpf::v1::ImportSessionRequest>*,
                             qwen3bpf::v1::ImportSessionResponse*) override;

 private:
  grpc::Status check_admin(grpc::ServerContext* ctx) const;
  // The uid of the peer behind the call (0 in-process); sessions belong to it.
  uint32_t caller_uid(grpc::ServerContext* ctx) const;
  grpc::Status fail(const std::exception& e);
  template <class Body>
  grpc::Status handle(const char* method, grpc::ServerContext* ctx, Body&& body);
  grpc::Status status(qwen3bpf::v1::GetStatusResponse* resp);

  InferenceCore& core_;
  const Listener* listener_;
  const RestartNeeded* restart_needed_;
  RequestCounters& counters_;
  int64_t started_unix_ms_ = 0;
};

}  // namespace qwen3
