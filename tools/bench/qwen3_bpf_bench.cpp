// qwen3-bpf-bench: speed and memory of the in-kernel backend on one model, for
// each weight path and precision, with the float reference timed on the same
// prompt in the same run.
//
//   qwen3-bpf-bench --model DIR [--json] [--weights map|arena|both]
//                   [--precision q24|q8|both] [--prompt-tokens N] [--decode N]
//                   [--threads N] [--kv-bits 8|16] [--no-reference]
#include <sys/resource.h>

#include <chrono>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "engine/bpf_backend.h"
#include "model/model_dir.h"
#include "reference/reference_backend.h"

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct Options {
  std::string model;
  bool json = false;
  std::vector<qwen3::WeightPath> paths{qwen3::WeightPath::map};
  std::vector<qwen3::Precision> precisions{qwen3::Precision::q24, qwen3::Precision::q8};
  int prompt_tokens = 32;
  int decode = 16;
  int threads = 2;
  int kv_bits = 16;
  bool reference = true;
};

[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr,
               "qwen3-bpf-bench: %s\nusage: qwen3-bpf-bench --model DIR [--json] [--weights map|arena|both] "
               "[--precision q24|q8|both] [--prompt-tokens N] [--decode N] [--threads N] [--kv-bits 8|16] "
               "[--no-reference]\n",
               msg.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    auto number = [&](int lo, int hi) {
      std::string v = next();
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (!end || *end || n < lo || n > hi) usage(a + " must be a number in [" + std::to_string(lo) + ", " +
                                                  std::to_string(hi) + "]");
      return static_cast<int>(n);
    };
    if (a == "--model") o.model = next();
    else if (a == "--json") o.json = true;
    else if (a == "--weights") {
      std::string v = next();
      if (v == "both") o.paths = {qwen3::WeightPath::map, qwen3::WeightPath::arena};
      else o.paths = {qwen3::parse_weight_path(v)};
    } else if (a == "--precision") {
      std::string v = next();
      if (v == "both") o.precisions = {qwen3::Precision::q24, qwen3::Precision::q8};
      else o.precisions = {qwen3::parse_precision(v)};
    } else if (a == "--prompt-tokens") o.prompt_tokens = number(1, 4096);
    else if (a == "--decode") o.decode = number(1, 4096);
    else if (a == "--threads") o.threads = number(1, 4);
    else if (a == "--kv-bits") o.kv_bits = number(8, 16);
    else if (a == "--no-reference") o.reference = false;
    else usage("unknown argument '" + a + "'");
  }
  if (o.model.empty()) usage("--model DIR is required");
  return o;
}

