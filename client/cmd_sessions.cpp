// `qwen3-bpf sessions list|show ID|rm ID|create|export ID -o FILE|import FILE`.
#include <pwd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <iostream>
#include <string>

#include "cli_error.h"
#include "command.h"
#include "format.h"
#include "json_output.h"
#include "session_transfer.h"

namespace qwen3::cli {

namespace v1 = qwen3bpf::v1;

namespace {

// The user name of a uid, or the number when it has none.
std::string owner_name(uint32_t uid) {
  if (const passwd* pw = getpwuid(uid)) return pw->pw_name;
  return std::to_string(uid);
}

void print_session(const v1::SessionInfo& s) {
  std::printf("session:      %s%s\n", s.session_id().c_str(), s.busy() ? "  (busy)" : "");
  std::printf("owner:        %s (uid %u)\n", owner_name(s.owner_uid()).c_str(), s.owner_uid());
  std::printf("positions:    %d of %d (history %d tokens)\n", s.positions(), s.max_context(), s.history_tokens());
  std::printf("KV memory:    %s\n", format_bytes(s.memory_bytes()).c_str());
  std::printf("created:      %s\n", format_unix_ms(s.created_unix_ms()).c_str());
  std::printf("last used:    %s\n", format_unix_ms(s.last_used_unix_ms()).c_str());
  std::printf("expires:      %s\n", s.expires_unix_ms() ? format_unix_ms(s.expires_unix_ms()).c_str() : "never");
}

// sessions export ID -o FILE [--no-kv]: the export file (docs/api.md, "Moving sessions"); "-o -" is stdout.
int export_action(Command& cmd) {
  const auto& pos = cmd.args().positional();
  const auto out = cmd.args().get("output");
  if (pos.size() != 2 || !out) throw usage_error("usage: qwen3-bpf sessions export ID -o FILE [--no-kv]");
  const std::string file = export_session(cmd.client(), pos[1], !cmd.args().has("no-kv"));
  if (*out == "-") {
    std::cout.write(file.data(), static_cast<std::streamsize>(file.size()));
    std::cout.flush();
    return kExitOk;
  }
  const std::string tmp = *out + ".part";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(file.data(), static_cast<std::streamsize>(file.size()));
    f.close();
    if (!f) throw CliError("cannot write " + tmp + ": " + std::strerror(errno), kExitFailed);
  }
  if (std::rename(tmp.c_str(), out->c_str()) != 0)
    throw CliError("cannot rename " + tmp + " to " + *out + ": " + std::strerror(errno), kExitFailed);
  if (!cmd.json()) std::fprintf(stderr, "exported %s to %s (%s%s)\n", pos[1].c_str(), out->c_str(),
                                format_bytes(file.size()).c_str(), cmd.args().has("no-kv") ? ", tokens only" : ", with KV");
  return kExitOk;
}

// sessions import FILE [--id NEW] [--recompute]; FILE "-" is stdin.
int import_action(Command& cmd) {
  const auto& pos = cmd.args().positional();
  if (pos.size() != 2) throw usage_error("usage: qwen3-bpf sessions import FILE [--id NEW_ID] [--recompute]");
  std::string file;
  {
    std::ifstream in;
    std::istream* src = &std::cin;
    if (pos[1] != "-") {
      in.open(pos[1], std::ios::binary);
      if (!in) throw CliError("cannot read " + pos[1] + ": " + std::strerror(errno), kExitUsage);
      src = &in;
    }
    file.assign(std::istreambuf_iterator<char>(*src), std::istreambuf_iterator<char>());
  }
  const Imported r = import_session(cmd.client(), file, cmd.args().get_or("id", ""), cmd.args().has("recompute"));
  if (cmd.json()) {
    std::printf("{\"session_id\": \"%s\", \"positions\": %d, \"kv_imported\": %s, \"recomputed_positions\": %d}\n",
                r.session_id.c_str(), r.positions, r.kv_imported ? "true" : "false", r.recomputed_positions);
  } else {
    std::printf("%s\n", r.session_id.c_str());
    std::fprintf(stderr, "imported %s: %d positions, %s\n", r.session_id.c_str(), r.positions,
                 r.kv_imported ? "KV as exported" : ("KV recomputed from " + std::to_string(r.recomputed_positions) + " tokens").c_str());
  }
  return kExitOk;
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
    // The HTTP API's prompt caches (one per recent caller prefix, 16 MiB
    // each by default) are listed with --all, otherwise counted in one line.
    const bool all = a.has("all");
    int hidden = 0;
    uint64_t hidden_bytes = 0;
    bool header = false;
    for (const auto& s : resp.sessions()) {
      if (!all && s.session_id().rfind(kPromptCachePrefix, 0) == 0) {
        ++hidden;
        hidden_bytes += s.memory_bytes();
        continue;
      }
      if (!header)
        std::printf("%-36s  %-10s  %9s  %7s  %10s  %-4s  %s\n", "SESSION", "OWNER", "POSITIONS", "CONTEXT", "KV", "BUSY",
                    "LAST USED");
      header = true;
      std::printf("%-36s  %-10s  %9d  %7d  %10s  %-4s  %s\n", s.session_id().c_str(), owner_name(s.owner_uid()).c_str(),
                  s.positions(), s.max_context(), format_bytes(s.memory_bytes()).c_str(), s.busy() ? "yes" : "no",
                  format_unix_ms(s.last_used_unix_ms()).c_str());
    }
    if (!header && hidden == 0) std::printf("no sessions\n");
    if (hidden > 0)
      std::printf("(%d HTTP prompt cache%s, %s, not shown; --all lists them)\n", hidden, hidden == 1 ? "" : "s",
                  format_bytes(hidden_bytes).c_str());
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
  if (action == "export") return export_action(cmd);
  if (action == "import") return import_action(cmd);
  throw usage_error("unknown sessions action '" + action + "' (list, show, rm, create, export, import)");
}

}  // namespace

CommandInfo sessions_command() {
  return CommandInfo{"sessions",
                     "list | show ID | rm ID... | create [--max-context N] | export ID -o FILE | import FILE",
                     "sessions list [--all] | show ID | rm ID... | create [--max-context N] [--id ID]\n"
                     "       | export ID -o FILE [--no-kv] | import FILE [--id ID] [--recompute]",
                     "Manages KV sessions. `create` prints the new session's id (so S=$(qwen3-bpf sessions create)\n"
                     "works); continue it with `qwen3-bpf generate --session $S ...`. `export` writes a session\n"
                     "(tokens, context, owner and KV blocks) to a checksummed file that `import` brings into\n"
                     "another daemon serving the same model; it continues there exactly as it would have here.",
                     {
                         {"max-context", true, false, "N  create: context of the session (default: the daemon's)"},
                         {"id", true, false, "ID  create: choose the id ([A-Za-z0-9_.-], 1..64 chars); import: the new id"},
                         {"output", true, false, "FILE  export: where to write it (- for stdout)", 'o'},
                         {"no-kv", false, false, "export: tokens only (the importing daemon recomputes the KV)"},
                         {"recompute", false, false, "import: ignore the file's KV and recompute it from the tokens"},
                         {"all", false, false, "list: the HTTP API's prompt caches too (prompt-cache-UID-N)"},
                     },
                     run_sessions,
                     {"session"}};
}

}  // namespace qwen3::cli
