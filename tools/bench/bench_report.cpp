#include "bench_run.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace qwen3::bench {

size_t rss_bytes(const char* key) {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(key, 0) == 0) return std::strtoull(line.c_str() + std::strlen(key), nullptr, 10) * 1024;
  return 0;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// The median of the per-round ratios a[i] / b[i] (rounds alternate, so each
// pair ran close in time: robust to a neighbour's burst that a total is not).
double median_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size() && i < b.size(); i++) r.push_back(a[i] / b[i]);
  return median(std::move(r));
}

double process_cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

double load_average() {
  std::ifstream f("/proc/loadavg");
  double v = 0;
  f >> v;
  return v;
}

namespace {

size_t leading_equal(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t k = 0;
  while (k < a.size() && k < b.size() && a[k] == b[k]) k++;
  return k;
}

}  // namespace

namespace {

nlohmann::json driver_sessions_json(const Run& r) {
  nlohmann::json ds = nlohmann::json::array();
  for (auto& d : r.driver_sessions)
    ds.push_back({{"driver", d.driver},
                  {"sessions", d.n},
                  {"aggregate_tokens_per_second_best", d.best_tps},
                  {"aggregate_tokens_per_second_median", d.median_tps},
                  {"cpu_ms_per_token_median", d.median_cpu_ms},
                  {"ratio_vs_user_median", d.ratio_vs_user},
                  {"round_tokens_per_second", d.tps},
                  {"round_cpu_ms_per_token", d.cpu_ms}});
  return ds;
}

}  // namespace

void print_json(const Report& report) {
  const Options& o = report.o;
  const Run& ref = report.ref;
  const std::vector<int32_t>& prompt = report.prompt;
  const std::vector<Run>& runs = report.runs;
  nlohmann::json j;
  j["model"] = o.model;
  j["prompt_tokens"] = o.prompt_tokens;
  j["prompt_ids"] = prompt;
  if (!o.prompt_file.empty()) j["prompt_file"] = o.prompt_file;
  if (!o.prompt_chat.empty()) j["prompt_chat"] = o.prompt_chat;
  j["decode_tokens"] = o.decode;
  j["threads"] = o.threads;
  j["kv_bits"] = o.kv_bits;
  j["peak_rss_bytes"] = rss_bytes("VmHWM:");
  j["load_average_1min"] = load_average();
  j["rounds"] = o.rounds;
  if (o.prefill) j["prefill_tokens"] = o.prefill;
  if (o.context) {
    j["context"] = o.context;
    j["context_fill"] = o.context_copy ? "copy" : "prefill";
  }
  auto put = [&](const Run& r) {
    nlohmann::json x = {{"backend", r.name},         {"weights", r.weights},
                        {"precision", r.precision},  {"load_seconds", r.load_s},
                        {"prefill_tokens_per_second", r.prefill_tok_s},
                        {"decode_ms_per_token", r.decode_ms},
                        {"decode_cpu_ms_per_token", r.decode_cpu_ms},
                        {"bpf_calls_per_decoded_token", r.calls_per_token},
                        {"weight_bytes", r.weight_bytes}, {"kv_bytes", r.kv_bytes},
                        {"rss_after_load_bytes", r.rss_after_load},
                        {"generated_ids", r.generated}};
    if (o.prefill) x["prefill_n_tokens_per_second"] = r.prefill_n_tok_s;
    if (o.prefill && o.reference && r.name == "bpf")
      x["prefill_n_ratio_vs_reference"] = r.prefill_n_tok_s / ref.prefill_n_tok_s;
    if (!r.sessions.empty()) {
      nlohmann::json ss = nlohmann::json::array();
      for (auto& s : r.sessions)
        ss.push_back({{"sessions", s.n},
                      {"aggregate_tokens_per_second", s.tokens_per_s},
                      {"cpu_ms_per_token", s.cpu_ms_per_token},
                      {"ratio_vs_one_session", s.ratio}});
      x["sessions"] = ss;
    }
    if (!r.context.empty()) {
      nlohmann::json cs = nlohmann::json::array();
      for (auto& c : r.context)
        cs.push_back({{"cached_positions", c.positions},
                      {"decode_ms_per_token", c.decode_ms},
                      {"decode_cpu_ms_per_token", c.cpu_ms},
                      {"ratio_vs_short_context", c.ratio}});
      x["context"] = cs;
    }
    if (!r.speculative.empty()) {
      nlohmann::json ss = nlohmann::json::array();
      for (auto& f : r.speculative)
        ss.push_back({{"speculative", f.on},
                      {"decode_tokens", f.tokens},
                      {"decode_tokens_per_second", f.tokens / f.wall_s},
                      {"decode_cpu_ms_per_token", f.cpu_s * 1000 / f.tokens},
                      {"verification_steps", f.steps},
                      {"draft_tokens", f.drafted},
                      {"accepted_tokens", f.accepted},
                      {"acceptance_rate", f.drafted ? double(f.accepted) / f.drafted : 0.0},
                      {"speedup_vs_plain", r.speculative.size() == 2 ? (f.tokens / f.wall_s) /
                                               (r.speculative[0].tokens / r.speculative[0].wall_s) : 1.0},
                      {"round_tokens_per_second", f.round_tps},
                      {"round_cpu_ms_per_token", f.round_cpu_ms},
                      {"generated_ids", f.generated}});
      x["speculative"] = {{"temperature", o.temperature}, {"max_draft", o.spec.max_draft},
                          {"ngram", {o.spec.min_ngram, o.spec.max_ngram}}, {"modes", ss}};
      if (r.speculative.size() == 2) {
        const auto &off = r.speculative[0], &on = r.speculative[1];
        x["speculative"]["same_tokens"] = off.generated == on.generated;
        x["speculative"]["median_round_speedup"] = median_ratio(on.round_tps, off.round_tps);
        x["speculative"]["median_round_cpu_speedup"] = median_ratio(off.round_cpu_ms, on.round_cpu_ms);
      }
    }
    if (!r.drivers.empty()) {
      nlohmann::json ds = nlohmann::json::array();
      for (auto& d : r.drivers)
        ds.push_back({{"driver", d.name},
                      {"ms_per_token_best", d.best_ms},
                      {"ms_per_token_median", d.median_ms},
                      {"cpu_ms_per_token_median", d.median_cpu_ms},
                      {"round_ms_per_token", d.ms},
                      {"round_cpu_ms_per_token", d.cpu_ms},
                      {"bpf_calls_per_decoded_token", d.calls_per_token},
                      {"max_link_ms", d.max_link_ms},
                      {"round_second_chain_share", d.second_chain_share},
                      {"generated_ids", d.generated}});
      x["drivers"] = ds;
      x["drivers_identical_ids"] = r.drivers_identical;
    }
    if (!r.driver_sessions.empty()) {
      x["driver_sessions"] = driver_sessions_json(r);
      x["driver_sessions_identical_ids"] = r.driver_sessions_identical;
    }
    if (o.reference && r.name == "bpf") {
      x["decode_ratio_vs_reference"] = r.decode_ms / ref.decode_ms;
      x["prefill_ratio_vs_reference"] = ref.prefill_tok_s / r.prefill_tok_s;
      x["leading_greedy_tokens_equal_to_reference"] = leading_equal(r.generated, ref.generated);
    }
    return x;
  };
  nlohmann::json arr = nlohmann::json::array();
  if (o.reference) arr.push_back(put(ref));
  for (auto& r : runs) arr.push_back(put(r));
  j["runs"] = arr;
  std::printf("%s\n", j.dump(2).c_str());
}

