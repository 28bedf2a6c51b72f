// qwen3-bpf-bench: speed and memory of the in-kernel backend on one model, for
// each weight path and precision, with the float reference timed on the same
// prompt in the same run.
//
//   qwen3-bpf-bench --model DIR [--json] [--weights map|arena|both]
//                   [--precision q24|q8|both] [--prompt-tokens N] [--decode N]
//                   [--threads N] [--kv-bits 8|16] [--no-reference]
//                   [--sessions N[,N...]] [--context N] [--context-fill copy|prefill]
//                   [--prefill N] [--rounds N] [--prompt-file F]
//                   [--prompt-chat F.json] [--speculative on|off|both] [--temperature T] [--speculative-draft K]
//                   [--speculative-ngram MIN,MAX]
//
// --prompt-file: the prompt as text, tokenized with the model directory's
//   tokenizer (instead of --prompt-tokens random ids). --json lists each
//   run's prompt and generated ids.
// --sessions: aggregate decode tokens/s of N sessions stepping together
//   (one forward_batch per step) against one session, A and B interleaved
//   over --rounds rounds so machine noise hits both.
// --context: decode ms/token after N cached positions against the
//   --prompt-tokens context, interleaved the same way. `copy` (default) fills
//   the cache by a real prefill of --prompt-tokens positions repeated up to N
//   (attention's cost does not depend on the cached values; a real prefill of
//   thousands of positions takes minutes here), `prefill` runs the real thing.
// --prefill: prefill tokens/s of an N-token prompt (default: --prompt-tokens).
// --prompt-chat: the prompt as chat messages (a JSON array of {role,
//   content}) through the model's chat template, thinking off; a last
//   assistant message is the start of the answer, which the model continues.
// --speculative: decode --decode tokens (until EOS) by prompt-lookup
//   speculative decoding (daemon/sampling/speculative.h), plain decoding, or
//   both alternated over --rounds rounds (fresh cache each, prefill untimed):
//   decode tokens/s, CPU time, drafted/accepted tokens and the acceptance
//   rate. Greedy unless --temperature > 0 (then seeded sampling with the
//   model's top_k/top_p defaults).
#include <bpf/bpf.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_parse.h"
#include "common/error.h"
#include "engine/bpf_backend.h"
#include "engine/bpf_kv_cache.h"
#include "model/model_dir.h"
#include "reference/reference_backend.h"
#include "sampling/speculative.h"
#include "layout.h"  // QN_THREADS_LIMIT, qn_kv_*
#include "tokenizer/tokenizer.h"

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
  int kv_bits = qwen3::BpfEngineOptions{}.kv_bits;
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
  qwen3::SpeculativeOptions spec;
};

