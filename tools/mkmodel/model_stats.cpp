// qwen3-bpf-modelstats MODEL_DIR [--prompts N] [--length L] [--seed S] [--threads T]
// Runs the float reference over random-token prompts and prints what the
// generator's scaling produces: per-layer residual magnitudes (outlier channels
// apart), logit spread, top-1 margins, and the reference's own speed.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/mapped_file.h"
#include "model/model_dir.h"
#include "reference/reference_backend.h"

using namespace qwen3;

namespace {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

double cpu_seconds() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: qwen3-bpf-modelstats MODEL_DIR [--prompts N] [--length L] [--seed S] [--threads T]\n");
    return 2;
  }
  std::string dir = argv[1];
  int prompts = 8, length = 32, threads = 2, decode = 8, verbose = 0;
  unsigned seed = 7;
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    int v = std::atoi(argv[i + 1]);
    if (a == "--prompts") prompts = v;
    else if (a == "--length") length = v;
    else if (a == "--seed") seed = static_cast<unsigned>(v);
    else if (a == "--threads") threads = v;
    else if (a == "--decode") decode = v;
    else if (a == "--verbose") verbose = v;
    else { std::fprintf(stderr, "unknown option %s\n", a.c_str()); return 2; }
  }
  try {
    auto t0 = std::chrono::steady_clock::now();
    auto model = ModelDir::open(dir);
    double load_s = seconds_since(t0);
    t0 = std::chrono::steady_clock::now();
    ReferenceBackend backend(model, threads);
    double init_s = seconds_since(t0);
    const ModelConfig& c = model->config();

    std::vector<int> outliers;
    auto cfg = nlohmann::json::parse(read_text_file(dir + "/config.json"));
    if (cfg.contains("qwen3_bpf_generated") && cfg["qwen3_bpf_generated"].contains("outlier_channels"))
      outliers = cfg["qwen3_bpf_generated"]["outlier_channels"].get<std::vector<int>>();
    auto is_outlier = [&](int ch) { return std::find(outliers.begin(), outliers.end(), ch) != outliers.end(); };

    // Per layer: max |x| over outlier channels and over the others; rms of the others.
    const int L = c.num_hidden_layers;
    std::vector<double> max_out(L + 1, 0), max_rest(L + 1, 0), ss_rest(L + 1, 0);
    std::vector<double> n_rest(L + 1, 0);
    std::vector<double> margins, logit_std;
    int self_argmax = 0, positions = 0;
    std::vector<int32_t> current;
    backend.set_trace([&](const TracePoint& p) {
      int slot = -1;
      if (p.stage == TraceStage::embedding) slot = 0;
      if (p.stage == TraceStage::residual) slot = p.layer + 1;
      if (slot >= 0) {
        for (int r = 0; r < p.rows; ++r)
          for (int ch = 0; ch < p.cols; ++ch) {
            double v = std::fabs(p.data[r * p.cols + ch]);
            if (is_outlier(ch)) {
              max_out[slot] = std::max(max_out[slot], v);
            } else {
              max_rest[slot] = std::max(max_rest[slot], v);
              ss_rest[slot] += v * v;
              n_rest[slot] += 1;
            }
          }
      }
      if (p.stage == TraceStage::final_norm || p.stage == TraceStage::attn_norm || p.stage == TraceStage::mlp_norm) {
        double ss = 0, n = 0, mo = 0;
        for (int r = 0; r < p.rows; ++r)
          for (int ch = 0; ch < p.cols; ++ch) {
            double v = p.data[r * p.cols + ch];
            if (is_outlier(ch)) mo = std::max(mo, std::fabs(v));
            else { ss += v * v; n += 1; }
          }
        if (verbose) std::printf("  %s layer %d: rms(other) %.3f max|outlier| %.3f\n", trace_stage_name(p.stage), p.layer, std::sqrt(ss / n), mo);
      }
      if (p.stage == TraceStage::logits) {
        for (int r = 0; r < p.rows; ++r) {
          const float* row = p.data + static_cast<size_t>(r) * p.cols;
          double sum = 0, sq = 0;
          float best = -INFINITY, second = -INFINITY;
          int best_id = -1;
          for (int i = 0; i < p.cols; ++i) {
            sum += row[i];
            sq += static_cast<double>(row[i]) * row[i];
            if (row[i] > best) { second = best; best = row[i]; best_id = i; }
            else if (row[i] > second) second = row[i];
          }
          double mean = sum / p.cols;
          logit_std.push_back(std::sqrt(std::max(0.0, sq / p.cols - mean * mean)));
          margins.push_back(best - second);
          int pos = p.first_position + r;
          if (pos < static_cast<int>(current.size()) && best_id == current[pos]) ++self_argmax;
          ++positions;
        }
      }
    });

    std::mt19937 rng(seed);
    std::uniform_int_distribution<int32_t> ids(0, 151642);
    double prefill_s = 0;
    for (int p = 0; p < prompts; ++p) {
      current.resize(length);
      for (auto& id : current) id = ids(rng);
      auto kv = backend.create_kv(length);
      auto t1 = std::chrono::steady_clock::now();
      backend.forward(*kv, current, ForwardWants{.all_positions = true});
      prefill_s += seconds_since(t1);
    }

    std::printf("model %s: hidden %d, layers %d, vocab %d, outlier channels %zu\n", dir.c_str(), c.hidden_size, L,
                c.vocab_size, outliers.size());
    std::printf("load %.3f s, reference init %.3f s, weights %.1f MB\n", load_s, init_s,
                backend.info().weight_bytes / 1e6);
    std::printf("%-10s %14s %14s %14s\n", "stage", "max|outlier|", "max|other|", "rms(other)");
    for (int s = 0; s <= L; ++s)
      std::printf("%-10s %14.2f %14.2f %14.3f\n", s == 0 ? "embedding" : ("layer " + std::to_string(s - 1)).c_str(),
                  max_out[s], max_rest[s], std::sqrt(ss_rest[s] / std::max(1.0, n_rest[s])));
    std::printf("positions %d: logit std median %.2f; top-1 margin p10 %.3f p25 %.3f median %.3f p75 %.3f p90 %.3f;"
                " margin < 0.05: %.1f%%; argmax == input token: %.1f%%\n",
                positions, percentile(logit_std, 0.5), percentile(margins, 0.1), percentile(margins, 0.25),
                percentile(margins, 0.5), percentile(margins, 0.75), percentile(margins, 0.9),
                100.0 * std::count_if(margins.begin(), margins.end(), [](double m) { return m < 0.05; }) /
                    std::max<size_t>(1, margins.size()),
                100.0 * self_argmax / std::max(1, positions));

    // Speed: prefill of the prompts above, then greedy decode.
    backend.set_trace(nullptr);
    auto kv = backend.create_kv(length + decode);
    auto t1 = std::chrono::steady_clock::now();
    double c1 = cpu_seconds();
    auto r = backend.forward(*kv, current, ForwardWants{});
    double pf = seconds_since(t1), pf_cpu = cpu_seconds() - c1;
    int32_t next = r.positions.back().argmax;
    t1 = std::chrono::steady_clock::now();
    c1 = cpu_seconds();
    for (int i = 0; i < decode; ++i) next = backend.forward(*kv, std::span<const int32_t>(&next, 1), {}).positions[0].argmax;
    double dec = seconds_since(t1), dec_cpu = cpu_seconds() - c1;
    // CPU seconds are shown too: on a shared machine they say more than wall time.
    std::printf("reference speed (%d threads): prefill %.1f tokens/s (%d tokens; %.1f CPU-ms/token), "
                "decode %.1f ms/token (%.1f CPU-ms/token)\n",
                threads, length / pf, length, 1000.0 * pf_cpu / length, 1000.0 * dec / std::max(1, decode),
                1000.0 * dec_cpu / std::max(1, decode));
    (void)prefill_s;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qwen3-bpf-modelstats: %s\n", e.what());
    return 1;
  }
  return 0;
}
