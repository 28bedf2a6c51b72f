// `qwen3-bpf generate`.
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

namespace {

int run_generate(Command& cmd) {
  const Args& a = cmd.args();

  v1::GenerateRequest request;
  std::string prompt = text_from_args_or_stdin(a.positional(), a.has("ids") ? "token ids" : "prompt");
  require_utf8(prompt, "the prompt");
  if (a.has("think") && a.has("no-think")) throw usage_error("--think and --no-think exclude each other");
  bool chat = a.has("chat") || a.has("system") || a.has("no-think") || a.has("think");
  if (a.has("ids")) {
    if (chat) throw usage_error("--ids cannot be combined with the chat template");
    for (int32_t id : parse_id_list({prompt})) request.add_token_ids(id);
    if (request.token_ids().empty()) throw usage_error("--ids: no token ids given");
  } else if (chat) {
    if (auto sys = a.get("system")) {
      auto* m = request.add_messages();
      m->set_role("system");
      m->set_content(require_utf8(*sys, "--system"));
    }
    auto* m = request.add_messages();
    m->set_role("user");
    m->set_content(prompt);
    request.set_enable_thinking(a.has("think"));
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

  // A chat reply's thinking is shown apart (ThinkDisplay), never as raw tags.
  ThinkDisplay think(ThinkDisplay::for_stdout());
  StreamOutcome out = stream_generate(cmd.client(), request, cmd.json() ? StreamOutput::json_lines : StreamOutput::text,
                                      chat && !cmd.json() ? &think : nullptr);
  const std::string& shown = chat ? think.answer() : out.text;
  if (!cmd.json() && !shown.empty() && shown.back() != '\n') std::cout << "\n" << std::flush;
  // A cancelled stream gets no final message from the daemon: under --json
  // the last line is then this client's own (finish_reason "cancelled", the
  // completion tokens received), so a script always finds one.
  if (out.interrupted && cmd.json()) std::cout << to_json(out.final_message) << "\n" << std::flush;
  if (a.has("stats") || out.interrupted) std::cerr << describe_outcome(out) << "\n";
  if (out.interrupted) return kExitInterrupted;
  if (out.final_message.finish_reason() == v1::FINISH_REASON_CANCELLED) {
    // Not our Ctrl-C: the daemon ended the stream (it is stopping).
    throw CliError("the daemon cancelled the generation (is it stopping?)", kExitUnavailable, "cancelled");
  }
  return kExitOk;
}

}  // namespace

CommandInfo generate_command() {
  CommandInfo info{"generate",
                   "stream a completion (--chat, sampling and stop options, --session)",
                   "generate [options] PROMPT...",
                   "Streams a completion of PROMPT (the words are joined with spaces; '-' or no PROMPT reads stdin).\n"
                   "With --chat the Qwen3 chat template is applied to PROMPT as a user turn (thinking off unless\n"
                   "--think). With --session ID, PROMPT replaces the session's history (the prefix it shares with\n"
                   "the history is reused, the rest computed); with --append it follows the history, and only its\n"
                   "tokens are computed.",
                   {
                       {"session", true, false,
                        "ID  run in this session: PROMPT replaces its history (the shared prefix is reused) unless --append"},
                       {"append", false, false,
                        "with --session: PROMPT follows what the session holds (default: PROMPT is the whole text)"},
                       {"chat", false, false, "apply the chat template (PROMPT is the user message)"},
                       {"system", true, false, "TEXT  system message (implies --chat)"},
                       {"think", false, false, "let the model think first, shown dimmed or marked (implies --chat)"},
                       {"no-think", false, false, "chat template without thinking, the default (implies --chat)"},
                       {"ids", false, false, "PROMPT is a list of token ids"},
                   },
                   run_generate};
  for (auto& o : generation_options()) info.options.push_back(o);
  return info;
}

}  // namespace qwen3::cli
