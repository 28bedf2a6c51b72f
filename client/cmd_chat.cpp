// `qwen3-bpf chat`: an interactive conversation kept in a daemon session.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_error.h"
#include "command.h"
#include "format.h"
#include "generation.h"
#include "input.h"
#include "json_output.h"
#include "line_reader.h"

namespace qwen3::cli {

namespace v1 = qwen3bpf::v1;

namespace {

const char* kChatHelp =
    "  /help            this list\n"
    "  /bye, /quit, /exit  end the chat (so does Ctrl-D; Ctrl-C at the prompt too)\n"
    "  /clear           a new conversation (a new session; /reset too)\n"
    "  /session         the session's id, positions and KV memory\n"
    "  /stats           token counts and timings of the last reply\n"
    "  //text           send \"/text\" as a message\n";

// The conversation: its daemon session (created here unless --session named
// one, which is kept) and the messages so far.
class Chat {
 public:
  explicit Chat(Command& cmd) : cmd_(cmd), client_(cmd.client()), session_id_(cmd.args().get_or("session", "")) {
    own_session_ = session_id_.empty();
    if (auto sys = cmd.args().get("system")) system_ = require_utf8(*sys, "--system");
    if (own_session_) create_session();
    else show_session();  // an unknown --session fails here, before the first message
    reset_history();
  }
  ~Chat() { delete_session(); }

  const std::string& session_id() const { return session_id_; }

  void clear() {
    delete_session();
    if (own_session_) create_session();
    reset_history();
  }

  v1::SessionInfo show_session() {
    v1::GetSessionRequest req;
    req.set_session_id(session_id_);
    v1::GetSessionResponse resp;
    grpc::ClientContext ctx;
    client_.check(client_.stub().GetSession(&ctx, req, &resp), "session " + session_id_);
    return resp.session();
  }

  // The first turn sends the conversation from its start (the system message
  // too) and replaces whatever the session held; every later turn sends only
  // its user message in APPEND mode: the daemon renders it after the tokens
  // the session holds, the previous reply as generated, so the turn computes
  // only its own tokens (the template would drop an earlier reply's think
  // block from a re-rendered conversation, and all of that reply would be
  // computed again).
  StreamOutcome say(const std::string& text, StreamOutput output, ThinkDisplay& think) {
    v1::GenerateRequest request;
    if (!started_ && !system_.empty()) add_message(request, "system", system_);
    add_message(request, "user", text);
    request.set_enable_thinking(cmd_.args().has("think"));
    request.set_session_id(session_id_);
    request.set_history_mode(started_ ? v1::HISTORY_MODE_APPEND : v1::HISTORY_MODE_FULL);
    apply_generation_options(cmd_.args(), request);
    StreamOutcome out = stream_generate(client_, request, output, &think);
    started_ = true;
    return out;
  }

 private:
  void create_session() {
    v1::CreateSessionRequest req;
    if (auto n = cmd_.args().get_int("max-context", 1, 1 << 24)) req.set_max_context(static_cast<int32_t>(*n));
    v1::CreateSessionResponse resp;
    grpc::ClientContext ctx;
    client_.check(client_.stub().CreateSession(&ctx, req, &resp), "create session");
    session_id_ = resp.session().session_id();
  }
  void delete_session() {
    if (!own_session_ || session_id_.empty()) return;
    v1::DeleteSessionRequest req;
    req.set_session_id(session_id_);
    v1::DeleteSessionResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    (void)client_.stub().DeleteSession(&ctx, req, &resp);
    session_id_.clear();
  }
  void reset_history() { started_ = false; }
  static void add_message(v1::GenerateRequest& request, const std::string& role, const std::string& content) {
    auto* m = request.add_messages();
    m->set_role(role);
    m->set_content(content);
  }

