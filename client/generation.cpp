#include "generation.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli_error.h"
#include "input.h"
#include "interrupt.h"
#include "json_output.h"
#include "wait_indicator.h"

namespace qwen3::cli {

namespace v1 = qwen3bpf::v1;

namespace {

// 0.7 rather than 0.700000 (a float's shortest decimal at 6 digits).
std::string compact_number(float v) {
  std::ostringstream s;
  s.precision(6);
  s << v;
  return s.str();
}

}  // namespace

std::vector<OptionSpec> generation_options() {
  return {
      {"max-tokens", true, false, "N  tokens to generate at most (default: the daemon's, 256)", 'n'},
      {"temperature", true, false, "T  sampling temperature; 0 = greedy (default: the model's generation_config)", 't'},
      {"greedy", false, false, "greedy decoding (temperature 0); the model's other defaults still apply"},
      {"top-k", true, false, "K  sample among the K most likely tokens (0 = off; default: the model's)"},
      {"top-p", true, false, "P  nucleus sampling cut (0 or 1 = off; default: the model's)"},
      {"min-p", true, false, "P  drop tokens below P x the best probability (0 = off; default: the model's)"},
      {"repetition-penalty", true, false, "R  penalise tokens already in the context (1 = off; default: the model's)"},
      {"seed", true, false, "N  sampling seed (0 = random; the seed used is reported); sampling stays on"},
      {"stop", true, true, "TEXT  stop when TEXT appears (not printed); repeatable"},
      {"ignore-eos", false, false, "keep generating past end-of-sequence tokens"},
      {"logprobs", true, false, "N  report the chosen token's logprob and the top N, N <= 20 (with --json)"},
      {"speculative", true, false,
       "on|off  prompt-lookup speculative decoding: same output, faster when it copies the prompt "
       "(default: the daemon's config)"},
      {"driver", true, false,
       "kernel|user|auto  who steers decoding: the kernel after one submission per turn, or the engine's threads "
       "(same tokens; default auto: the daemon's config)"},
      {"stats", false, false, "print finish reason, token counts and timings to stderr"},
  };
}

void apply_generation_options(const Args& args, v1::GenerateRequest& request) {
  // Each flag sets one field and names it in set_fields; every other field
  // keeps the model's generation_config default (the daemon merges them), so
  // --seed alone still samples. No flag: no sampling message at all.
  auto* stopping = request.mutable_stopping();
  if (auto v = args.get_int("max-tokens", 1, 1 << 20)) stopping->set_max_new_tokens(static_cast<int32_t>(*v));
  if (args.has("greedy") && args.has("temperature")) throw usage_error("--greedy and --temperature exclude each other");
  v1::SamplingParams sampling;
  auto set = [&sampling](const char* field) { sampling.add_set_fields(field); };
  if (args.has("greedy")) {
    sampling.set_temperature(0);
    set("temperature");
  }
  if (auto v = args.get_double("temperature", 0, 100)) {
    sampling.set_temperature(static_cast<float>(*v));
    set("temperature");
  }
  if (auto v = args.get_int("top-k", 0, 1 << 24)) {
    sampling.set_top_k(static_cast<int32_t>(*v));
    set("top_k");
  }
  if (auto v = args.get_double("top-p", 0, 1)) {
    sampling.set_top_p(static_cast<float>(*v));
    set("top_p");
  }
  if (auto v = args.get_double("min-p", 0, 1)) {
    sampling.set_min_p(static_cast<float>(*v));
    set("min_p");
  }
  if (auto v = args.get_double("repetition-penalty", 0, 100)) {
    sampling.set_repetition_penalty(static_cast<float>(*v));
    set("repetition_penalty");
  }
  if (auto v = args.get_int("seed", 0, INT64_MAX)) {
    sampling.set_seed(static_cast<uint64_t>(*v));
    set("seed");
  }
  if (sampling.set_fields_size() > 0) *request.mutable_sampling() = sampling;
  for (const auto& s : args.all("stop")) {
    if (s.empty()) throw usage_error("--stop wants a non-empty string");
    stopping->add_stop(require_utf8(s, "--stop"));
  }
  if (args.has("ignore-eos")) stopping->set_ignore_eos(true);
  // The daemon's limit (daemon/service/inference.cpp).
  if (auto v = args.get_int("logprobs", 0, 20)) request.set_logprobs(static_cast<int32_t>(*v));
  if (auto v = args.get("speculative")) {
    if (*v == "on") request.set_speculative(v1::SPECULATIVE_ON);
    else if (*v == "off") request.set_speculative(v1::SPECULATIVE_OFF);
    else throw usage_error("--speculative wants on or off (got '" + *v + "')");
  }
  if (auto v = args.get("driver")) {
    if (*v == "kernel") request.set_driver(v1::DRIVER_KERNEL);
    else if (*v == "user") request.set_driver(v1::DRIVER_USER);
    else if (*v == "auto") request.set_driver(v1::DRIVER_DEFAULT);
    else throw usage_error("--driver wants kernel, user or auto (got '" + *v + "')");
  }
}

StreamOutcome stream_generate(DaemonClient& client, const v1::GenerateRequest& request, StreamOutput output,
                              ThinkDisplay* think) {
  auto print = [](const std::string& text) {
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  };
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); };
  StreamOutcome out;
  const auto start = Clock::now();
  // Declared before the guard: the guard (destroyed first) is what keeps a
  // Ctrl-C from reaching a destroyed context.
  grpc::ClientContext ctx;
  CancelOnInterrupt guard([&ctx] { ctx.TryCancel(); });
  WaitIndicator waiting("prefill", output == StreamOutput::text && WaitIndicator::stderr_is_terminal());
  auto reader = client.stub().Generate(&ctx, request);
  v1::GenerateResponse message;
  while (reader->Read(&message)) {
    if (out.first_token_ms == 0) {
      out.first_token_ms = ms_since(start);
      waiting.stop();
    }
    if (output == StreamOutput::json_lines) {
      std::cout << to_json(message) << "\n" << std::flush;
    } else if (output == StreamOutput::text && !message.text().empty()) {
      print(think ? think->push(message.text()) : message.text());
    } else if (think) {
      think->push(message.text());  // silent: split only
    }
    out.text += message.text();
    if (message.token_id() >= 0) ++out.received_tokens;
    if (message.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) out.final_message = message;
  }
  waiting.stop();
  if (think) {
    const std::string rest = think->flush();
    if (output == StreamOutput::text) print(rest);
  }
  grpc::Status status = reader->Finish();
  out.elapsed_ms = ms_since(start);
  out.interrupted = guard.interrupted();
  if (out.interrupted) {
    // The cancelled call gets no final message: keep what was counted here.
    out.final_message.set_finish_reason(v1::FINISH_REASON_CANCELLED);
    out.final_message.mutable_usage()->set_completion_tokens(out.received_tokens);
    out.final_message.set_session_id(request.session_id());
    return out;
  }
  client.check(status, "generate");
  return out;
}

