// `qwen3-bpf drain --to SOCKET|URL`: moves every session of this daemon to
// another one (export with KV, import, delete here), for maintenance. Run it
// after the gateway stopped sending this daemon traffic (docs/deploy.md).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "cli_error.h"
#include "command.h"
#include "session_transfer.h"

namespace qwen3::cli {

namespace v1 = qwen3bpf::v1;

namespace {

std::string read_token(const Args& a) {
  std::string path = a.get_or("token-file", "");
  if (path.empty()) {
    const char* env = std::getenv("QWEN3_BPF_TOKEN");
    return env ? env : "";
  }
  std::ifstream in(path);
  if (!in) throw usage_error("cannot read --token-file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string t = ss.str();
  while (!t.empty() && (t.back() == '\n' || t.back() == '\r' || t.back() == ' ')) t.pop_back();
  return t;
}

// Export, retrying a busy session for a while (a request may still be ending).
std::string export_when_idle(DaemonClient& from, const std::string& id, bool with_kv) {
  for (int attempt = 0;; ++attempt) {
    try {
      return export_session(from, id, with_kv);
    } catch (const CliError& e) {
      if (e.code() != "failed_precondition" || attempt >= 40) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
  }
}

int run_drain(Command& cmd) {
  const Args& a = cmd.args();
  const auto to = a.get("to");
  if (!to || !cmd.args().positional().empty()) throw usage_error("usage: qwen3-bpf drain --to SOCKET|http://HOST:PORT");
  const bool http = to->rfind("http://", 0) == 0;
  const std::string token = http ? read_token(a) : "";
  std::unique_ptr<DaemonClient> target;
  if (!http) target = std::make_unique<DaemonClient>(resolve_socket_path(*to));
  if (!http && target->socket_path() == cmd.client().socket_path())
    throw usage_error("--to names this daemon's own socket: drain moves sessions to another daemon");
  DaemonClient& from = cmd.client();

  v1::ListSessionsResponse list;
  {
    grpc::ClientContext ctx;
    from.check(from.stub().ListSessions(&ctx, v1::ListSessionsRequest{}, &list), "list sessions");
  }
  const bool with_kv = !a.has("no-kv");
  int moved = 0, failed = 0, skipped = 0;
  for (const auto& s : list.sessions()) {
    const std::string& id = s.session_id();
    if (id.rfind(kPromptCachePrefix, 0) == 0 && !a.has("all")) {
      ++skipped;
      continue;
    }
    try {
      std::string file;
      try {
        file = export_when_idle(from, id, with_kv);
      } catch (const CliError& e) {
        // A backend whose KV cannot be exported (the reference backend): the tokens move.
        if (!with_kv || std::string(e.what()).find("without KV") == std::string::npos) throw;
        file = export_when_idle(from, id, false);
      }
      Imported r;
      auto import = [&](bool recompute) {
        return http ? import_session_http(*to, token, file, id, recompute) : import_session(*target, file, "", recompute);
      };
      try {
        r = import(a.has("recompute"));
      } catch (const CliError& e) {
        // Another precision or K/V layout there: the tokens still move, the KV is computed again.
        if (std::string(e.what()).find("import it with recompute") == std::string::npos) throw;
        r = import(true);
      }
      grpc::ClientContext ctx;
      v1::DeleteSessionRequest del;
      del.set_session_id(id);
      v1::DeleteSessionResponse freed;
      from.check(from.stub().DeleteSession(&ctx, del, &freed), "delete session " + id + " after moving it");
      ++moved;
      std::printf("moved %s (%d positions, %s)\n", id.c_str(), r.positions,
                  r.kv_imported ? "KV as exported" : "KV recomputed");
    } catch (const CliError& e) {
      ++failed;
      std::fprintf(stderr, "qwen3-bpf: session %s not moved (it stays here): %s\n", id.c_str(), e.what());
    }
  }
  std::printf("drained: %d moved, %d failed%s\n", moved, failed,
              skipped ? (", " + std::to_string(skipped) + " prompt caches left (--all moves them)").c_str() : "");
  return failed ? kExitFailed : kExitOk;
}

}  // namespace

CommandInfo drain_command() {
  return CommandInfo{"drain",
                     "move every session to another daemon (--to SOCKET|URL)",
                     "drain --to SOCKET|http://HOST:PORT [--token-file FILE] [--no-kv] [--recompute] [--all]",
                     "Moves every session this daemon holds (all of them as root, else yours) to another daemon:\n"
                     "export with KV, import there (owner kept), delete here. A session that cannot move stays\n"
                     "and is reported (exit 1). Stop sending this daemon new requests first (docs/deploy.md).",
                     {
                         {"to", true, false, "SOCKET|URL  the other daemon: its gRPC socket, or its HTTP URL"},
                         {"token-file", true, false, "FILE  the bearer token for a URL (else $QWEN3_BPF_TOKEN)"},
                         {"no-kv", false, false, "move tokens only (the other daemon recomputes the KV)"},
                         {"recompute", false, false, "the other daemon recomputes the KV even when it could take it"},
                         {"all", false, false, "also move the HTTP API's prompt caches (prompt-cache-UID-N)"},
                     },
                     run_drain};
}

}  // namespace qwen3::cli
