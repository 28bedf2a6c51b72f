// qwen3-bpf-run: one offline run of a model on a backend, without any daemon.
//   qwen3-bpf-run --model DIR --backend reference|bpf (--ids N... | --prompt TEXT)
//                 [--generate N] [--top-k K] [--score] [--json] [sampling and engine flags]
// Load, prefill and decode timings go to stderr (and into --json).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_parse.h"
#include "common/error.h"
#include "engine/bpf_backend.h"
#include "model/model_dir.h"
#include "reference/reference_backend.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Options {
  std::string model;
  std::string backend = "bpf";
  std::vector<int32_t> ids;
  std::string prompt;
  bool have_prompt = false;
  int generate = 0;
  int top_k = 5;
  bool score = false;
  bool json = false;
  bool chat = false;
  bool think = true;
  qwen3::SamplingParams sampling;
  std::string weights = "map";
  std::string precision = "q24";
  int kv_bits = qwen3::BpfEngineOptions{}.kv_bits;
  int threads = 2;
  bool verbose = false;
};

Options parse_args(int argc, char** argv) {
  Options o;
  CLI::App app{"One offline run of a model on a backend, without any daemon. Prints the prompt's next-token\n"
               "top-k and the generated text, then load, prefill and decode timings on stderr."};
  qwen3::cli_parse::init(app, "qwen3-bpf-run");
  app.add_option("--model", o.model, "model directory")->required();
  app.add_option("--backend", o.backend, "reference | bpf")
      ->capture_default_str()
      ->check(CLI::IsMember({"reference", "bpf"}));
  auto* prompt = app.add_option("-p,--prompt", o.prompt, "prompt text");
  auto* ids = app.add_option("--ids", o.ids, "prompt token ids")->expected(1, -1);
  prompt->excludes(ids);
  app.add_option("-n,--generate", o.generate, "tokens to generate")->check(qwen3::cli_parse::non_negative_integer());
  app.add_option("--top-k", o.top_k, "next-token candidates printed")
      ->capture_default_str()
      ->check(qwen3::cli_parse::non_negative_integer());
  app.add_flag("--score", o.score,
               "one JSON line {\"argmax\": [...]}: the argmax at every prompt position (teacher-forced), "
               "instead of generating");
  app.add_flag("--json", o.json,
               "one JSON line {\"generated\": [...ids], \"topk\": [[id, logit], ...], \"timings\": {...}} "
               "(top-k of the first next-token distribution after the prompt)");
  app.add_flag("--chat", o.chat, "apply the chat template (the prompt is the user message)");
  bool no_think = false;
  app.add_flag("--no-think", no_think, "chat template with thinking disabled");
  app.add_option("-t,--temperature", o.sampling.temperature, "sampling temperature (0: greedy)");
  app.add_option("--top-p", o.sampling.top_p, "nucleus sampling cut");
  app.add_option("--min-p", o.sampling.min_p, "min-p cut");
  app.add_option("--repetition-penalty", o.sampling.repetition_penalty, "1 = off");
  app.add_option("--sample-top-k", o.sampling.top_k, "sample among the K most likely tokens");
  app.add_option("--seed", o.sampling.seed, "sampling seed")->check(qwen3::cli_parse::non_negative_integer());
  app.add_option("--weights", o.weights, "map | arena")->capture_default_str();
  app.add_option("--precision", o.precision, "q24 | q8 | q4")->capture_default_str();
  app.add_option("--kv-bits", o.kv_bits, "16 | 8")->capture_default_str();
  app.add_option("--threads", o.threads, "worker threads")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_flag("--verbose", o.verbose, "engine details and load progress on stderr");
  if (int rc = qwen3::cli_parse::parse(app, argc, argv); rc >= 0) std::exit(rc);
  o.think = !no_think;
  o.have_prompt = prompt->count() > 0;
  if (o.have_prompt == !o.ids.empty()) qwen3::cli_parse::usage_error(app, "give exactly one of --ids or --prompt");
  return o;
}

std::unique_ptr<qwen3::Backend> make_backend(const Options& o, std::shared_ptr<const qwen3::ModelDir> model) {
  if (o.backend == "reference") return qwen3::make_reference_backend(model, o.threads);
  qwen3::BpfEngineOptions eo;
  eo.weight_path = qwen3::parse_weight_path(o.weights);
  eo.precision = qwen3::parse_precision(o.precision);
  eo.threads = o.threads;
  eo.kv_bits = o.kv_bits;
  eo.verbose = o.verbose;
  if (o.verbose && !o.json)
    eo.progress = [](double fraction, const std::string& what) {
      std::fprintf(stderr, "\rloading %3.0f%% %s\033[K", fraction * 100.0, what.c_str());
      if (fraction >= 1.0) std::fputc('\n', stderr);
    };
  return qwen3::make_bpf_backend(model, eo);
}

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

// Load, prefill and decode times, as llama-cli prints them (stderr, or the
// "timings" object of --json).
struct Timings {
  double load_ms = 0;
  int prompt_tokens = 0;
  double prefill_ms = 0;
  int decode_tokens = 0;  // single-token forward passes after the prompt
  double decode_ms = 0;

