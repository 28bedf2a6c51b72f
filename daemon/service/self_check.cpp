#include "service/self_check.h"

#include <chrono>
#include <cstdio>
#include <string>

#include "common/error.h"
#include "service/inference.h"
#include "service/model_host.h"

namespace qwen3 {

int run_self_check(const DaemonConfig& config) {
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  std::printf("qwen3-bpfd --check\n");
  for (const auto& [k, v] : describe_config(config)) std::printf("  %-24s %s\n", k.c_str(), v.c_str());
  ModelHost host(config);
  const char* step = "load";
  try {
    float shown = -1.0f;
    host.load_now([&](const LoadProgress& p) {
      if (p.fraction - shown >= 0.1f || p.state != LoadState::loading) {
        std::printf("  [%3.0f%%] %s\n", p.fraction * 100.0, p.text.c_str());
        shown = p.fraction;
      }
    });
    Runtime& rt = host.runtime();
    const auto info = rt.backend->info();
    std::printf("load:      ok  %s (backend %s, weights %s, precision %s, %d BPF programs, %d maps, %.1f MiB weights)\n",
                config.effective_model_dir().c_str(), info.name.c_str(), info.weight_path.c_str(),
                info.precision.c_str(), info.bpf_programs, info.bpf_maps, info.weight_bytes / 1048576.0);

    step = "tokenize";
    const std::string text = "The kernel verifies every program.";
    const auto ids = rt.tokenizer->encode(text);
    if (ids.empty()) throw Error("the tokenizer returned no tokens for a non-empty text");
    const auto round_trip = rt.tokenizer->decode(ids);
    if (round_trip != text) throw Error("tokenizer round trip changed the text: '" + round_trip + "'");
    std::printf("tokenize:  ok  %zu tokens, decodes back to the same text\n", ids.size());

    step = "forward";
    ForwardOptions fo;
    fo.tokens.assign(ids.begin(), ids.begin() + std::min<size_t>(ids.size(), 4));
    fo.top_k = 3;
    const auto f = run_forward(rt, fo);
    if (f.top.empty()) throw Error("forward returned no candidates");
    std::printf("forward:   ok  %d tokens in %.1f ms, top next token %d (logprob %.3f)\n", f.prompt_tokens,
                f.forward_ms, f.top[0].id, f.top[0].logprob);

    step = "generate";
    GenerateOptions go;
    go.tokens = ids;
    go.max_new_tokens = 4;
    go.ignore_eos = true;
    int streamed = 0;
    const auto g = run_generate(rt, go, [&](const GeneratedToken&) { return ++streamed, true; });
    if (g.completion_tokens != 4 || streamed != 4)
      throw Error("generate produced " + std::to_string(g.completion_tokens) + " tokens instead of 4");
    std::printf("generate:  ok  4 tokens (prefill %.1f ms, decode %.1f ms): \"%s\"\n", g.prefill_ms, g.decode_ms,
                g.text.c_str());
    if (rt.sessions->totals().kv_bytes != 0) throw Error("KV memory was not freed after the ephemeral requests");
    std::printf("check passed in %.1f s\n", elapsed());
    return 0;
  } catch (const std::exception& e) {
    std::printf("%s: FAILED: %s\n", step, e.what());
    std::printf("check failed after %.1f s\n", elapsed());
    return 1;
  }
}

}  // namespace qwen3
