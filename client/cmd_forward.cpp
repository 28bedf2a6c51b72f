// `qwen3-bpf forward`: one forward pass, the next-token candidates.
#include <cstdio>
#include <iostream>
#include <iterator>

#include "cli_error.h"
#include "command.h"
#include "format.h"
#include "input.h"
#include "json_output.h"

namespace qwen3::cli {

namespace v1 = qwen3bpf::v1;

namespace {

int run_forward(Command& cmd) {
  const Args& a = cmd.args();
  v1::ForwardRequest req;
  const std::string text = text_from_args_or_stdin(a.positional(), a.has("ids") ? "token ids" : "text");
  if (a.has("ids")) {
    for (int32_t id : parse_id_list({text})) req.add_token_ids(id);
    if (req.token_ids().empty()) throw usage_error("--ids: no token ids given");
  } else {
    if (text.empty()) throw usage_error("empty input (give TEXT, or --ids)");
    req.set_text(require_utf8(text, "the text"));
  }
  if (auto k = a.get_int("top-k", 1, 1 << 20)) req.set_top_k(static_cast<int32_t>(*k));
  if (auto s = a.get("session")) req.set_session_id(*s);
  if (a.has("append")) {
    if (!a.has("session")) throw usage_error("--append needs --session");
    req.set_history_mode(v1::HISTORY_MODE_APPEND);
  }
  req.set_all_positions(a.has("all-positions"));

  v1::ForwardResponse resp;
  grpc::ClientContext ctx;
  cmd.client().check(cmd.client().stub().Forward(&ctx, req, &resp), "forward");
  if (cmd.json()) {
    std::cout << to_json(resp) << "\n";
    return kExitOk;
  }
  std::printf("%4s  %8s  %10s  %9s  %s\n", "rank", "id", "logit", "logprob", "text");
  int rank = 1;
  for (const auto& t : resp.top())
    std::printf("%4d  %8d  %10.4f  %9.4f  \"%s\"\n", rank++, t.id(), t.logit(), t.logprob(),
                printable(t.text()).c_str());
  if (a.has("all-positions")) {
    std::printf("argmax per position:");
    for (int32_t id : resp.position_argmax()) std::printf(" %d", id);
    std::printf("\n");
  }
  std::printf("[%d input tokens, %d cached; session holds %d positions; %.1f ms]\n", resp.usage().prompt_tokens(),
              resp.usage().cached_tokens(), resp.session_positions(), resp.forward_ms());
  return kExitOk;
}

}  // namespace

CommandInfo forward_command() {
  return CommandInfo{"forward",
                     "next-token candidates of one forward pass (--top-k K)",
                     "forward [options] TEXT... | forward --ids IDS...",
                     "Runs the model once over TEXT (or token ids) and prints the most likely next tokens\n"
                     "with their logits and log-probabilities.",
                     {
                         {"top-k", true, false, "K  candidates to print (default 10)"},
                         {"ids", false, false, "the arguments are token ids"},
                         {"session", true, false, "ID  run in this session (its cached positions are reused)"},
                         {"append", false, false, "with --session: the input follows what the session holds"},
                         {"all-positions", false, false, "also print the argmax at every computed position"},
                     },
                     run_forward};
}

}  // namespace qwen3::cli