  void print() const {
    std::fprintf(stderr, "load:    %10.1f ms\n", load_ms);
    std::fprintf(stderr, "prefill: %10.1f ms  %5d tokens  %8.2f tokens/s\n", prefill_ms, prompt_tokens,
                 prefill_ms > 0 ? prompt_tokens * 1000.0 / prefill_ms : 0.0);
    if (decode_tokens > 0)
      std::fprintf(stderr, "decode:  %10.1f ms  %5d tokens  %8.2f tokens/s  (%.1f ms/token)\n", decode_ms,
                   decode_tokens, decode_tokens * 1000.0 / decode_ms, decode_ms / decode_tokens);
    std::fprintf(stderr, "total:   %10.1f ms\n", load_ms + prefill_ms + decode_ms);
  }
  nlohmann::json to_json() const {
    return {{"load_ms", load_ms},
            {"prompt_tokens", prompt_tokens},
            {"prefill_ms", prefill_ms},
            {"decode_tokens", decode_tokens},
            {"decode_ms", decode_ms}};
  }
};

int run(const Options& o) {
  Timings timings;
  const auto load_start = Clock::now();
  auto model = qwen3::ModelDir::open(o.model);
  auto tok = qwen3::Tokenizer::load(o.model);

  std::vector<int32_t> prompt_ids = o.ids;
  if (o.have_prompt) {
    if (o.chat) {
      const qwen3::ChatMessage msg{"user", o.prompt};
      prompt_ids = tok->encode(tok->apply_chat_template({&msg, 1}, true, o.think));
    } else {
      prompt_ids = tok->encode(o.prompt);
    }
  }
  if (prompt_ids.empty()) throw qwen3::invalid_argument("the prompt has no tokens");

  auto backend = make_backend(o, model);
  const int context = static_cast<int>(prompt_ids.size()) + o.generate + 1;
  auto kv = backend->create_kv(context);
  timings.load_ms = ms_since(load_start);
  timings.prompt_tokens = static_cast<int>(prompt_ids.size());

  if (o.score) {
    qwen3::ForwardWants wants;
    wants.all_positions = true;
    wants.top_k = 1;
    const auto t = Clock::now();
    auto result = backend->forward(*kv, prompt_ids, wants);
    timings.prefill_ms = ms_since(t);
    nlohmann::json out = {{"argmax", nlohmann::json::array()}};
    for (const auto& p : result.positions) out["argmax"].push_back(p.argmax);
    std::cout << out.dump() << "\n";
    timings.print();
    return 0;
  }

  qwen3::Sampler sampler(o.sampling, backend.get());  // the bpf backend computes the probabilities in the kernel
  qwen3::ForwardWants wants = sampler.wants();
  wants.top_k = std::max(wants.top_k, o.top_k);
  std::vector<int32_t> history = prompt_ids;
  std::vector<int32_t> generated;
  qwen3::StreamDecoder stream(tok);

  auto prefill_start = Clock::now();
  auto first = backend->forward(*kv, prompt_ids, wants);
  timings.prefill_ms = ms_since(prefill_start);
  const auto first_topk = first.positions.back().top_k;
  if (!o.json) {
    std::cout << "prompt tokens: " << prompt_ids.size() << "\n";
    std::cout << "next-token top-" << first_topk.size() << ":";
    for (const auto& [id, logit] : first_topk) std::cout << " " << id << "(" << logit << ")";
    std::cout << "\n";
    if (o.generate > 0) std::cout << "generated: " << std::flush;
  }
  qwen3::PositionLogits scores = first.positions.back();
  const auto& eos = model->config().eos_token_ids;
  for (int i = 0; i < o.generate; ++i) {
    const int32_t next = sampler.sample(scores, history);
    generated.push_back(next);
    history.push_back(next);
    if (!o.json) std::cout << stream.push(next) << std::flush;
    if (std::find(eos.begin(), eos.end(), next) != eos.end() || i + 1 == o.generate) break;
    const int32_t one[] = {next};
    const auto t = Clock::now();
    scores = backend->forward(*kv, one, wants).positions.back();
    timings.decode_ms += ms_since(t);
    ++timings.decode_tokens;
  }
  if (o.json) {
    nlohmann::json out = {{"generated", generated}, {"topk", nlohmann::json::array()}};
    for (const auto& [id, logit] : first_topk) out["topk"].push_back({id, logit});
    out["timings"] = timings.to_json();
    std::cout << out.dump() << "\n";
  } else if (o.generate > 0) {
    std::cout << stream.flush() << "\n";
  }
  std::cout << std::flush;
  timings.print();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse_args(argc, argv);
  try {
    return run(o);
  } catch (const qwen3::Error& e) {
    std::cerr << "qwen3-bpf-run: " << e.what() << "\n";
    return e.kind() == qwen3::ErrorKind::invalid_argument ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << "qwen3-bpf-run: " << e.what() << "\n";
    return 1;
  }
}
