// qwen3-bpf-run: one offline run of a model on a backend, without any daemon.
//   qwen3-bpf-run --model DIR --backend reference|bpf (--ids N... | --prompt TEXT)
//                 [--generate N] [--top-k K] [--score] [--json] [sampling and engine flags]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "engine/bpf_backend.h"
#include "model/model_dir.h"
#include "reference/reference_backend.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace {

const char* kUsage =
    "usage: qwen3-bpf-run --model DIR [--backend reference|bpf] (--ids N... | --prompt TEXT)\n"
    "                     [--generate N] [--top-k K] [--score] [--json] [--chat] [--no-think]\n"
    "                     [--temperature T] [--top-p P] [--min-p P] [--repetition-penalty R] [--seed S]\n"
    "                     [--weights map|arena] [--precision q24|q8] [--kv-bits 16|8] [--threads N] [--verbose]\n"
    "  --json   one JSON line {\"generated\": [...ids], \"topk\": [[id, logit], ...]}\n"
    "           (top-k of the first next-token distribution after the prompt)\n"
    "  --score  one JSON line {\"argmax\": [...]}: the argmax at every prompt position\n"
    "           (teacher-forced), instead of generating\n";

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
  int kv_bits = 16;
  int threads = 2;
  bool verbose = false;
};

[[noreturn]] void usage_error(const std::string& msg) {
  std::cerr << "qwen3-bpf-run: " << msg << "\n" << kUsage;
  std::exit(2);
}

template <typename T>
T parse_number(const std::string& flag, const std::string& text) {
  try {
    size_t used = 0;
    T v;
    if constexpr (std::is_floating_point_v<T>) v = static_cast<T>(std::stod(text, &used));
    else v = static_cast<T>(std::stoll(text, &used));
    if (used != text.size()) throw std::invalid_argument(text);
    return v;
  } catch (const std::exception&) {
    usage_error(flag + " wants a number, got '" + text + "'");
  }
}

Options parse_args(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) usage_error(a + " needs a value");
      return args[++i];
    };
    if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (a == "--model") o.model = value();
    else if (a == "--backend") o.backend = value();
    else if (a == "--prompt") { o.prompt = value(); o.have_prompt = true; }
    else if (a == "--ids") {
      while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0)
        o.ids.push_back(parse_number<int32_t>("--ids", args[++i]));
      if (o.ids.empty()) usage_error("--ids needs at least one token id");
    }
    else if (a == "--generate") o.generate = parse_number<int>(a, value());
    else if (a == "--top-k") o.top_k = parse_number<int>(a, value());
    else if (a == "--score") o.score = true;
    else if (a == "--json") o.json = true;
    else if (a == "--chat") o.chat = true;
    else if (a == "--no-think") o.think = false;
    else if (a == "--temperature") o.sampling.temperature = parse_number<float>(a, value());
    else if (a == "--top-p") o.sampling.top_p = parse_number<float>(a, value());
    else if (a == "--min-p") o.sampling.min_p = parse_number<float>(a, value());
    else if (a == "--repetition-penalty") o.sampling.repetition_penalty = parse_number<float>(a, value());
    else if (a == "--sample-top-k") o.sampling.top_k = parse_number<int>(a, value());
    else if (a == "--seed") o.sampling.seed = parse_number<uint64_t>(a, value());
    else if (a == "--weights") o.weights = value();
    else if (a == "--precision") o.precision = value();
    else if (a == "--kv-bits") o.kv_bits = parse_number<int>(a, value());
    else if (a == "--threads") o.threads = parse_number<int>(a, value());
    else if (a == "--verbose") o.verbose = true;
    else usage_error("unknown argument '" + a + "'");
  }
  if (o.model.empty()) usage_error("--model DIR is required");
  if (o.have_prompt == !o.ids.empty()) usage_error("give exactly one of --ids or --prompt");
  if (o.backend != "reference" && o.backend != "bpf") usage_error("--backend is reference or bpf");
  if (o.generate < 0 || o.top_k < 0) usage_error("--generate and --top-k must be >= 0");
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

int run(const Options& o) {
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

  if (o.score) {
    qwen3::ForwardWants wants;
    wants.all_positions = true;
    wants.top_k = 1;
    auto result = backend->forward(*kv, prompt_ids, wants);
    nlohmann::json out = {{"argmax", nlohmann::json::array()}};
    for (const auto& p : result.positions) out["argmax"].push_back(p.argmax);
    std::cout << out.dump() << "\n";
    return 0;
  }

  qwen3::Sampler sampler(o.sampling);
  qwen3::ForwardWants wants = sampler.wants();
  wants.top_k = std::max(wants.top_k, o.top_k);
  std::vector<int32_t> history = prompt_ids;
  std::vector<int32_t> generated;
  qwen3::StreamDecoder stream(tok);

  auto first = backend->forward(*kv, prompt_ids, wants);
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
    scores = backend->forward(*kv, one, wants).positions.back();
  }
  if (o.json) {
    nlohmann::json out = {{"generated", generated}, {"topk", nlohmann::json::array()}};
    for (const auto& [id, logit] : first_topk) out["topk"].push_back({id, logit});
    std::cout << out.dump() << "\n";
  } else if (o.generate > 0) {
    std::cout << stream.flush() << "\n";
  }
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
