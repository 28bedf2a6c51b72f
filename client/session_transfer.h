// Moving sessions from the command line: export and import over gRPC
// (ExportSession / ImportSession, streamed in 1 MiB chunks), and import over
// the HTTP API (POST /v1/sessions/import) for a daemon known by its URL.
#pragma once

#include <string>

#include "daemon_client.h"

namespace qwen3::cli {

// The daemon names the HTTP API's automatic prompt caches so
// (daemon/service/inference.h, kPromptCachePrefix): `sessions list` hides
// them and `drain` leaves them behind unless asked for all.
inline constexpr const char* kPromptCachePrefix = "prompt-cache-";

// The export file's bytes. Throws CliError.
std::string export_session(DaemonClient& client, const std::string& id, bool with_kv);

struct Imported {
  std::string session_id;
  int positions = 0;
  bool kv_imported = false;
  int recomputed_positions = 0;
};

// Into the daemon behind `client`. Throws CliError (its code: the status name).
Imported import_session(DaemonClient& client, const std::string& file, const std::string& rename, bool recompute);

// Into the daemon at `url` (http://HOST:PORT, HOST an IPv4 or name) with the
// bearer token `token`, the request carrying `X-Session-Id: <session_id>` so
// that a gateway hashing that header (deploy/haproxy) sends it to the daemon
// that will serve the session. Throws CliError with the daemon's message.
Imported import_session_http(const std::string& url, const std::string& token, const std::string& file,
                             const std::string& session_id, bool recompute);

}  // namespace qwen3::cli