namespace {

void print_driver_sessions(const Options& o, const std::vector<Run>& runs) {
  std::printf("sessions at once through the scheduler, per driver (%d rounds alternated; greedy, %d tokens each):\n",
              o.rounds, o.decode);
  std::printf("%-6s %-5s %-7s %9s %14s %14s %12s %10s\n", "path", "prec", "driver", "sessions", "best tok/s",
              "median tok/s", "cpu ms/t", "vs user");
  for (auto& r : runs) {
    for (auto& d : r.driver_sessions)
      std::printf("%-6s %-5s %-7s %9d %14.2f %14.2f %12.1f %9.2fx\n", r.weights.c_str(), r.precision.c_str(),
                  d.driver.c_str(), d.n, d.best_tps, d.median_tps, d.median_cpu_ms, d.ratio_vs_user);
    std::printf("%s %s: identical ids on both drivers, every session and round: %s\n", r.weights.c_str(),
                r.precision.c_str(), r.driver_sessions_identical ? "yes" : "NO");
  }
}

}  // namespace

void print_tables(const Report& report) {
  const Options& o = report.o;
  const ModelConfig& cfg = report.cfg;
  const Run& ref = report.ref;
  const std::vector<Run>& runs = report.runs;
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
      same = std::to_string(leading_equal(r.generated, ref.generated)) + "/" + std::to_string(r.generated.size());
    }
    double kv_pos = r.kv_bytes / 1024.0 / double(o.prompt_tokens + o.decode + 1);
    std::printf("%-10s %-6s %-5s %8.1f %12.1f %12.1f %12.1f %10.1f %12.0f %10.1f %12s %s\n", r.name.c_str(),
                r.weights.c_str(), r.precision.c_str(), r.load_s, r.prefill_tok_s, r.decode_ms, r.decode_cpu_ms,
                r.calls_per_token, r.weight_bytes / 1048576.0, kv_pos, ratio.c_str(), same.c_str());
  };
  if (o.reference) row(ref);
  for (auto& r : runs) row(r);
  if (o.prefill) {
    std::printf("prefill of %d tokens:", o.prefill);
    if (o.reference) std::printf(" reference %.1f tok/s;", ref.prefill_n_tok_s);
    for (auto& r : runs) {
      std::printf(" bpf %s %s %.1f tok/s", r.weights.c_str(), r.precision.c_str(), r.prefill_n_tok_s);
      if (o.reference) std::printf(" (%.2fx reference)", r.prefill_n_tok_s / ref.prefill_n_tok_s);
      std::printf(";");
    }
    std::printf("\n");
  }
  if (!o.sessions.empty()) {
    std::printf("concurrent sessions (%d rounds x %d decode steps each, interleaved):\n", o.rounds, o.decode);
    std::printf("%-6s %-5s %9s %18s %14s %14s\n", "path", "prec", "sessions", "aggregate tok/s", "cpu ms/token",
                "vs 1 session");
    for (auto& r : runs)
      for (auto& s : r.sessions)
        std::printf("%-6s %-5s %9d %18.2f %14.1f %13.2fx\n", r.weights.c_str(), r.precision.c_str(), s.n,
                    s.tokens_per_s, s.cpu_ms_per_token, s.ratio);
  }
  if (o.context) {
    std::printf("decode at long context (%d rounds x %d steps, interleaved; long cache filled by %s):\n", o.rounds,
                o.decode, o.context_copy ? "copying a real prefill" : "a real prefill");
    std::printf("%-6s %-5s %16s %14s %12s %16s\n", "path", "prec", "cached positions", "decode ms/t", "cpu ms/t",
                "vs short context");
    for (auto& r : runs)
      for (auto& c : r.context)
        std::printf("%-6s %-5s %16d %14.1f %12.1f %15.2fx\n", r.weights.c_str(), r.precision.c_str(), c.positions,
                    c.decode_ms, c.cpu_ms, c.ratio);
  }
  if (!o.speculative.empty()) {
    std::printf("speculative decoding (%d rounds, modes alternated; %s; draft <= %d, n-grams %d..%d):\n", o.rounds,
                o.temperature > 0 ? ("sampled, temperature " + std::to_string(o.temperature)).c_str() : "greedy",
                o.spec.max_draft, o.spec.min_ngram, o.spec.max_ngram);
    std::printf("%-6s %-5s %-5s %8s %12s %10s %8s %9s %9s %11s %10s\n", "path", "prec", "spec", "tokens",
                "decode t/s", "cpu ms/t", "steps", "drafted", "accepted", "acceptance", "vs plain");
    for (auto& r : runs)
      for (auto& f : r.speculative) {
        const double tps = f.tokens / f.wall_s;
        const double plain = r.speculative[0].tokens / r.speculative[0].wall_s;
        std::printf("%-6s %-5s %-5s %8llu %12.1f %10.1f %8llu %9llu %9llu %10.1f%% %9.2fx\n", r.weights.c_str(),
                    r.precision.c_str(), f.on ? "on" : "off", (unsigned long long)f.tokens, tps,
                    f.cpu_s * 1000 / f.tokens, (unsigned long long)f.steps, (unsigned long long)f.drafted,
                    (unsigned long long)f.accepted, f.drafted ? 100.0 * f.accepted / f.drafted : 0.0,
                    r.speculative.size() == 2 ? tps / plain : 1.0);
      }
    for (auto& r : runs)
      if (r.speculative.size() == 2) {
        const auto &off = r.speculative[0], &on = r.speculative[1];
        std::printf("%s %s: median of the per-round ratios: %.2fx tokens/s, %.2fx less CPU per token; same tokens "
                    "with and without speculation: %s\n",
                    r.weights.c_str(), r.precision.c_str(), median_ratio(on.round_tps, off.round_tps),
                    median_ratio(off.round_cpu_ms, on.round_cpu_ms), off.generated == on.generated ? "yes" : "NO");
      }
  }
  if (!o.drivers.empty()) {
    std::printf("drivers (%d rounds, alternated; greedy, %d tokens):\n", o.rounds, o.decode);
    std::printf("%-6s %-5s %-7s %12s %14s %14s %12s %12s\n", "path", "prec", "driver", "best ms/t", "median ms/t",
                "median cpu/t", "bpf()/t", "max link ms");
    for (auto& r : runs) {
      for (auto& d : r.drivers)
        std::printf("%-6s %-5s %-7s %12.2f %14.2f %14.2f %12.3f %12.2f\n", r.weights.c_str(), r.precision.c_str(),
                    d.name.c_str(), d.best_ms, d.median_ms, d.median_cpu_ms, d.calls_per_token, d.max_link_ms);
      std::printf("%s %s: identical ids on every driver and round: %s\n", r.weights.c_str(), r.precision.c_str(),
                  r.drivers_identical ? "yes" : "NO");
    }
  }
  if (!o.drivers.empty() && !o.sessions.empty()) print_driver_sessions(o, runs);
  std::printf("peak resident memory of this process: %.0f MiB (1-minute load average %.1f)\n",
              rss_bytes("VmHWM:") / 1048576.0, load_average());
}

}  // namespace qwen3::bench
