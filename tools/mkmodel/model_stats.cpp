// qwen3-bpf-modelstats MODEL_DIR [--prompts N] [--length L] [--seed S] [--threads T] [--decode D] [--verbose]
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

#include "cli_parse.h"

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

struct Options {
  std::string dir;
  int prompts = 8, length = 32, threads = 2, decode = 8;
  bool verbose = false;
  unsigned seed = 7;
};

// What the trace callback gathers over the prompts' prefill.
class ActivationStats {
 public:
  ActivationStats(int layers, std::vector<int> outliers, bool verbose)
      : max_out_(layers + 1), max_rest_(layers + 1), ss_rest_(layers + 1), n_rest_(layers + 1),
        outliers_(std::move(outliers)), verbose_(verbose) {}

  // The prompt whose logits arrive next (for the argmax == input count).
  void set_prompt(const std::vector<int32_t>* prompt) { prompt_ = prompt; }

  void on_trace(const TracePoint& p) {
    if (p.stage == TraceStage::embedding) add_residual(0, p);
    if (p.stage == TraceStage::residual) add_residual(p.layer + 1, p);
    if (verbose_ && (p.stage == TraceStage::final_norm || p.stage == TraceStage::attn_norm ||
                     p.stage == TraceStage::mlp_norm))
      print_norm(p);
    if (p.stage == TraceStage::logits) add_logits(p);
  }

  void print(int layers) const {
    std::printf("%-10s %14s %14s %14s\n", "stage", "max|outlier|", "max|other|", "rms(other)");
    for (int s = 0; s <= layers; ++s)
      std::printf("%-10s %14.2f %14.2f %14.3f\n", s == 0 ? "embedding" : ("layer " + std::to_string(s - 1)).c_str(),
                  max_out_[s], max_rest_[s], std::sqrt(ss_rest_[s] / std::max(1.0, n_rest_[s])));
    std::printf("positions %d: logit std median %.2f; top-1 margin p10 %.3f p25 %.3f median %.3f p75 %.3f p90 %.3f;"
                " margin < 0.05: %.1f%%; argmax == input token: %.1f%%\n",
                positions_, percentile(logit_std_, 0.5), percentile(margins_, 0.1), percentile(margins_, 0.25),
                percentile(margins_, 0.5), percentile(margins_, 0.75), percentile(margins_, 0.9),
                100.0 * std::count_if(margins_.begin(), margins_.end(), [](double m) { return m < 0.05; }) /
                    std::max<size_t>(1, margins_.size()),
                100.0 * self_argmax_ / std::max(1, positions_));
  }

 private:
  bool is_outlier(int ch) const { return std::find(outliers_.begin(), outliers_.end(), ch) != outliers_.end(); }

  // Per layer: max |x| over outlier channels and over the others; rms of the others.
  void add_residual(int slot, const TracePoint& p) {
    for (int r = 0; r < p.rows; ++r)
      for (int ch = 0; ch < p.cols; ++ch) {
        double v = std::fabs(p.data[r * p.cols + ch]);
        if (is_outlier(ch)) {
          max_out_[slot] = std::max(max_out_[slot], v);
        } else {
          max_rest_[slot] = std::max(max_rest_[slot], v);
          ss_rest_[slot] += v * v;
          n_rest_[slot] += 1;
        }
      }
  }

  void print_norm(const TracePoint& p) const {
    double ss = 0, n = 0, mo = 0;
    for (int r = 0; r < p.rows; ++r)
      for (int ch = 0; ch < p.cols; ++ch) {
        double v = p.data[r * p.cols + ch];
        if (is_outlier(ch)) mo = std::max(mo, std::fabs(v));
        else { ss += v * v; n += 1; }
      }
    std::printf("  %s layer %d: rms(other) %.3f max|outlier| %.3f\n", trace_stage_name(p.stage), p.layer,
                std::sqrt(ss / n), mo);
  }

  void add_logits(const TracePoint& p) {
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
      logit_std_.push_back(std::sqrt(std::max(0.0, sq / p.cols - mean * mean)));
      margins_.push_back(best - second);
      int pos = p.first_position + r;
      if (prompt_ && pos < static_cast<int>(prompt_->size()) && best_id == (*prompt_)[pos]) ++self_argmax_;
      ++positions_;
    }
  }

  std::vector<double> max_out_, max_rest_, ss_rest_, n_rest_, margins_, logit_std_;
  std::vector<int> outliers_;
  bool verbose_;
  const std::vector<int32_t>* prompt_ = nullptr;
  int self_argmax_ = 0, positions_ = 0;
};