Options parse(int argc, char** argv) {
  Options o;
  std::string weights = "map", precision = "both", context_fill = "copy", speculative;
  std::vector<int> ngram;
  CLI::App app{"Speed and memory of the in-kernel backend on one model, for each weight path and precision,\n"
               "with the float reference timed on the same prompt in the same run."};
  qwen3::cli_parse::init(app, "qwen3-bpf-bench");
  app.add_option("--model", o.model, "model directory")->required();
  app.add_flag("--json", o.json, "one JSON object instead of the table");
  app.add_option("--weights", weights, "map | arena | both")
      ->capture_default_str()
      ->check(CLI::IsMember({"map", "arena", "both"}));
  app.add_option("--precision", precision, "q24 | q8 | both")
      ->capture_default_str()
      ->check(CLI::IsMember({"q24", "q8", "both"}));
  app.add_option("--prompt-tokens", o.prompt_tokens, "prompt length")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--decode", o.decode, "decoded tokens")->capture_default_str()->check(CLI::Range(1, 4096));
  app.add_option("--threads", o.threads, "worker threads")->capture_default_str()->check(CLI::Range(1, QN_THREADS_LIMIT));
  app.add_option("--kv-bits", o.kv_bits, "8 | 16")->capture_default_str()->check(CLI::IsMember({8, 16}));
  app.add_flag_callback("--no-reference", [&o] { o.reference = false; }, "skip the float reference");
  app.add_option("--sessions", o.sessions,
                 "N[,N...]: aggregate decode tokens/s of N sessions stepping together against one session")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  app.add_option("--context", o.context, "decode ms/token after N cached positions against --prompt-tokens")
      ->check(CLI::Range(2, 131072));
  app.add_option("--context-fill", context_fill, "copy (repeat a real prefill) | prefill (the real thing)")
      ->capture_default_str()
      ->check(CLI::IsMember({"copy", "prefill"}));
  app.add_option("--prefill", o.prefill, "prefill tokens/s of an N-token prompt (default: --prompt-tokens)")
      ->check(CLI::Range(1, 65536));
  app.add_option("--prompt-file", o.prompt_file, "the prompt as text, tokenized with the model's tokenizer")
      ->check(CLI::ExistingFile);
  app.add_option("--prompt-chat", o.prompt_chat,
                 "the prompt as chat messages, a JSON array of {role, content}, through the model's chat template "
                 "(thinking off)")
      ->check(CLI::ExistingFile)
      ->excludes("--prompt-file");
  app.add_option("--rounds", o.rounds, "interleaved rounds of the sessions/context figures")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  app.add_option("--speculative", speculative,
                 "decode by prompt-lookup speculative decoding (on), plainly (off), or both alternated")
      ->check(CLI::IsMember({"on", "off", "both"}));
  app.add_option("--temperature", o.temperature, "sampling temperature of the --speculative figure (0: greedy)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0));
  app.add_option("--speculative-draft", o.spec.max_draft, "longest draft")->capture_default_str()->check(CLI::Range(1, 15));
  app.add_option("--speculative-ngram", ngram, "MIN,MAX: n-gram lengths the lookup tries")
      ->delimiter(',')
      ->expected(2)
      ->check(CLI::Range(1, 16));
  if (int rc = qwen3::cli_parse::parse(app, argc, argv); rc >= 0) std::exit(rc);
  if (speculative == "on") o.speculative = {true};
  else if (speculative == "off") o.speculative = {false};
  else if (speculative == "both") o.speculative = {false, true};
  if (ngram.size() == 2) {
    o.spec.min_ngram = ngram[0];
    o.spec.max_ngram = ngram[1];
    if (ngram[0] > ngram[1]) qwen3::cli_parse::usage_error(app, "--speculative-ngram MIN,MAX needs MIN <= MAX");
  }
  if (weights == "both") o.paths = {qwen3::WeightPath::map, qwen3::WeightPath::arena};
  else o.paths = {qwen3::parse_weight_path(weights)};
  if (precision == "both") o.precisions = {qwen3::Precision::q24, qwen3::Precision::q8};
  else o.precisions = {qwen3::parse_precision(precision)};
  o.context_copy = context_fill == "copy";
  if (o.context && o.context <= o.prompt_tokens)
    qwen3::cli_parse::usage_error(app, "--context must exceed --prompt-tokens (the short context)");
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

std::vector<int32_t> random_ids(std::mt19937_64& rng, int n, int vocab) {
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % std::min(vocab, 20000));
  return ids;
}

// Prefill tokens/s of one prompt in a fresh cache.
double time_prefill(qwen3::Backend& b, const std::vector<int32_t>& prompt) {
  auto kv = b.create_kv(static_cast<int>(prompt.size()) + 1);
  auto t0 = Clock::now();
  b.forward(*kv, prompt, {});
  return prompt.size() / seconds_since(t0);
}

// Sessions that decode greedily in lock step: one forward_batch per step.
struct DecodeGroup {
  std::vector<std::unique_ptr<qwen3::KvCache>> kv;
  std::vector<int32_t> next;
  // Runs `steps` batched decode steps; returns (wall s, cpu s).
  std::pair<double, double> step(qwen3::Backend& b, int steps) {
    std::vector<qwen3::ForwardResult> res(kv.size());
    std::vector<qwen3::BatchItem> items(kv.size());
    double cpu0 = cpu_seconds();
    auto t0 = Clock::now();
    for (int s = 0; s < steps; s++) {
      for (size_t i = 0; i < kv.size(); i++)
        items[i] = {kv[i].get(), std::span<const int32_t>(&next[i], 1), {}, &res[i]};
      b.forward_batch(items);
      for (size_t i = 0; i < kv.size(); i++) next[i] = res[i].positions.back().argmax;
    }
    return {seconds_since(t0), cpu_seconds() - cpu0};
  }
};

// Brings a BPF cache to `positions` cached positions: a real prefill of the
// prompt, then its K/V records repeated (entries of QN_KV_BLOCK positions of
// one kv head and layer, layout.h: qn_kv_*; docs/kv-cache.md). Attention's
// work per position does not depend on the values.
void fill_by_copy(qwen3::Backend& b, qwen3::KvCache& kv, const std::vector<int32_t>& prompt, int positions) {
  auto* cache = dynamic_cast<qwen3::engine::BpfKvCache*>(&kv);
  if (!cache) throw qwen3::invalid_argument("--context-fill copy needs the BPF backend's caches");
  b.forward(kv, prompt, {});
  const auto& cfg = b.config();
  const uint32_t layers = cfg.num_hidden_layers, heads = cfg.num_key_value_heads;
  bpf_map_info info{};
  uint32_t len = sizeof info;
  if (bpf_map_get_info_by_fd(cache->map_fd(), &info, &len) != 0 ||
      info.max_entries != qn_kv_entries(layers, heads, static_cast<uint32_t>(kv.max_context())) ||
      info.value_size % QN_KV_BLOCK != 0)
    throw qwen3::invalid_argument("the KV cache is not in blocks of QN_KV_BLOCK records; use --context-fill prefill");
  const uint32_t rec = info.value_size / QN_KV_BLOCK;
  std::vector<uint8_t> all(size_t(info.max_entries) * info.value_size);
  auto entry = [&](uint32_t key) { return all.data() + size_t(key) * info.value_size; };
  for (uint32_t key = 0; key < info.max_entries; key++)
    if (bpf_map_lookup_elem(cache->map_fd(), &key, entry(key)) != 0)
      throw qwen3::Error("reading KV entry " + std::to_string(key) + " failed");
  const uint32_t n = static_cast<uint32_t>(prompt.size());
  for (uint32_t pos = n; pos < static_cast<uint32_t>(positions); pos++)
    for (uint32_t l = 0; l < layers; l++)
      for (uint32_t h = 0; h < heads; h++) {
        const uint32_t from = pos % n;
        std::memcpy(entry(qn_kv_key(layers, heads, l, h, pos)) + qn_kv_rec_off(rec, pos),
                    entry(qn_kv_key(layers, heads, l, h, from)) + qn_kv_rec_off(rec, from), rec);
      }
  for (uint32_t key = 0; key < info.max_entries; key++)
    if (bpf_map_update_elem(cache->map_fd(), &key, entry(key), BPF_ANY) != 0)
      throw qwen3::Error("writing KV entry " + std::to_string(key) + " failed");
  cache->set_positions(positions);
}

// --sessions: aggregate decode tokens/s of each count vs one session, the
// groups stepping in turn within each round.
void time_sessions(qwen3::Backend& b, const Options& o, const std::vector<int32_t>& prompt, int vocab, Run& r) {
  std::vector<int> counts{1};
  for (int n : o.sessions)
    if (std::find(counts.begin(), counts.end(), n) == counts.end()) counts.push_back(n);
  std::mt19937_64 rng(11);
  std::vector<DecodeGroup> groups(counts.size());
  for (size_t g = 0; g < counts.size(); g++)
    for (int i = 0; i < counts[g]; i++) {
      auto kv = b.create_kv(static_cast<int>(prompt.size()) + o.rounds * o.decode + 1);
      // session 0 continues the benchmark prompt, the others their own prompts
      auto ids = i == 0 ? prompt : random_ids(rng, static_cast<int>(prompt.size()), vocab);
      groups[g].next.push_back(b.forward(*kv, ids, {}).positions.back().argmax);
      groups[g].kv.push_back(std::move(kv));
    }
  std::vector<double> wall(counts.size()), cpu(counts.size());
  for (int round = 0; round < o.rounds; round++)
    for (size_t g = 0; g < counts.size(); g++) {
      auto [w, c] = groups[g].step(b, o.decode);
      wall[g] += w;
      cpu[g] += c;
    }
  for (size_t g = 0; g < counts.size(); g++) {
    Run::Sessions s;
    s.n = counts[g];
    const double tokens = double(counts[g]) * o.rounds * o.decode;
    s.tokens_per_s = tokens / wall[g];
    s.cpu_ms_per_token = cpu[g] * 1000.0 / tokens;
    s.ratio = s.tokens_per_s / (o.rounds * o.decode / wall[0]);
    r.sessions.push_back(s);
  }
}

// --context: decode ms/token after --context cached positions vs after the prompt.
void time_context(qwen3::Backend& b, const Options& o, const std::vector<int32_t>& prompt, int vocab, Run& r) {
  const int extra = o.rounds * o.decode + 1;
  DecodeGroup shortc, longc;
  auto kv = b.create_kv(static_cast<int>(prompt.size()) + extra);
  shortc.next.push_back(b.forward(*kv, prompt, {}).positions.back().argmax);
  shortc.kv.push_back(std::move(kv));
  kv = b.create_kv(o.context + extra);
  if (o.context_copy) {
    fill_by_copy(b, *kv, prompt, o.context);
    longc.next.push_back(prompt.back());
  } else {
    std::mt19937_64 rng(13);
    longc.next.push_back(b.forward(*kv, random_ids(rng, o.context, vocab), {}).positions.back().argmax);
  }
  longc.kv.push_back(std::move(kv));
  double w[2] = {0, 0}, c[2] = {0, 0};
  for (int round = 0; round < o.rounds; round++) {
    auto [ws, cs] = shortc.step(b, o.decode);
    auto [wl, cl] = longc.step(b, o.decode);
    w[0] += ws, c[0] += cs, w[1] += wl, c[1] += cl;
  }
  const double steps = double(o.rounds) * o.decode;
  r.context.push_back({o.prompt_tokens, w[0] * 1000 / steps, c[0] * 1000 / steps, 1.0});
  r.context.push_back({o.context, w[1] * 1000 / steps, c[1] * 1000 / steps, w[1] / w[0]});
}

// --speculative: one decode of up to o.decode tokens (stopping at EOS) after
// the prompt, plain or speculative, on a fresh cache; adds to `f`.
void time_speculative(qwen3::Backend& b, const Options& o, const std::vector<int32_t>& prompt, int round,
                      Run::Speculative& f) {
  const auto& cfg = b.config();
  qwen3::SamplingParams sp;
  sp.temperature = o.temperature;
  if (o.temperature > 0) {
    sp.top_k = cfg.default_top_k;
    sp.top_p = cfg.default_top_p > 0 ? static_cast<float>(cfg.default_top_p) : 1.0f;
    sp.seed = 1000 + round;
  }
  qwen3::Sampler sampler(sp);
  const qwen3::ForwardWants wants = sampler.wants();
  qwen3::SpeculativeDecoder spec(o.spec);
  auto forward = [&b](qwen3::KvCache& kv, std::span<const int32_t> t, const qwen3::ForwardWants& w) {
    return b.forward(kv, t, w);
  };
  auto kv = b.create_kv(static_cast<int>(prompt.size()) + o.decode + 1);
  std::vector<int32_t> history = prompt;
  history.push_back(sampler.sample(b.forward(*kv, prompt, wants).positions.back(), history));
  std::vector<int32_t> out{history.back()};
  auto is_eos = [&](int32_t id) {
    return std::find(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end(), id) != cfg.eos_token_ids.end();
  };
  const double cpu0 = cpu_seconds();
  const auto t0 = Clock::now();
  while (static_cast<int>(out.size()) < o.decode && !is_eos(out.back())) {
    const int room = o.decode - static_cast<int>(out.size());
    std::vector<int32_t> step;
    if (f.on) {
      step = spec.step(forward, *kv, sampler, wants, history, room);
    } else {
      const int32_t last = history.back();
      step = {sampler.sample(b.forward(*kv, std::span<const int32_t>(&last, 1), wants).positions.back(), history)};
    }
    for (int32_t t : step) {
      history.push_back(t);
      out.push_back(t);
      if (is_eos(t)) break;
    }
    kv->truncate(static_cast<int>(history.size()) - 1);  // tokens drafted past EOS
  }
  const double wall = seconds_since(t0), cpu = cpu_seconds() - cpu0;
  f.wall_s += wall;
  f.cpu_s += cpu;
  f.round_tps.push_back((out.size() - 1) / wall);
  f.round_cpu_ms.push_back(cpu * 1000 / (out.size() - 1));
  f.tokens += out.size() - 1;  // the first token came from the prefill
  f.steps += spec.stats().steps;
  f.drafted += spec.stats().drafted;
  f.accepted += spec.stats().accepted;
  f.generated = out;
}

// The median of the per-round ratios a[i] / b[i] (rounds alternate, so each
// pair ran close in time: robust to a neighbour's burst that a total is not).
double median_ratio(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> r;
  for (size_t i = 0; i < a.size() && i < b.size(); i++) r.push_back(a[i] / b[i]);
  if (r.empty()) return 0;
  std::sort(r.begin(), r.end());
  return r.size() % 2 ? r[r.size() / 2] : (r[r.size() / 2 - 1] + r[r.size() / 2]) / 2;
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
    if (!o.prompt_file.empty()) {
      std::ifstream f(o.prompt_file, std::ios::binary);
      std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      prompt = qwen3::Tokenizer::load(o.model)->encode(text, false);
      if (prompt.empty()) throw qwen3::invalid_argument("--prompt-file " + o.prompt_file + " holds no tokens");
      for (int32_t id : prompt)
        if (id >= cfg.vocab_size)
          throw qwen3::invalid_argument("the tokenizer of " + o.model + " gives id " + std::to_string(id) +
                                        ", beyond the model's vocabulary of " + std::to_string(cfg.vocab_size));
      o.prompt_tokens = static_cast<int>(prompt.size());
    }
    if (!o.prompt_chat.empty()) {
      std::ifstream f(o.prompt_chat, std::ios::binary);
      std::vector<qwen3::ChatMessage> messages;
      try {
        for (const auto& m : nlohmann::json::parse(f)) messages.push_back({m.at("role"), m.at("content")});
      } catch (const nlohmann::json::exception& e) {
        throw qwen3::invalid_argument("--prompt-chat " + o.prompt_chat +
                                      ": expected a JSON array of {\"role\", \"content\"} objects (" + e.what() + ")");
      }
      auto tok = qwen3::Tokenizer::load(o.model);
      // A last assistant message is the start of the answer (the model continues it).
      std::string answer_start;
      if (!messages.empty() && messages.back().role == "assistant") {
        answer_start = messages.back().content;
        messages.pop_back();
      }
      prompt = tok->encode(tok->apply_chat_template(messages, true, false) + answer_start, true);
      for (int32_t id : prompt)
        if (id >= cfg.vocab_size)
          throw qwen3::invalid_argument("the tokenizer of " + o.model + " gives id " + std::to_string(id) +
                                        ", beyond the model's vocabulary of " + std::to_string(cfg.vocab_size));
      o.prompt_tokens = static_cast<int>(prompt.size());
    }
    std::vector<int32_t> prefill_prompt;
    if (o.prefill) prefill_prompt = random_ids(rng, o.prefill, cfg.vocab_size);

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
      if (o.prefill) ref.prefill_n_tok_s = time_prefill(*b, prefill_prompt);
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
        eo.max_context = std::max({4096, o.prompt_tokens + o.rounds * o.decode + 1, o.context + o.rounds * o.decode + 1,
                                   o.prefill + 1});
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
        if (o.prefill) r.prefill_n_tok_s = time_prefill(*b, prefill_prompt);
        if (!o.sessions.empty()) time_sessions(*b, o, prompt, cfg.vocab_size, r);
        if (o.context) time_context(*b, o, prompt, cfg.vocab_size, r);
        for (bool on : o.speculative) {
          r.speculative.emplace_back();
          r.speculative.back().on = on;
        }
        for (int round = 0; round < o.rounds; round++)
          for (auto& f : r.speculative) time_speculative(*b, o, prompt, round, f);
        runs.push_back(r);
      }

    if (o.json) {
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
    std::printf("peak resident memory of this process: %.0f MiB (1-minute load average %.1f)\n",
                rss_bytes("VmHWM:") / 1048576.0, load_average());
  } catch (const qwen3::Error& e) {
    std::fprintf(stderr, "qwen3-bpf-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
