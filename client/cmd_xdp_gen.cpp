// `qwen3-bpf xdp-gen "TASK"`: the generate-verify-repair loop, driven from the
// client over the daemon's Generate (streamed) and VerifyProgram (with the
// repair engine) RPCs, so every stage shows while it runs. Prompts, repair
// messages, source extraction and the completion guard are the daemon's own
// (daemon/verify/generate.h, completion_guard.h): the same loop as
// GenerateVerified. With --generator-url the model's turns come from an
// external OpenAI-compatible endpoint the CLI asks itself (openai_generator.h);
// the daemon still compiles, verifies and repairs.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>
#include <iostream>

#include "cli_error.h"
#include "command.h"
#include "interrupt.h"
#include "json_output.h"
#include "openai_generator.h"
#include "verify/completion_guard.h"
#include "verify/generate.h"
#include "verify_output.h"

namespace qwen3::cli {

namespace v1 = qwen3bpf::v1;

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Progress on stderr: one line per stage; while tokens arrive, a count that
// updates in place on a terminal (every 64 tokens a line otherwise).
class Progress {
 public:
  Progress(int attempt, int attempts) : prefix_("[attempt " + std::to_string(attempt) + "/" + std::to_string(attempts) + "] ") {}
  void line(const std::string& text) {
    if (live_) std::fprintf(stderr, "\r\033[K");
    live_ = false;
    std::fprintf(stderr, "%s%s\n", prefix_.c_str(), text.c_str());
  }
  void tokens(int n) {
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%sgenerating: %d tokens", prefix_.c_str(), n);
      live_ = true;
    } else if (n % 64 == 0) {
      line("generating: " + std::to_string(n) + " tokens");
    }
  }

 private:
  std::string prefix_;
  bool tty_ = isatty(2) == 1;
  bool live_ = false;
};

struct Generated {
  std::string completion;  // cut by the guard
  std::string guard_note;
  int tokens = 0;
  bool interrupted = false;
};

// Where an attempt's completion comes from: the daemon's model or an external endpoint.
using Generator = std::function<Generated(const std::vector<v1::ChatMessage>&, Progress&)>;

Generated generate(DaemonClient& client, const v1::GenerateRequest& req, Progress& progress) {
  Generated out;
  verify::CompletionGuard guard;
  grpc::ClientContext ctx;
  CancelOnInterrupt on_interrupt([&ctx] { ctx.TryCancel(); });
  auto reader = client.stub().Generate(&ctx, req);
  v1::GenerateResponse m;
  bool stopped = false;
  while (reader->Read(&m)) {
    if (m.token_id() >= 0 && m.finish_reason() == v1::FINISH_REASON_UNSPECIFIED) progress.tokens(++out.tokens);
    if (guard.feed(m.text())) {
      stopped = true;  // the closing fence or a runaway repetition: no more tokens are wanted
      ctx.TryCancel();
      break;
    }
  }
  grpc::Status status = reader->Finish();
  guard.finish();
  out.interrupted = on_interrupt.interrupted();
  if (!stopped && !out.interrupted) client.check(status, "xdp-gen (generate)");
  out.completion = guard.text();
  out.guard_note = guard.note();
  return out;
}

v1::GenerateRequest generate_request(const Args& a, const std::vector<v1::ChatMessage>& messages) {
  v1::GenerateRequest req;
  for (const auto& m : messages) *req.add_messages() = m;
  req.set_enable_thinking(false);
  auto* s = req.mutable_sampling();
  // Greedy with a mild repetition penalty unless told otherwise.
  s->set_temperature(static_cast<float>(a.get_double("temperature", 0, 100).value_or(0)));
  s->add_set_fields("temperature");
  s->set_repetition_penalty(
      static_cast<float>(a.get_double("repetition-penalty", 0, 100).value_or(verify::kCodeRepetitionPenalty)));
  s->add_set_fields("repetition_penalty");
  if (auto seed = a.get_int("seed", 0, INT64_MAX)) {
    s->set_seed(static_cast<uint64_t>(*seed));
    s->add_set_fields("seed");
  }
  req.mutable_stopping()->set_max_new_tokens(static_cast<int32_t>(a.get_int("max-tokens", 1, 1 << 20).value_or(1024)));
  return req;
}

