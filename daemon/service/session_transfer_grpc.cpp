#include "service/session_transfer_grpc.h"

#include <algorithm>

#include "service/grpc_mapping.h"
#include "service/session_transfer.h"

namespace qwen3 {

namespace pb = qwen3bpf::v1;

namespace {

constexpr size_t kChunk = size_t{1} << 20;

// The largest export an import accepts: the whole KV budget and room for the tokens.
size_t import_cap(const Runtime& rt) { return rt.sessions->limits().kv_budget_bytes + (size_t{64} << 20); }

}  // namespace

grpc::Status export_session_rpc(InferenceCore& core, uint32_t caller, const pb::ExportSessionRequest& req,
                                grpc::ServerWriter<pb::SessionChunk>* writer) {
  ++core.counters().sessions;
  Runtime& rt = core.runtime_for_work();
  const std::string file = export_session(rt, {req.session_id(), !req.without_kv(), caller});
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
  Runtime& rt = core.runtime_for_work();
  ImportRequest ir;
  ir.caller = caller;
  ir.cancelled = core.cancellation([ctx] { return ctx->IsCancelled(); });
  std::string file;
  pb::ImportSessionRequest msg;
  bool first = true;
  const size_t cap = import_cap(rt);
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
    const ImportOutcome r = import_session(rt, file, ir);
    fill_session(r.session, rt.sessions->limits(), resp->mutable_session());
    resp->set_kv_imported(r.kv_imported);
    resp->set_recomputed_positions(r.recomputed_positions);
  } catch (const PermissionDenied& e) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, e.what());
  }
  return grpc::Status::OK;
}

}  // namespace qwen3
