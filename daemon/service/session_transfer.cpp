#include "service/session_transfer.h"

#include <chrono>
#include <filesystem>
#include <span>

#include "model/model_dir.h"
#include "scheduler/scheduler.h"
#include "service/inference.h"
#include "service/kv_transfer.h"
#include "service/model_identity.h"
#include "service/session_file.h"
#include "sessions/session.h"

namespace qwen3 {

namespace {

std::string short_hash(const std::string& h) { return h.substr(0, 16); }

std::string model_name(const Runtime& rt) {
  const std::filesystem::path p(rt.model->path());
  const std::string name = p.filename().string();
  return name.empty() ? p.parent_path().filename().string() : name;
}

std::string layout_text(const std::string& precision, const SessionFileKv& kv) {
  return precision + " with " + std::to_string(kv.bits) + "-bit K/V (" + std::to_string(kv.entry_bytes) +
         "-byte entries of " + std::to_string(kv.block) + " positions)";
}

void check_model(const Runtime& rt, const SessionFile& f) {
  const std::string here = model_identity(rt.model);
  if (f.model_sha256 == here) return;
  throw invalid_argument("session " + printable(f.id) + " was exported from another model: model sha256 " +
                         short_hash(f.model_sha256) + "... ('" + printable(f.model_name) + "', " +
                         std::to_string(f.layers) + " layers, vocab " + std::to_string(f.vocab_size) +
                         "), this daemon serves sha256 " + short_hash(here) + "... ('" + model_name(rt) + "', " +
                         std::to_string(rt.backend->config().num_hidden_layers) + " layers, vocab " +
                         std::to_string(rt.backend->config().vocab_size) +
                         "); import it into a daemon serving the same config.json and weights");
}

// The file's KV against this daemon's: backend and precision first (before a cache exists), then the layout.
void check_kv_backend(const Runtime& rt, const SessionFile& f) {
  const BackendInfo info = rt.backend->info();
  if (info.name != f.backend || info.precision != f.precision)
    throw invalid_argument("session " + printable(f.id) + " carries KV of the " + printable(f.backend) + " backend at " +
                           printable(f.precision) + ", this daemon runs the " + info.name + " backend at " +
                           info.precision + "; import it with recompute (the KV is computed again from its " +
                           std::to_string(f.positions) + " tokens)");
}

void check_kv_layout(const SessionFile& f, const SessionFileKv& here, const std::string& precision) {
  if (here.bits == f.kv.bits && here.entry_bytes == f.kv.entry_bytes && here.block == f.kv.block &&
      here.entries == f.kv.entries)
    return;
  throw invalid_argument("session " + printable(f.id) + " carries KV as " + layout_text(f.precision, f.kv) +
                         ", this daemon keeps " + layout_text(precision, here) +
                         " (kv_bits in qwen3-bpfd.conf); import it with recompute");
}

}  // namespace

std::string export_session(Runtime& rt, const ExportRequest& req) {
  SessionLease lease = rt.sessions->acquire(req.session_id, req.caller);
  const ModelConfig& mc = rt.backend->config();
  const BackendInfo info = rt.backend->info();
  SessionFile f;
  f.model_sha256 = model_identity(rt.model);
  f.model_name = model_name(rt);
  f.backend = info.name;
  f.precision = info.precision;
  f.layers = mc.num_hidden_layers;
  f.kv_heads = mc.num_key_value_heads;
  f.head_dim = mc.head_dim;
  f.vocab_size = mc.vocab_size;
  f.daemon_version = QWEN3_BPFD_VERSION;
  f.created_unix_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now().time_since_epoch()).count();
  f.id = lease->id;
  f.owner_uid = lease->owner_uid;
  f.max_context = lease->kv->max_context();
  f.positions = lease->kv->positions();
  f.history = lease->history;
  if (req.include_kv) {
    const auto layout = kv_layout(*lease->kv, mc, f.positions);
    if (!layout)
      throw invalid_argument("the " + info.name + " backend's KV cannot be exported; export session " +
                             printable(req.session_id) + " without KV (its tokens are recomputed on import)");
    f.has_kv = true;
    f.kv = *layout;
    f.kv_data = read_kv(*lease->kv, f.kv);
  }
  return encode_session_file(f);
}

ImportOutcome import_session(Runtime& rt, std::string_view file, const ImportRequest& req) {
  const SessionFile f = decode_session_file(file);
  check_model(rt, f);
  if (req.caller != 0 && f.owner_uid != req.caller)
    throw PermissionDenied("session " + printable(f.id) + " belongs to uid " + std::to_string(f.owner_uid) +
                           "; only root may import a session for another uid (you are uid " +
                           std::to_string(req.caller) + ")");
  const bool use_kv = f.has_kv && !req.recompute;
  if (use_kv) check_kv_backend(rt, f);
  SavedSession saved;
  saved.id = req.session_id.empty() ? f.id : req.session_id;
  saved.max_context = f.max_context;
  saved.positions = f.positions;
  saved.history = f.history;
  saved.owner_uid = f.owner_uid;
  validate_token_ids(saved.history, rt.backend->config().vocab_size, "the session's history");
  SessionLease lease = rt.sessions->create_restoring(saved);
  ImportOutcome out;
  try {
    if (use_kv) {
      const auto here = kv_layout(*lease->kv, rt.backend->config(), f.positions);
      if (!here) throw invalid_argument("this daemon's KV caches cannot take KV blocks; import with recompute");
      check_kv_layout(f, *here, rt.backend->info().precision);
      write_kv(*lease->kv, f.kv, f.kv_data, f.positions);
      out.kv_imported = true;
    } else if (f.positions > 0) {
      const std::span<const int32_t> feed(f.history.data(), static_cast<size_t>(f.positions));
      rt.scheduler->run(*lease->kv, feed, ForwardWants{}, req.cancelled);
      out.recomputed_positions = f.positions;
    }
    lease->history = f.history;
    SessionManager::finish_restore(lease);
    lease.release();
  } catch (...) {
    lease.release();
    try {
      rt.sessions->remove(saved.id);
    } catch (...) {
    }
    throw;
  }
  out.session = rt.sessions->get(saved.id, 0);
  return out;
}

}  // namespace qwen3