std::string finish_reason_name(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH: return "length";
    case v1::FINISH_REASON_EOS: return "eos";
    case v1::FINISH_REASON_STOP_SEQUENCE: return "stop_sequence";
    case v1::FINISH_REASON_CANCELLED: return "cancelled";
    default: return "unknown";
  }
}

std::string describe_sampling(const v1::SamplingParams& p) {
  std::ostringstream s;
  s << (p.temperature() < 1e-3f ? "greedy" : "temperature " + compact_number(p.temperature()));
  if (p.temperature() >= 1e-3f) {
    if (p.top_k() > 0) s << ", top_k " << p.top_k();
    if (p.top_p() > 0 && p.top_p() < 1) s << ", top_p " << compact_number(p.top_p());
    if (p.min_p() > 0) s << ", min_p " << compact_number(p.min_p());
  }
  if (p.repetition_penalty() > 0 && p.repetition_penalty() != 1) s << ", repetition_penalty " << compact_number(p.repetition_penalty());
  if (p.seed() != 0) s << ", seed " << p.seed();
  return s.str();
}

std::string describe_outcome(const StreamOutcome& o) {
  const v1::GenerateResponse& m = o.final_message;
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  if (o.interrupted) {
    // The daemon's usage and timings come with the final message, which a
    // cancelled stream does not get; these are the client's own counts.
    s << "[finish: cancelled (Ctrl-C); completion " << o.received_tokens << " tokens received";
    if (o.received_tokens > 0) s << "; first token after " << o.first_token_ms << " ms";
    s << ", " << o.elapsed_ms << " ms in all";
    if (!m.session_id().empty()) s << "; session " << m.session_id();
    s << "]";
    return s.str();
  }
  s << "[finish: " << finish_reason_name(m.finish_reason());
  if (!m.stop_sequence().empty()) s << " (\"" << m.stop_sequence() << "\")";
  s << "; prompt " << m.usage().prompt_tokens() << " tokens (" << m.usage().cached_tokens() << " cached)"
    << ", completion " << m.usage().completion_tokens() << " tokens"
    << "; queue " << m.timings().queue_ms() << " ms, prefill " << m.timings().prefill_ms() << " ms, decode "
    << m.timings().decode_ms() << " ms (" << m.timings().decode_tokens_per_second() << " tok/s)";
  if (m.usage().speculative_draft_tokens() > 0)
    s << "; speculative: " << m.usage().speculative_accepted_tokens() << " of " << m.usage().speculative_draft_tokens()
      << " draft tokens accepted";
  if (m.has_sampling()) s << "; " << describe_sampling(m.sampling());
  else if (m.seed() != 0) s << "; seed " << m.seed();
  if (!m.session_id().empty()) s << "; session " << m.session_id();
  s << "]";
  return s.str();
}

}  // namespace qwen3::cli
