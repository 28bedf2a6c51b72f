// Sessions that move between daemons: export one session (tokens, context
// size, owner, and optionally its KV blocks) in the format of session_file.h,
// and import such a file, checking that it fits this daemon.
//
// Exact: an import with KV writes the blocks verbatim (kv_transfer.h), so the
// session continues bit-identically to one that never moved; an import without
// KV (the file has none, or `recompute`) feeds the tokens through the engine,
// as a restart restores sessions, with the same KV as a result.
//
// Refused, with a message naming what differs: a file of another model
// (model_identity.h), KV of another backend, precision or K/V layout (import
// with recompute instead), a truncated, altered or foreign file
// (session_file.h), an id already in use. The owner is kept; only root
// (caller 0) may import a session owned by another uid (PermissionDenied).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "common/error.h"
#include "service/model_host.h"

namespace qwen3 {

// A caller acting for another uid; adapters map it to PERMISSION_DENIED / 403.
class PermissionDenied : public Error {
 public:
  explicit PermissionDenied(const std::string& m) : Error(m, ErrorKind::failed_precondition) {}
};

struct ExportRequest {
  std::string session_id;
  bool include_kv = true;
  uint32_t caller = 0;       // whose sessions it may see (0: root, any)
};

// The export file's bytes. Holds the session (like a request) while reading
// it: a busy session is failed_precondition. Throws not_found for a session
// the caller cannot see, invalid_argument for KV the backend cannot export.
std::string export_session(Runtime& rt, const ExportRequest& req);

struct ImportRequest {
  std::string session_id;    // "" : the id in the file
  bool recompute = false;    // ignore the file's KV, recompute it from the tokens
  uint32_t caller = 0;
  std::function<bool()> cancelled;
};

struct ImportOutcome {
  SessionSnapshot session;
  bool kv_imported = false;      // the blocks were written (else recomputed)
  int recomputed_positions = 0;  // tokens fed through the engine
};

ImportOutcome import_session(Runtime& rt, std::string_view file, const ImportRequest& req);

}  // namespace qwen3