// The external endpoint: one non-streaming request; its answer is cut by the same guard.
Generated generate_external(const ExternalGenerator& g, const std::vector<v1::ChatMessage>& messages, Progress& progress) {
  progress.line("asking " + g.model + " at " + g.url + " (one request, not streamed)");
  const ExternalAnswer a = chat_completion(g, messages);
  Generated out;
  out.completion = verify::tidy_completion(a.content, &out.guard_note);
  out.tokens = a.completion_tokens;
  if (out.guard_note.empty() && a.finish_reason == "length") out.guard_note = "stopped at max_tokens";
  return out;
}

// --generator-url and its companions; nullopt for the daemon's own model.
std::optional<ExternalGenerator> external_generator(const Args& a) {
  const auto url = a.get("generator-url");
  if (!url) {
    for (const char* o : {"generator-model", "generator-timeout"})
      if (a.has(o)) throw usage_error(std::string("--") + o + " needs --generator-url");
    return std::nullopt;
  }
  if (a.has("repetition-penalty"))
    throw usage_error("--repetition-penalty is not an OpenAI chat-completions field; with --generator-url set the "
                      "endpoint's own sampling");
  ExternalGenerator g;
  g.url = *url;
  parse_generator_url(g.url);  // usage errors before anything runs
  g.model = a.get_or("generator-model", "");
  if (g.model.empty()) throw usage_error("--generator-url needs --generator-model NAME (the endpoint's model)");
  if (const char* key = std::getenv(kGeneratorKeyEnv); key && *key) g.api_key = key;
  g.temperature = a.get_double("temperature", 0, 2).value_or(0);
  g.max_tokens = static_cast<int>(a.get_int("max-tokens", 1, 1 << 20).value_or(1024));
  if (auto seed = a.get_int("seed", 0, INT64_MAX)) g.seed = static_cast<uint64_t>(*seed);
  g.timeout_s = static_cast<int>(a.get_int("generator-timeout", 1, 3600).value_or(600));
  return g;
}

v1::ChatMessage message(const std::string& role, const std::string& content) {
  v1::ChatMessage m;
  m.set_role(role);
  m.set_content(content);
  return m;
}

// The answer-stage result of a completion without C source (what the daemon's loop reports too).
void no_source(const std::string& guard_note, v1::VerifyResult* r) {
  const verify::VerifyResult v = verify::no_source_result(guard_note);
  r->set_decision(v1::DECISION_FAIL);
  r->set_decision_name("fail");
  r->set_first_failed_stage(v1::STAGE_ANSWER);
  r->set_stage_name("answer");
  r->set_summary(v.summary);
  r->set_error_id(v.error_id);
  r->set_error_class(v.error_class);
  r->set_next_action(v.next_action);
  r->set_short_diagnostic(v.short_diagnostic);
}

std::string verdict_line(const v1::VerifyResult& r) {
  std::string s = std::string(r.decision() == v1::DECISION_PASS ? "PASS" : r.decision() == v1::DECISION_FAIL ? "FAIL" : "ERROR");
  if (r.first_failed_stage() != v1::STAGE_NONE) s += std::string(" at stage ") + stage_name(r.first_failed_stage());
  if (r.verifier_line() > 0) s += " (" + r.verifier_class_name() + ", line " + std::to_string(r.verifier_line()) + ")";
  return s;
}

