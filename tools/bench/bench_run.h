// The figures of one qwen3-bpf-bench run (options, per-backend results) and how they are reported:
// a JSON object (--json) or tables. qwen3_bpf_bench.cpp measures, bench_report.cpp prints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/bpf_backend.h"
#include "model/model_config.h"
#include "sampling/speculative.h"

namespace qwen3::bench {

struct Options {
  std::string model;
  bool json = false;
  std::vector<WeightPath> paths{WeightPath::map};
  std::vector<Precision> precisions{Precision::q24, Precision::q8};
  int prompt_tokens = 32;
  int decode = 16;
  int threads = 2;
  int kv_bits = BpfEngineOptions{}.kv_bits;
  bool reference = true;
  std::vector<int> sessions;   // session counts compared with one session
  int context = 0;             // long context compared with prompt_tokens
  bool context_copy = true;    // fill the long context by copying, not by a real prefill
  int prefill = 0;             // prompt length of the prefill figure (0: prompt_tokens)
  int rounds = 2;              // interleaved rounds of the sessions/context figures
  std::string prompt_file;     // the prompt as text (tokenized), instead of random ids
  std::string prompt_chat;     // chat messages (JSON), through the model's chat template
  std::vector<bool> speculative;  // modes of the speculative figure: {} none, {false}, {true}, {false, true}
  float temperature = 0;          // of the speculative figure (0: greedy)
  std::vector<std::string> drivers;  // --driver: "user", "kernel" or both (docs/kernel-driver.md)
  SpeculativeOptions spec;
};

struct Run {
  std::string name, weights, precision;
  double load_s = 0, prefill_tok_s = 0, decode_ms = 0, calls_per_token = 0;
  double decode_cpu_ms = 0;  // CPU time (user + kernel, all threads) per decoded token
  size_t weight_bytes = 0, kv_bytes = 0, rss_after_load = 0;
  std::vector<int32_t> generated;
  double prefill_n_tok_s = 0;  // --prefill
  struct Sessions {
    int n = 0;
    double tokens_per_s = 0, cpu_ms_per_token = 0, ratio = 0;  // ratio: tokens/s vs one session, same rounds
  };
  std::vector<Sessions> sessions;
  struct Context {
    int positions = 0;
    double decode_ms = 0, cpu_ms = 0, ratio = 0;  // ratio: ms/token vs the short context, same rounds
  };
  std::vector<Context> context;  // [0] short (prompt_tokens), [1] long (--context)
  struct Speculative {
    bool on = false;
    double wall_s = 0, cpu_s = 0;
    uint64_t tokens = 0, steps = 0, drafted = 0, accepted = 0;
    std::vector<int32_t> generated;  // of the last round
    std::vector<double> round_tps, round_cpu_ms;  // per round: decode tokens/s, CPU ms per token
  };
  std::vector<Speculative> speculative;  // per mode of --speculative
  struct Driver {
    std::string name;                   // "user" | "kernel"
    std::vector<double> ms, cpu_ms;     // per round: decode ms per token, CPU ms per token
    double best_ms = 0, median_ms = 0, median_cpu_ms = 0;
    double calls_per_token = 0;         // bpf() calls per decoded token (kernel: the whole generation's)
    double max_link_ms = 0;             // kernel: the longest uninterrupted link
    std::vector<double> second_chain_share;  // kernel, per round: shares the second CPU's chain ran
    std::vector<int32_t> generated;
    bool stable = true;                 // every round chose the same ids
  };
  std::vector<Driver> drivers;          // per --driver, rounds alternated
  bool drivers_identical = true;
  // --sessions with --driver: N sessions generating at once through the
  // daemon's scheduler on each driver (kernel: in turns), alternated.
  struct DriverSessions {
    std::string driver;
    int n = 0;
    std::vector<double> tps, cpu_ms;    // per round: aggregate decode tokens/s, CPU ms per token
    double best_tps = 0, median_tps = 0, median_cpu_ms = 0;
    double ratio_vs_user = 0;           // median of the per-round ratios (kernel rows)
  };
  std::vector<DriverSessions> driver_sessions;
  bool driver_sessions_identical = true;  // every session's ids alike on both drivers, every round
};

// What a report needs: the options, the prompt, the reference run (meaningful when o.reference)
// and the in-kernel runs.
struct Report {
  const Options& o;
  const ModelConfig& cfg;
  const std::vector<int32_t>& prompt;
  const Run& ref;
  const std::vector<Run>& runs;
};

void print_json(const Report& report);
void print_tables(const Report& report);

// --driver: greedy generations of o.decode tokens from `prompt` on each
// driver, alternated over o.rounds (bench_driver.cpp).
void time_drivers(Backend& b, const Options& o, const std::vector<int32_t>& prompt, Run& r);

// --sessions with --driver: aggregate decode tokens/s of 1 and N concurrent
// sessions on each driver through a Scheduler, alternated (bench_sessions.cpp).
void time_driver_sessions(Backend& b, const Options& o, const std::vector<int32_t>& prompt, Run& r);

// Resident memory of this process (kB -> bytes), from /proc/self/status.
size_t rss_bytes(const char* key = "VmRSS:");
double median(std::vector<double> v);  // 0 when empty
// The median over rounds of a[i] / b[i].
double median_ratio(const std::vector<double>& a, const std::vector<double>& b);
// User + system time of this process so far.
double process_cpu_seconds();
double load_average();

}  // namespace bench