// Resident memory of this process (kB -> bytes), from /proc/self/status.
size_t rss_bytes(const char* key = "VmRSS:") {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::strtoull(line.c_str() + std::strlen(key), nullptr, 10) * 1024;
  return 0;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

struct Run {
  std::string name, weights, precision;
  double load_s = 0, prefill_tok_s = 0, decode_ms = 0, calls_per_token = 0;
  double decode_cpu_ms = 0;  // CPU time (user + kernel, all threads) per decoded token
  size_t weight_bytes = 0, kv_bytes = 0, rss_after_load = 0;
  std::vector<int32_t> generated;
};

// Prefill the prompt, then greedy-decode `decode` tokens, one at a time.
void time_generation(qwen3::Backend& b, const std::vector<int32_t>& prompt, int decode, Run& r,
                     const std::function<uint64_t()>& calls) {
  auto kv = b.create_kv(static_cast<int>(prompt.size()) + decode + 1);
  auto t0 = Clock::now();
  auto res = b.forward(*kv, prompt, {});
  r.prefill_tok_s = prompt.size() / seconds_since(t0);
  int32_t next = res.positions.back().argmax;
  uint64_t c0 = calls ? calls() : 0;
  double cpu0 = cpu_seconds();
  auto t1 = Clock::now();
  for (int i = 0; i < decode; i++) {
    r.generated.push_back(next);
    res = b.forward(*kv, std::span<const int32_t>(&next, 1), {});
    next = res.positions.back().argmax;
  }
  r.decode_ms = seconds_since(t1) * 1000.0 / decode;
  r.decode_cpu_ms = (cpu_seconds() - cpu0) * 1000.0 / decode;
  if (calls) r.calls_per_token = double(calls() - c0) / decode;
  r.kv_bytes = kv->bytes();
}

double load_average() {
  std::ifstream f("/proc/loadavg");
  double v = 0;
  f >> v;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  try {
    auto model = qwen3::ModelDir::open(o.model);
    const auto& cfg = model->config();
    std::mt19937_64 rng(7);
    std::vector<int32_t> prompt(o.prompt_tokens);
    for (auto& id : prompt) id = static_cast<int32_t>(rng() % std::min(cfg.vocab_size, 20000));

    std::vector<Run> runs;
    Run ref;
    if (o.reference) {
      ref.name = "reference";
      ref.weights = "host";
      ref.precision = "f32";
      auto t0 = Clock::now();
      auto b = qwen3::make_reference_backend(model, o.threads);
      ref.load_s = seconds_since(t0);
      ref.weight_bytes = b->info().weight_bytes;
      time_generation(*b, prompt, o.decode, ref, {});
      if (!o.json)
        std::fprintf(stderr, "reference: prefill %.1f tok/s, decode %.1f ms/token\n", ref.prefill_tok_s,
                     ref.decode_ms);
    }
    for (auto path : o.paths)
      for (auto prec : o.precisions) {
        Run r;
        r.name = "bpf";
        r.weights = qwen3::weight_path_name(path);
        r.precision = qwen3::precision_name(prec);
        qwen3::BpfEngineOptions eo;
        eo.weight_path = path;
        eo.precision = prec;
        eo.threads = o.threads;
        eo.kv_bits = o.kv_bits;
        eo.max_context = std::max(4096, o.prompt_tokens + o.decode + 1);
        auto t0 = Clock::now();
        auto b = qwen3::make_bpf_backend(model, eo);
        r.load_s = seconds_since(t0);
        r.rss_after_load = rss_bytes();
        auto* api = dynamic_cast<qwen3::BpfBackendApi*>(b.get());
        r.weight_bytes = api->stats().weight_bytes;
        time_generation(*b, prompt, o.decode, r, [api] { return api->stats().bpf_calls; });
        if (!o.json)
          std::fprintf(stderr, "bpf %s %s: load %.1f s, prefill %.1f tok/s, decode %.1f ms/token\n", r.weights.c_str(),
                       r.precision.c_str(), r.load_s, r.prefill_tok_s, r.decode_ms);
        runs.push_back(r);
      }

    if (o.json) {
      nlohmann::json j;
      j["model"] = o.model;
      j["prompt_tokens"] = o.prompt_tokens;
      j["decode_tokens"] = o.decode;
      j["threads"] = o.threads;
      j["kv_bits"] = o.kv_bits;
      j["peak_rss_bytes"] = rss_bytes("VmHWM:");
      j["load_average_1min"] = load_average();
      auto put = [&](const Run& r) {
        nlohmann::json x = {{"backend", r.name},         {"weights", r.weights},
                            {"precision", r.precision},  {"load_seconds", r.load_s},
                            {"prefill_tokens_per_second", r.prefill_tok_s},
                            {"decode_ms_per_token", r.decode_ms},
                            {"decode_cpu_ms_per_token", r.decode_cpu_ms},
                            {"bpf_calls_per_decoded_token", r.calls_per_token},
                            {"weight_bytes", r.weight_bytes}, {"kv_bytes", r.kv_bytes},
                            {"rss_after_load_bytes", r.rss_after_load}};
        if (o.reference && r.name == "bpf") {
          x["decode_ratio_vs_reference"] = r.decode_ms / ref.decode_ms;
          x["prefill_ratio_vs_reference"] = ref.prefill_tok_s / r.prefill_tok_s;
          size_t k = 0;
          while (k < r.generated.size() && k < ref.generated.size() && r.generated[k] == ref.generated[k]) k++;
          x["leading_greedy_tokens_equal_to_reference"] = k;
        }
        return x;
      };
      nlohmann::json arr = nlohmann::json::array();
      if (o.reference) arr.push_back(put(ref));
      for (auto& r : runs) arr.push_back(put(r));
      j["runs"] = arr;
      std::printf("%s\n", j.dump(2).c_str());
      return 0;
    }
    std::printf("model %s: %d layers, hidden %d, vocab %d; prompt %d tokens, decode %d tokens, %d threads, "
                "int%d KV\n",
                o.model.c_str(), cfg.num_hidden_layers, cfg.hidden_size, cfg.vocab_size, o.prompt_tokens, o.decode,
                o.threads, o.kv_bits);
    std::printf("%-10s %-6s %-5s %8s %12s %12s %12s %10s %12s %10s %12s %s\n", "backend", "path", "prec", "load s",
                "prefill t/s", "decode ms/t", "cpu ms/t", "bpf/token", "weights MiB", "KV KiB/pos", "vs reference",
                "same greedy");
    auto row = [&](const Run& r) {
      std::string ratio = "-", same = "-";
      if (o.reference && r.name == "bpf") {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.2fx decode", r.decode_ms / ref.decode_ms);
        ratio = buf;
        size_t k = 0;
        while (k < r.generated.size() && k < ref.generated.size() && r.generated[k] == ref.generated[k]) k++;
        same = std::to_string(k) + "/" + std::to_string(r.generated.size());
      }
      double kv_pos = r.kv_bytes / 1024.0 / double(o.prompt_tokens + o.decode + 1);
      std::printf("%-10s %-6s %-5s %8.1f %12.1f %12.1f %12.1f %10.1f %12.0f %10.1f %12s %s\n", r.name.c_str(),
                  r.weights.c_str(), r.precision.c_str(), r.load_s, r.prefill_tok_s, r.decode_ms, r.decode_cpu_ms,
                  r.calls_per_token, r.weight_bytes / 1048576.0, kv_pos, ratio.c_str(), same.c_str());
    };
    if (o.reference) row(ref);
    for (auto& r : runs) row(r);
    std::printf("peak resident memory of this process: %.0f MiB (1-minute load average %.1f)\n",
                rss_bytes("VmHWM:") / 1048576.0, load_average());
  } catch (const qwen3::Error& e) {
    std::fprintf(stderr, "qwen3-bpf-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
