// `qwen3-bpf sessions list|show ID|rm ID|create`.
#include <cstdio>
#include <iostream>

#include "cli_error.h"
#include "command.h"
#include "format.h"
#include "json_output.h"

namespace qwen3::cli {

namespace v1 = qwen3bpf::v1;

namespace {

void print_session(const v1::SessionInfo& s) {
  std::printf("session:      %s%s\n", s.session_id().c_str(), s.busy() ? "  (busy)" : "");
  std::printf("positions:    %d of %d (history %d tokens)\n", s.positions(), s.max_context(), s.history_tokens());
  std::printf("KV memory:    %s\n", format_bytes(s.memory_bytes()).c_str());
  std::printf("created:      %s\n", format_unix_ms(s.created_unix_ms()).c_str());
  std::printf("last used:    %s\n", format_unix_ms(s.last_used_unix_ms()).c_str());
  std::printf("expires:      %s\n", s.expires_unix_ms() ? format_unix_ms(s.expires_unix_ms()).c_str() : "never");
}

int run_sessions(Command& cmd) {
  const Args& a = cmd.args();
  const auto& pos = a.positional();
  std::string action = pos.empty() ? "list" : pos[0];
  auto& client = cmd.client();

  if (action == "list" || action == "ls") {
    if (pos.size() > 1) throw usage_error("sessions list takes no arguments");
    v1::ListSessionsResponse resp;
    grpc::ClientContext ctx;
    client.check(client.stub().ListSessions(&ctx, v1::ListSessionsRequest{}, &resp), "list sessions");
    if (cmd.json()) {
      std::cout << to_json(resp) << "\n";
      return kExitOk;
    }
    if (resp.sessions().empty()) {
      std::printf("no sessions\n");
      return kExitOk;
    }
    std::printf("%-36s  %9s  %7s  %10s  %-4s  %s\n", "SESSION", "POSITIONS", "CONTEXT", "KV", "BUSY", "LAST USED");
    for (const auto& s : resp.sessions())
      std::printf("%-36s  %9d  %7d  %10s  %-4s  %s\n", s.session_id().c_str(), s.positions(), s.max_context(),
                  format_bytes(s.memory_bytes()).c_str(), s.busy() ? "yes" : "no",
                  format_unix_ms(s.last_used_unix_ms()).c_str());
    return kExitOk;
  }
  if (action == "show") {
    if (pos.size() != 2) throw usage_error("usage: qwen3-bpf sessions show ID");
    v1::GetSessionRequest req;
    req.set_session_id(pos[1]);
    v1::GetSessionResponse resp;
    grpc::ClientContext ctx;
    client.check(client.stub().GetSession(&ctx, req, &resp), "show session");
    if (cmd.json()) std::cout << to_json(resp) << "\n";
    else print_session(resp.session());
    return kExitOk;
  }
  if (action == "rm" || action == "delete") {
    if (pos.size() < 2) throw usage_error("usage: qwen3-bpf sessions rm ID...");
    for (size_t i = 1; i < pos.size(); ++i) {
      v1::DeleteSessionRequest req;
      req.set_session_id(pos[i]);
      v1::DeleteSessionResponse resp;
      grpc::ClientContext ctx;
      client.check(client.stub().DeleteSession(&ctx, req, &resp), "delete session " + pos[i]);
      if (cmd.json()) std::cout << to_json(resp) << "\n";
      else std::printf("deleted %s (freed %s)\n", pos[i].c_str(), format_bytes(resp.freed_bytes()).c_str());
    }
    return kExitOk;
  }
  if (action == "create" || action == "new") {
    if (pos.size() > 1) throw usage_error("sessions create takes options only (--max-context, --id)");
    v1::CreateSessionRequest req;
    if (auto n = a.get_int("max-context", 1, 1 << 24)) req.set_max_context(static_cast<int32_t>(*n));
    if (auto id = a.get("id")) req.set_session_id(*id);
    v1::CreateSessionResponse resp;
    grpc::ClientContext ctx;
    client.check(client.stub().CreateSession(&ctx, req, &resp), "create session");
    if (cmd.json()) std::cout << to_json(resp) << "\n";
    else std::printf("%s\n", resp.session().session_id().c_str());
    return kExitOk;
  }
  throw usage_error("unknown sessions action '" + action + "' (list, show, rm, create)");
}

}  // namespace

CommandInfo sessions_command() {
  return CommandInfo{"sessions",
                     "list | show ID | rm ID... | create [--max-context N]",
                     "sessions list | show ID | rm ID... | create [--max-context N] [--id ID]",
                     "Manages KV sessions. `create` prints the new session's id (so S=$(qwen3-bpf sessions create)\n"
                     "works); continue it with `qwen3-bpf generate --session $S ...`.",
                     {
                         {"max-context", true, false, "N  create: context of the session (default: the daemon's)"},
                         {"id", true, false, "ID  create: choose the id ([A-Za-z0-9_.-], 1..64 chars)"},
                     },
                     run_sessions,
                     {"session"}};
}

}  // namespace qwen3::cli