  Command& cmd_;
  DaemonClient& client_;
  std::string session_id_;
  bool own_session_ = true;
  std::string system_;
  bool started_ = false;  // a turn of this conversation is in the session
};

int run_chat(Command& cmd) {
  const Args& a = cmd.args();
  if (!a.positional().empty()) throw usage_error("chat takes no arguments; type the messages on stdin");
  if (a.has("think") && a.has("no-think")) throw usage_error("--think and --no-think exclude each other");
  v1::GenerateRequest check;
  apply_generation_options(a, check);  // bad sampling options fail now, not at the first message
  const bool interactive = isatty(STDIN_FILENO) == 1;
  Chat chat(cmd);
  LineReader reader(interactive);
  if (interactive)
    std::cerr << "chat in session " << chat.session_id() << "; /help lists the commands, /bye or Ctrl-D ends\n";

  std::optional<StreamOutcome> last;
  while (auto line = reader.read(">>> ")) {
    if (line->empty()) continue;
    std::string text = *line;
    if (text[0] == '/' && text.compare(0, 2, "//") != 0) {
      const std::string word = text.substr(0, text.find(' '));
      if (word == "/bye" || word == "/quit" || word == "/exit") break;
      if (word == "/help" || word == "/?") {
        std::cerr << kChatHelp;
      } else if (word == "/clear" || word == "/reset") {
        chat.clear();
        std::cerr << "(new conversation in session " << chat.session_id() << ")\n";
      } else if (word == "/session") {
        v1::SessionInfo s = chat.show_session();
        std::cerr << "session " << s.session_id() << ": " << s.positions() << " of " << s.max_context()
                  << " positions, KV " << format_bytes(s.memory_bytes()) << "\n";
      } else if (word == "/stats") {
        std::cerr << (last ? describe_outcome(*last) : "(no reply yet)") << "\n";
      } else {
        std::cerr << "unknown command " << word << " (/help lists them; //text sends \"/text\")\n";
      }
      continue;
    }
    if (text.compare(0, 2, "//") == 0) text = text.substr(1);
    require_utf8(text, "the message");
    // JSON mode prints one object per turn instead of the raw stream.
    ThinkDisplay think(ThinkDisplay::for_stdout());
    StreamOutcome out = chat.say(text, cmd.json() ? StreamOutput::silent : StreamOutput::text, think);
    if (cmd.json()) {
      nlohmann::json turn = {
          {"user", text},
          {"assistant", think.answer()},
          {"finish_reason", finish_reason_name(out.final_message.finish_reason())},
          {"session_id", chat.session_id()},
          {"usage", to_json_value(out.final_message.usage())},
      };
      if (a.has("think")) turn["thinking"] = think.thinking();
      std::cout << dump_json(turn) << "\n" << std::flush;
    } else {
      if (think.answer().empty() || think.answer().back() != '\n') std::cout << "\n";
      std::cout << std::flush;
    }
    if (a.has("stats") || out.interrupted) std::cerr << describe_outcome(out) << "\n";
    last = std::move(out);
  }
  if (interactive) std::cerr << "\n";  // the prompt line ended by Ctrl-D or Ctrl-C
  // ~Chat frees the session before the process exits.
  return reader.interrupted() ? kExitInterrupted : kExitOk;
}

}  // namespace

CommandInfo chat_command() {
  CommandInfo info{"chat",
                   "interactive chat in a session (line editing and history on a terminal)",
                   "chat [options]",
                   "Interactive chat: each line is a user turn; the reply streams back. The conversation is kept\n"
                   "in a daemon session (created for the chat and deleted at the end, unless --session names\n"
                   "one), so each turn only computes its new tokens (the user message and the template's framing).\n"
                   "Thinking is off unless --think; its text is then shown dimmed (on a terminal) or between\n"
                   "[thinking] and [/thinking] lines. On a terminal lines can be edited and the\n"
                   "Up arrow recalls earlier ones (~/.qwen3_bpf_history). Piped stdin works too.\n"
                   "Commands (not sent to the model):\n" +
                       std::string(kChatHelp),
                   {
                       {"session", true, false, "ID  use (and keep) this existing session"},
                       {"max-context", true, false, "N  context of the chat's session (default: the daemon's)"},
                       {"system", true, false, "TEXT  system message"},
                       {"think", false, false, "let the model think first (shown dimmed, or marked when not a terminal)"},
                       {"no-think", false, false, "no thinking (the default: the template's empty think block)"},
                   },
                   run_chat};
  for (auto& o : generation_options()) info.options.push_back(o);
  return info;
}

}  // namespace qwen3::cli
