// ExportSession / ImportSession over gRPC: the export file of
// session_transfer.h streamed in chunks. Qwen3BpfService's two handlers call
// these inside its error-and-metrics shell.
#pragma once

#include <grpcpp/grpcpp.h>

#include "qwen3bpf/v1/qwen3bpf.grpc.pb.h"
#include "service/inference.h"

namespace qwen3 {

grpc::Status export_session_rpc(InferenceCore& core, uint32_t caller, const qwen3bpf::v1::ExportSessionRequest& req,
                                grpc::ServerWriter<qwen3bpf::v1::SessionChunk>* writer);
grpc::Status import_session_rpc(InferenceCore& core, uint32_t caller, grpc::ServerContext* ctx,
                                grpc::ServerReader<qwen3bpf::v1::ImportSessionRequest>* reader,
                                qwen3bpf::v1::ImportSessionResponse* resp);

}  // namespace qwen3