// One attempt: generate, extract, verify with the repair engine. Returns whether it is solved.
bool run_attempt(Command& cmd, const Generator& generator, const FixtureFileRequest& fx,
                 std::vector<v1::ChatMessage>& messages, bool repair, Progress& progress, v1::VerifyAttempt* at) {
  for (const auto& m : messages) *at->add_messages() = m;
  const auto t0 = Clock::now();
  const Generated g = generator(messages, progress);
  if (g.interrupted) throw CliError("xdp-gen: interrupted", kExitInterrupted);
  at->set_completion(g.completion);
  at->set_guard_note(g.guard_note);
  at->set_generated_tokens(g.tokens);
  progress.line("generated " + std::to_string(g.tokens) + " tokens in " + std::to_string(static_cast<int>(ms_since(t0))) +
                " ms" + (g.guard_note.empty() ? "" : " (" + g.guard_note + ")"));
  const std::string source = verify::extract_c_source(g.completion);
  at->set_source(source);
  if (source.empty()) {
    progress.line("answer: no C source found");
    no_source(g.guard_note, at->mutable_result());
  } else {
    progress.line("verifying " + std::to_string(std::count(source.begin(), source.end(), '\n')) +
                  " lines (policy, compile, verifier, fixtures" + (repair ? ", then the repair engine" : "") + ")");
    v1::VerifyProgramRequest req;
    req.set_source(source);
    for (const auto& f : fx.fixtures) *req.add_fixtures() = f;
    req.set_fix(repair);
    v1::VerifyProgramResponse resp;
    grpc::ClientContext ctx;
    cmd.client().check(cmd.client().stub().VerifyProgram(&ctx, req, &resp), "xdp-gen (verify)");
    *at->mutable_result() = resp.result();
    *at->mutable_repair() = resp.repair();
    progress.line("verify: " + verdict_line(resp.result()));
    if (resp.result().decision() == v1::DECISION_PASS) at->set_fixed_by("model");
    if (resp.repair().attempted())
      progress.line(resp.repair().fixed() ? "repair engine: fixed (" + std::to_string(resp.repair().steps_size()) +
                                                " edit(s), " + std::to_string(resp.repair().candidates_tried()) + " candidates)"
                                          : "repair engine: " + resp.repair().note());
    if (resp.repair().fixed()) at->set_fixed_by("engine");
  }
  messages.push_back(message("assistant", g.completion));
  messages.push_back(message("user", at->result().first_failed_stage() == v1::STAGE_ANSWER
                                         ? verify::no_source_repair_message()
                                         : verify::repair_message(at->result().short_diagnostic())));
  return !at->fixed_by().empty();
}

void print_attempts(const Args& a, const v1::GenerateVerifiedResponse& resp) {
  int n = 0;
  for (const auto& at : resp.attempts()) {
    std::printf("== attempt %d of %d\n", ++n, resp.attempts_size());
    if (a.has("show-completion") || at.source().empty()) {
      std::printf("-- model answer%s:\n%s", at.source().empty() ? " (no C source found in it)" : "",
                  indent(at.completion(), "   ").c_str());
      if (!at.guard_note().empty()) std::printf("   [%s]\n", at.guard_note().c_str());
    }
    if (!at.source().empty()) std::printf("-- source:\n%s", indent(at.source(), "   ").c_str());
    std::printf("-- result:\n");
    const std::string name = "attempt-" + std::to_string(n) + ".c";
    print_result(at.result(), name);
    if (at.repair().attempted()) print_repair(at.repair(), name);
    if (!at.fixed_by().empty()) std::printf("-- solved by the %s\n", at.fixed_by().c_str());
  }
  std::printf("== %s after %d attempt%s (%.0f ms)\n", resp.solved() ? "solved" : "not solved", resp.attempts_size(),
              resp.attempts_size() == 1 ? "" : "s", resp.elapsed_ms());
}

