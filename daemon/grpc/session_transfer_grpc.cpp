#include "grpc/session_transfer_grpc.h"

#include <algorithm>

#include "grpc/grpc_mapping.h"
#include "service/session_transfer.h"

namespace qwen3 {

namespace pb = qwen3bpf::v1;

namespace {

constexpr size_t kChunk = size_t{1} << 20;

}  // namespace

grpc::Status export_session_rpc(InferenceCore& core, uint32_t caller, const pb::ExportSessionRequest& req,
                                grpc::ServerWriter<pb::SessionChunk>* writer) {
  ++core.counters().sessions;
  const std::string file = core.export_session({req.session_id(), !req.without_kv(), caller});
  for (size_t at = 0; at < file.size(); at += kChunk) {
    pb::SessionChunk chunk;
    chunk.set_data(file.substr(at, std::min(kChunk, file.size() - at)));
    if (!writer->Write(chunk)) return grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
  }
  return grpc::Status::OK;
}

grpc::Status import_session_rpc(InferenceCore& core, uint32_t caller, grpc::ServerContext* ctx,
                                grpc::ServerReader<pb::ImportSessionRequest>* reader, pb::ImportSessionResponse* resp) {
  ++core.counters().sessions;
  ImportRequest ir;
  ir.caller = caller;
  ir.cancelled = core.cancellation([ctx] { return ctx->IsCancelled(); });
  std::string file;
  pb::ImportSessionRequest msg;
  bool first = true;
  const size_t cap = core.max_import_bytes();
  while (reader->Read(&msg)) {
    if (first) {
      ir.session_id = msg.session_id();
      ir.recompute = msg.recompute();
      first = false;
    }
    if (file.size() + msg.data().size() > cap)
      throw resource_exhausted("the session export is larger than this daemon's whole KV budget (" +
                               std::to_string(cap >> 20) + " MiB with the tokens' allowance); raise kv_budget_mib");
    file += msg.data();
  }
  if (file.empty()) throw invalid_argument("no data: send the export file's bytes in ImportSessionRequest.data");
  try {
    const ImportOutcome r = core.import_session(file, ir);
    fill_session(r.session, core.session_limits(), resp->mutable_session());
    resp->set_kv_imported(r.kv_imported);
    resp->set_recomputed_positions(r.recomputed_positions);
  } catch (const PermissionDenied& e) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, e.what());
  }
  return grpc::Status::OK;
}

}  // namespace qwen3
