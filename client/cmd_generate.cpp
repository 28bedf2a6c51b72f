// `qwen3-bpf generate` and `qwen3-bpf chat`.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli_error.h"
#include "command.h"
#include "generation.h"
#include "input.h"
#include "interrupt.h"
#include "json_output.h"

namespace qwen3::cli {

namespace v1 = qwen3bpf::v1;

int run_generate(const std::vector<std::string>& argv) {
  CommandInfo info{
      "generate", "generate [options] PROMPT...",
      "Streams a completion of PROMPT (the words are joined with spaces; '-' or no PROMPT reads stdin).\n"
      "With --chat the Qwen3 chat template is applied to PROMPT as a user turn.",
      {
          {"session", true, false, "ID  continue this session (only new tokens are computed)"},
          {"append", false, false, "with --session: PROMPT follows what the session holds (default: PROMPT is the whole text)"},
          {"chat", false, false, "apply the chat template (PROMPT is the user message)"},
          {"system", true, false, "TEXT  system message (implies --chat)"},
          {"no-think", false, false, "chat template with thinking disabled (implies --chat)"},
          {"ids", false, false, "PROMPT is a list of token ids"},
      }};
  for (auto& o : generation_options()) info.options.push_back(o);
  Command cmd(info, argv);
  const Args& a = cmd.args();

  v1::GenerateRequest request;
  std::string prompt = text_from_args_or_stdin(a.positional(), a.has("ids") ? "token ids" : "prompt");
  bool chat = a.has("chat") || a.has("system") || a.has("no-think");
  if (a.has("ids")) {
    if (chat) throw usage_error("--ids cannot be combined with the chat template");
    for (int32_t id : parse_id_list({prompt})) request.add_token_ids(id);
    if (request.token_ids().empty()) throw usage_error("--ids: no token ids given");
  } else if (chat) {
    if (auto sys = a.get("system")) {
      auto* m = request.add_messages();
      m->set_role("system");
      m->set_content(*sys);
    }
    auto* m = request.add_messages();
    m->set_role("user");
    m->set_content(prompt);
    request.set_enable_thinking(!a.has("no-think"));
  } else {
    if (prompt.empty()) throw usage_error("empty prompt (give PROMPT, or text on stdin)");
    request.set_prompt(prompt);
  }
  if (auto s = a.get("session")) request.set_session_id(*s);
  if (a.has("append")) {
    if (!a.has("session")) throw usage_error("--append needs --session");
    request.set_history_mode(v1::HISTORY_MODE_APPEND);
  }
  apply_generation_options(a, request);

  StreamOutcome out = stream_generate(cmd.client(), request, cmd.json() ? StreamOutput::json_lines : StreamOutput::text);
  if (!cmd.json() && !out.text.empty() && out.text.back() != '\n') std::cout << "\n" << std::flush;
  if (a.has("stats") || out.interrupted) std::cerr << describe_final(out.final_message) << "\n";
  if (out.interrupted) return kExitInterrupted;
  if (out.final_message.finish_reason() == v1::FINISH_REASON_CANCELLED) {
    // Not our Ctrl-C: the daemon ended the stream (it is stopping).
    std::cerr << "qwen3-bpf generate: the daemon cancelled the generation (is it stopping?)\n";
    return kExitUnavailable;
  }
  return kExitOk;
}

int run_chat(const std::vector<std::string>& argv) {
  CommandInfo info{
      "chat", "chat [options]",
      "Interactive chat: each line read from stdin is a user turn; the reply streams back. The\n"
      "conversation is kept in a daemon session (created for the chat and deleted at the end,\n"
      "unless --session names one), so each turn only computes the new tokens.\n"
      "Lines '/reset' (new conversation) and '/exit' are commands. Works with piped stdin too.",
      {
          {"session", true, false, "ID  use (and keep) this existing session"},
          {"max-context", true, false, "N  context of the chat's session (default: the daemon's)"},
          {"system", true, false, "TEXT  system message"},
          {"no-think", false, false, "disable thinking (empty <think></think> block)"},
      }};
  for (auto& o : generation_options()) info.options.push_back(o);
  Command cmd(info, argv);
  const Args& a = cmd.args();
  if (!a.positional().empty()) throw usage_error("chat takes no arguments; type the messages on stdin");
  DaemonClient& client = cmd.client();
  const bool interactive = isatty(STDIN_FILENO);

  std::string session_id = a.get_or("session", "");
  const bool own_session = session_id.empty();
  auto create_session = [&] {
    v1::CreateSessionRequest req;
    if (auto n = a.get_int("max-context", 1, 1 << 24)) req.set_max_context(static_cast<int32_t>(*n));
    v1::CreateSessionResponse resp;
    grpc::ClientContext ctx;
    client.check(client.stub().CreateSession(&ctx, req, &resp), "create session");
    session_id = resp.session().session_id();
  };
  auto delete_session = [&] {
    if (!own_session || session_id.empty()) return;
    v1::DeleteSessionRequest req;
    req.set_session_id(session_id);
    v1::DeleteSessionResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    (void)client.stub().DeleteSession(&ctx, req, &resp);
  };
  if (own_session) create_session();

  std::vector<std::pair<std::string, std::string>> history;  // role, content
  if (auto sys = a.get("system")) history.emplace_back("system", *sys);
  const auto initial_history = history;
  if (interactive)
    std::cerr << "chat session " << session_id << " — type a message; /reset starts over, /exit or Ctrl-D ends\n";

  std::string line;
  for (;;) {
    if (interactive) std::cerr << "> " << std::flush;
    bool got_line;
    {
      // Ctrl-C while waiting for input ends the chat (and frees its session).
      CancelOnInterrupt guard([&] {
        delete_session();
        std::_Exit(kExitInterrupted);
      });
      got_line = static_cast<bool>(std::getline(std::cin, line));
    }
    if (!got_line) break;
    if (line.empty()) continue;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      history = initial_history;
      delete_session();
      if (own_session) create_session();
      if (interactive) std::cerr << "(new conversation, session " << session_id << ")\n";
      continue;
    }
    history.emplace_back("user", line);
    v1::GenerateRequest request;
    for (const auto& [role, content] : history) {
      auto* m = request.add_messages();
      m->set_role(role);
      m->set_content(content);
    }
    request.set_enable_thinking(!a.has("no-think"));
    request.set_session_id(session_id);
    request.set_history_mode(v1::HISTORY_MODE_FULL);
    apply_generation_options(a, request);
    StreamOutcome out;
    try {
      // JSON mode prints one object per turn instead of the raw stream.
      out = stream_generate(client, request, cmd.json() ? StreamOutput::silent : StreamOutput::text);
    } catch (...) {
      delete_session();
      throw;
    }
    history.emplace_back("assistant", out.text);
    if (cmd.json()) {
      nlohmann::json turn = {
          {"user", line},
          {"assistant", out.text},
          {"finish_reason", finish_reason_name(out.final_message.finish_reason())},
          {"session_id", session_id},
          {"usage", nlohmann::json::parse(to_json(out.final_message.usage()))},
      };
      std::cout << turn.dump() << "\n" << std::flush;
    } else {
      if (out.text.empty() || out.text.back() != '\n') std::cout << "\n";
      std::cout << std::flush;
    }
    if (a.has("stats") || out.interrupted) std::cerr << describe_final(out.final_message) << "\n";
  }
  delete_session();
  return kExitOk;
}

}  // namespace qwen3::cli