int run_xdp_gen(Command& cmd) {
  const Args& a = cmd.args();
  if (a.positional().empty()) throw usage_error("usage: qwen3-bpf xdp-gen \"TASK\"");
  std::string task;
  for (const auto& w : a.positional()) task += (task.empty() ? "" : " ") + w;
  FixtureFileRequest fx;
  if (auto f = a.get("fixtures")) {
    fx = load_fixtures(*f);
    // The repair loop's request has no initial map contents: refuse rather than drop them.
    if (!fx.initial_maps.empty())
      throw CliError("fixtures file " + *f + ": initial map contents (\"maps\") are only supported by "
                     "`qwen3-bpf verify`, not by xdp-gen", kExitFailed);
  }
  const int attempts = static_cast<int>(a.get_int("attempts", 1, 10).value_or(2));
  generate_request(a, {});  // option errors before anything runs
  const std::optional<ExternalGenerator> external = external_generator(a);
  const Generator generator = external ? Generator([&](const std::vector<v1::ChatMessage>& m, Progress& p) {
                                           return generate_external(*external, m, p);
                                         })
                                       : Generator([&](const std::vector<v1::ChatMessage>& m, Progress& p) {
                                           p.line("generating (greedy unless --temperature; repetition penalty " +
                                                  std::to_string(a.get_double("repetition-penalty", 0, 100)
                                                                     .value_or(verify::kCodeRepetitionPenalty))
                                                      .substr(0, 4) + ")");
                                           return generate(cmd.client(), generate_request(a, m), p);
                                         });
  const bool repair = !a.has("no-repair");
  std::vector<v1::ChatMessage> messages = {message("system", verify::xdp_system_prompt()),
                                           message("user", verify::task_message(task, fx.file.fixtures))};
  v1::GenerateVerifiedResponse resp;
  const auto t0 = Clock::now();
  for (int i = 1; i <= attempts; ++i) {
    Progress progress(i, attempts);
    v1::VerifyAttempt* at = resp.add_attempts();
    const bool solved = run_attempt(cmd, generator, fx, messages, repair, progress, at);
    resp.set_solved(solved);
    // An error is not the model's fault (infrastructure, unusable fixtures): retrying cannot help.
    if (solved || at->result().decision() == v1::DECISION_ERROR) break;
  }
  resp.set_elapsed_ms(ms_since(t0));
  if (cmd.json()) {
    nlohmann::json j = to_json_value(resp);
    j["generator"] = external ? nlohmann::json{{"url", external->url}, {"model", external->model}}
                              : nlohmann::json{{"url", ""}, {"model", "daemon"}};
    std::cout << dump_json(j) << "\n";
  } else {
    if (external) std::printf("== generator: %s at %s\n", external->model.c_str(), external->url.c_str());
    print_attempts(a, resp);
  }
  return resp.solved() ? kExitOk : kExitFailed;
}

}  // namespace

CommandInfo xdp_gen_command() {
  return CommandInfo{
      "xdp-gen",
      "let the model write an XDP program, verified and repaired",
      "xdp-gen \"TASK\" [--fixtures F] [--attempts N] [--no-repair] [--generator-url URL --generator-model M] [--json]",
      "Asks the loaded model for an XDP program doing TASK and verifies it; the daemon's repair engine\n"
      "fixes what it can (see `verify --fix`), and only what it cannot goes back to the model as a short\n"
      "diagnostic for the next attempt. Progress (a line per stage, a token count while generating) goes\n"
      "to stderr; every attempt (source, result, the engine's diff, who fixed it) to stdout. Generation\n"
      "is greedy with repetition penalty 1.1 and stops at the fence that closes the code block or at a\n"
      "runaway repetition. Exit 0 if an attempt was solved, 1 otherwise.\n"
      "\n"
      "With --generator-url the model's turns come from an external OpenAI-compatible endpoint\n"
      "(POST .../v1/chat/completions, not streamed) instead of the daemon's model: a URL ending in\n"
      "/chat/completions is used as given, one ending in /v1 gets /chat/completions, any other gets\n"
      "/v1/chat/completions. The CLI makes that request itself, as you; the daemon never connects out.\n"
      "It still compiles, verifies and repairs every answer, and the same short diagnostic goes back\n"
      "to the endpoint. The API key, if any, is read from $QWEN3_GENERATOR_API_KEY (sent as\n"
      "`Authorization: Bearer`). http:// only. --temperature, --max-tokens and --seed are passed on.",
      {
          {"fixtures", true, false, "TESTS.json  packet fixtures the program must pass"},
          {"attempts", true, false, "N  total attempts including repairs, 1-10 (default 2)"},
          {"max-tokens", true, false, "N  tokens per attempt (default 1024)", 'n'},
          {"temperature", true, false, "T  sampling temperature (default 0: greedy)", 't'},
          {"repetition-penalty", true, false, "R  penalise tokens already in the context (default 1.1; 1 = off)"},
          {"seed", true, false, "N  sampling seed"},
          {"no-repair", false, false, "do not run the repair engine: only the model repairs"},
          {"show-completion", false, false, "print the model's whole answer, not only the extracted source"},
          {"generator-url", true, false, "URL  an external OpenAI-compatible endpoint writes the program (http://HOST:PORT[/v1])"},
          {"generator-model", true, false, "NAME  the model to ask for at --generator-url (required with it)"},
          {"generator-timeout", true, false, "S  seconds to wait for each external answer (default 600)"},
      },
      run_xdp_gen};
}

}  // namespace qwen3::cli