// The generator's planted outlier channels, from config.json (none for other models).
std::vector<int> planted_outliers(const std::string& dir) {
  auto cfg = nlohmann::json::parse(read_text_file(dir + "/config.json"));
  if (cfg.contains("qwen3_bpf_generated") && cfg["qwen3_bpf_generated"].contains("outlier_channels"))
    return cfg["qwen3_bpf_generated"]["outlier_channels"].get<std::vector<int>>();
  return {};
}

// Speed: prefill of `prompt`, then greedy decode. CPU seconds are shown too: on a shared machine
// they say more than wall time.
void print_speed(ReferenceBackend& backend, const std::vector<int32_t>& prompt, const Options& o) {
  backend.set_trace(nullptr);
  auto kv = backend.create_kv(o.length + o.decode);
  auto t1 = std::chrono::steady_clock::now();
  double c1 = cpu_seconds();
  auto r = backend.forward(*kv, prompt, ForwardWants{});
  double pf = seconds_since(t1), pf_cpu = cpu_seconds() - c1;
  int32_t next = r.positions.back().argmax;
  t1 = std::chrono::steady_clock::now();
  c1 = cpu_seconds();
  for (int i = 0; i < o.decode; ++i)
    next = backend.forward(*kv, std::span<const int32_t>(&next, 1), {}).positions[0].argmax;
  double dec = seconds_since(t1), dec_cpu = cpu_seconds() - c1;
  std::printf("reference speed (%d threads): prefill %.1f tokens/s (%d tokens; %.1f CPU-ms/token), "
              "decode %.1f ms/token (%.1f CPU-ms/token)\n",
              o.threads, o.length / pf, o.length, 1000.0 * pf_cpu / o.length, 1000.0 * dec / std::max(1, o.decode),
              1000.0 * dec_cpu / std::max(1, o.decode));
}

void run(const Options& o) {
  auto t0 = std::chrono::steady_clock::now();
  auto model = ModelDir::open(o.dir);
  double load_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  ReferenceBackend backend(model, o.threads);
  double init_s = seconds_since(t0);
  const ModelConfig& c = model->config();
  const std::vector<int> outliers = planted_outliers(o.dir);

  ActivationStats stats(c.num_hidden_layers, outliers, o.verbose);
  backend.set_trace([&](const TracePoint& p) { stats.on_trace(p); });
  std::mt19937 rng(o.seed);
  std::uniform_int_distribution<int32_t> ids(0, 151642);
  std::vector<int32_t> prompt(o.length);
  stats.set_prompt(&prompt);
  for (int p = 0; p < o.prompts; ++p) {
    for (auto& id : prompt) id = ids(rng);
    auto kv = backend.create_kv(o.length);
    backend.forward(*kv, prompt, ForwardWants{.all_positions = true});
  }

  std::printf("model %s: hidden %d, layers %d, vocab %d, outlier channels %zu\n", o.dir.c_str(), c.hidden_size,
              c.num_hidden_layers, c.vocab_size, outliers.size());
  std::printf("load %.3f s, reference init %.3f s, weights %.1f MB\n", load_s, init_s,
              backend.info().weight_bytes / 1e6);
  stats.print(c.num_hidden_layers);
  print_speed(backend, prompt, o);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"Runs the float reference over random-token prompts and prints per-layer activation and logit statistics."};
  qwen3::cli_parse::init(app, "qwen3-bpf-modelstats");
  app.add_option("MODEL_DIR", o.dir, "the model directory")->required();
  app.add_option("--prompts", o.prompts, "random prompts to trace")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--length", o.length, "tokens per prompt")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--seed", o.seed, "seed of the prompts")->capture_default_str()->check(qwen3::cli_parse::non_negative_integer());
  app.add_option("--threads", o.threads, "reference threads")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--decode", o.decode, "greedy decode steps for the speed line")->capture_default_str()->check(CLI::NonNegativeNumber);
  app.add_flag("--verbose", o.verbose, "print every norm's statistics");
  if (int rc = qwen3::cli_parse::parse(app, argc, argv); rc >= 0) return rc;
  try {
    run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qwen3-bpf-modelstats: %s\n", e.what());
    return 1;
  }
  return 0;
}
