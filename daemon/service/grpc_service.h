// The qwen3bpf.v1.Qwen3Bpf gRPC service: validates requests, runs them on the
// loaded runtime, maps qwen3::Error kinds to status codes.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "qwen3bpf/v1/qwen3bpf.grpc.pb.h"
#include "service/counters.h"
#include "service/listener.h"
#include "service/model_host.h"
#include "service/verify_slots.h"

namespace qwen3 {

namespace verify {
class Pipeline;
}

class Qwen3BpfService final : public qwen3bpf::v1::Qwen3Bpf::Service {
 public:
  Qwen3BpfService(ModelHost& host, const Listener* listener);
  ~Qwen3BpfService() override;

  // SIGTERM: running generations finish with CANCELLED, new ones get UNAVAILABLE.
  void begin_shutdown() { shutting_down_ = true; }
  bool shutting_down() const { return shutting_down_; }
  RequestCounters& counters() { return counters_; }
  void set_default_max_new_tokens(int n) { default_max_new_tokens_ = n; }

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

 private:
  grpc::Status check_admin(grpc::ServerContext* ctx) const;
  // The uid of the peer behind the call (0 in-process); sessions belong to it.
  uint32_t caller_uid(grpc::ServerContext* ctx) const;
  grpc::Status fail(const std::exception& e);

  ModelHost& host_;
  const Listener* listener_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<int> default_max_new_tokens_{256};
  RequestCounters counters_;
  std::chrono::steady_clock::time_point started_;
  int64_t started_unix_ms_ = 0;
  std::unique_ptr<verify::Pipeline> pipeline_;
  VerifySlots verify_slots_{2};
};

}  // namespace qwen3
