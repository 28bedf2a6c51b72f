// qwen3-bpf-bench: speed and memory of the in-kernel backend on one model, for
// each weight path and precision, with the float reference timed on the same
// prompt in the same run.
//
//   qwen3-bpf-bench --model DIR [--json] [--weights map|arena|both]
//                   [--precision q24|q8|q4|both] [--prompt-tokens N] [--decode N]
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
//   over --rounds rounds so machine noise hits both. With --driver: instead,
//   1 and N sessions generating at once through the daemon's scheduler on
//   each driver (kernel: in turns), alternated (bench_sessions.cpp).
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
#include "bench_run.h"

namespace {

using namespace qwen3::bench;
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

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
  app.add_option("--precision", precision, "q24 | q8 | q4 | both (q24 and q8)")
      ->capture_default_str()
      ->check(CLI::IsMember({"q24", "q8", "q4", "both"}));
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
  std::string driver;
  app.add_option("--driver", driver,
                 "greedy decoding steered by the engine's threads (user), by the kernel on its own (kernel), or "
                 "both alternated over --rounds: ms/token, CPU, bpf() calls per token (docs/kernel-driver.md)")
      ->check(CLI::IsMember({"user", "kernel", "both"}));
  if (int rc = qwen3::cli_parse::parse(app, argc, argv); rc >= 0) std::exit(rc);
  if (driver == "both") o.drivers = {"user", "kernel"};
  else if (!driver.empty()) o.drivers = {driver};
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

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6;
}

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

void check_ids(const std::vector<int32_t>& prompt, const Options& o, int vocab) {
  for (int32_t id : prompt)
    if (id >= vocab)
      throw qwen3::invalid_argument("the tokenizer of " + o.model + " gives id " + std::to_string(id) +
                                    ", beyond the model's vocabulary of " + std::to_string(vocab));
}

// The prompt: random ids, or --prompt-file's text, or --prompt-chat's messages through the template.
std::vector<int32_t> make_prompt(Options& o, int vocab, std::mt19937_64& rng) {
  std::vector<int32_t> prompt = random_ids(rng, o.prompt_tokens, vocab);
  if (!o.prompt_file.empty()) {
    std::ifstream f(o.prompt_file, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    prompt = qwen3::Tokenizer::load(o.model)->encode(text, false);
    if (prompt.empty()) throw qwen3::invalid_argument("--prompt-file " + o.prompt_file + " holds no tokens");
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
  }
  check_ids(prompt, o, vocab);
  o.prompt_tokens = static_cast<int>(prompt.size());
  return prompt;
}

Run run_reference(std::shared_ptr<const qwen3::ModelDir> model, const Options& o, const std::vector<int32_t>& prompt,
                  const std::vector<int32_t>& prefill_prompt) {
  Run ref;
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
    std::fprintf(stderr, "reference: prefill %.1f tok/s, decode %.1f ms/token\n", ref.prefill_tok_s, ref.decode_ms);
  return ref;
}

// One in-kernel backend (weight path x precision) through every figure the options ask for.
Run run_bpf(std::shared_ptr<const qwen3::ModelDir> model, const Options& o, qwen3::WeightPath path,
            qwen3::Precision prec, const std::vector<int32_t>& prompt, const std::vector<int32_t>& prefill_prompt) {
  Run r;
  r.name = "bpf";
  r.weights = qwen3::weight_path_name(path);
  r.precision = qwen3::precision_name(prec);
  qwen3::BpfEngineOptions eo;
  eo.weight_path = path;
  eo.precision = prec;
  eo.threads = o.threads;
  eo.kv_bits = o.kv_bits;
  eo.kernel_driver = !o.drivers.empty();
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
  const int vocab = model->config().vocab_size;
  if (o.prefill) r.prefill_n_tok_s = time_prefill(*b, prefill_prompt);
  if (!o.sessions.empty() && o.drivers.empty()) time_sessions(*b, o, prompt, vocab, r);
  if (o.context) time_context(*b, o, prompt, vocab, r);
  if (!o.sessions.empty() && !o.drivers.empty()) time_driver_sessions(*b, o, prompt, r);
  else if (!o.drivers.empty()) time_drivers(*b, o, prompt, r);
  for (bool on : o.speculative) {
    r.speculative.emplace_back();
    r.speculative.back().on = on;
  }
  for (int round = 0; round < o.rounds; round++)
    for (auto& f : r.speculative) time_speculative(*b, o, prompt, round, f);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  try {
    auto model = qwen3::ModelDir::open(o.model);
    const auto& cfg = model->config();
    std::mt19937_64 rng(7);
    const std::vector<int32_t> prompt = make_prompt(o, cfg.vocab_size, rng);
    std::vector<int32_t> prefill_prompt;
    if (o.prefill) prefill_prompt = random_ids(rng, o.prefill, cfg.vocab_size);

    Run ref;
    if (o.reference) ref = run_reference(model, o, prompt, prefill_prompt);
    std::vector<Run> runs;
    for (auto path : o.paths)
      for (auto prec : o.precisions) runs.push_back(run_bpf(model, o, path, prec, prompt, prefill_prompt));

    const Report report{o, cfg, prompt, ref, runs};
    if (o.json) print_json(report);
    else print_tables(report);
  } catch (const qwen3::Error& e) {
    std::fprintf(stderr, "qwen3-bpf-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
