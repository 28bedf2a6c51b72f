// The one small API every forward-pass implementation offers: the float
// reference (daemon/reference) and the in-kernel BPF engine (daemon/engine).
// The daemon, qwen3-bpf-run, the benchmark and the tests use only this.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "engine/sampling_types.h"
#include "model/model_config.h"

namespace qwen3 {

// The KV cache of one sequence. Owned by a Session in the daemon; nothing else
// holds KV. For the BPF backend its storage is BPF maps created with it and
// freed with it.
class KvCache {
 public:
  virtual ~KvCache() = default;
  virtual int positions() const = 0;      // tokens already cached
  virtual int max_context() const = 0;    // positions it can hold
  virtual size_t bytes() const = 0;       // memory it holds (kernel or user)
  // Forgets positions >= n (n <= positions()); used to roll back a failed step.
  virtual void truncate(int n) = 0;
};

// What the caller wants back from one forward step of one sequence.
// Sampling in the forward pass (ForwardWants::sample; Sampler::in_pass
// fills it): the token of the step's last position drawn right after the
// pass, from the logits where the pass left them. With all_positions
// (speculative verification: the fed tokens after the first are a draft),
// fed position i is drawn at draw_index + i, its history `history` (which
// ends with the first fed token) followed by the fed tokens 1..i, for as long
// as each earlier position drew the fed token after it: the draws plain
// decoding would make, up to the first that rejects the draft.
struct PassSampling {
  KernelSamplingParams params{};     // the candidates: those the wants' scores carry, as sample_token takes them
  std::span<const int32_t> history{}; // the repetition penalty's ids; must outlive the call
  uint64_t draw_index = 0;
  bool scores_unused = false;         // the caller reads only `sampled`: the scores may be left out
};

struct ForwardWants {
  bool all_positions = false;  // logits info for every fed position, not just the last
  int top_k = 0;               // top-k (id, logit) per reported position (0 = none)
  bool full_logits = false;    // the whole vocabulary's logits per reported position
  // A backend that samples in the pass (Backend::samples_in_pass) reports the
  // token in PositionLogits::sampled (with all_positions: see PassSampling);
  // ignored by the other backends.
  std::optional<PassSampling> sample = std::nullopt;
};

struct PositionLogits {
  int32_t argmax = -1;
  std::vector<std::pair<int32_t, float>> top_k{};  // sorted by logit, descending
  std::vector<float> full{};                     // vocab_size floats when asked
  // The backend's own fixed-point logits (Q16: logit * 2^16 as int32), from
  // a backend that computes in fixed point (BPF; the reference backend leaves
  // them empty). The floats above are these / 65536 rounded to float, exact
  // only below |logit| 256; sampling in the kernel reads these.
  // top_k_q16[i] is top_k[i]'s logit (empty, or as long as top_k).
  std::vector<int32_t> top_k_q16{};
  // The whole vocabulary's by id, whenever `full` is asked for.
  std::vector<int32_t> full_q16{};
  // Where the backend left the whole vocabulary's logits of this position
  // (BPF: row logits_row of logits_buf after the vocabulary projection
  // numbered logits_pass; 0: nowhere), set when the scores carry the whole
  // vocabulary: `full` asked for, or a top-k beyond what the kernel selects
  // (BPF: 64; the cut is then qn_sample's). The backend's sampling calls run
  // over them there while no later pass has overwritten them, and otherwise
  // over full_q16; scores with neither are refused, never read stale.
  uint64_t logits_pass = 0;
  uint32_t logits_row = 0;
  // Whether the candidates are the whole vocabulary (not the top-k list).
  bool whole_vocab() const { return !full.empty() || !full_q16.empty() || logits_pass != 0; }
  // ForwardWants::sample's token, drawn in the pass with draw index
  // sampled_draw; -1: not sampled in the pass.
  int32_t sampled = -1;
  uint64_t sampled_draw = 0;
};

struct ForwardResult {
  // One entry per reported position: the last fed one, or all of them.
  std::vector<PositionLogits> positions;
};

// One sequence's share of a batched step.
struct BatchItem {
  KvCache* kv = nullptr;
  std::span<const int32_t> tokens;  // appended at kv->positions()
  ForwardWants wants;
  ForwardResult* result = nullptr;
};

struct BackendInfo {
  std::string name;           // "reference" or "bpf"
  std::string weight_path{};  // "map" | "arena" | "host"
  std::string precision{};    // "q24" | "q8" | "q4" | "f32"
  size_t weight_bytes = 0;    // resident weight memory
  int bpf_programs = 0;
  int bpf_maps = 0;
  std::vector<std::string> load_warnings{};  // what a user should know about the loaded weights (logged at start)
};

// A whole generation run by the kernel on its own (docs/kernel-driver.md):
// the tokens to feed, then token after token chosen in BPF as a Sampler with
// these params and wants would choose them, until a stop id, max_tokens or
// the context's end.
struct KernelGenerateRequest {
  std::span<const int32_t> feed;     // after the cache's positions (>= 1 token)
  std::span<const int32_t> history;  // every id before the first chosen one (the repetition penalty's)
  KernelSamplingParams params;       // daemon/sampling's kernel_params
  ForwardWants wants;                // Sampler::wants(): which candidates sampling takes
  uint64_t draw0 = 0;                // the first token's draw index
  int max_tokens = 1;
  std::vector<int32_t> stop_ids;     // EOS included; the chosen stop id is reported
};
enum class KernelFinish { stop, length, cancelled };
struct KernelGenerateResult {
  std::vector<int32_t> tokens;
  KernelFinish finish = KernelFinish::length;
  uint64_t links = 0;         // links the chain ran
  double max_link_ms = 0;     // the longest uninterrupted link
  std::string max_link_op;    // which operator share it ran ("vocab share 3 of 10, rows ...")
  // The longest any one link ran twice: a link's own length, without a one-off
  // pause of the virtual CPU that max_link_ms (wall time) also counts.
  double repeat_link_ms = 0;
  std::string repeat_link_op;
  double kernel_ms = 0;       // start to last record, kernel clock
  double busy_ms = 0;         // the links' run time summed: the chains' CPU time (kworkers, not this process's)
  std::vector<uint64_t> chain_links;  // operator shares each CPU's chain ran (the submitter's first)
};

namespace engine {
class KernelDoor;
}

// The calls sampling makes on the engine besides the forward pass
// (daemon/sampling: Sampler, position_logprobs). Backend offers them; in the
// daemon the Scheduler does, running each on its engine thread like every
// other use of the engine, so request threads never call the backend.
class SamplingCalls {
 public:
  virtual ~SamplingCalls() = default;

  // Whether forward() honours ForwardWants::sample (the BPF backend: in the
  // kernel, over the logits the pass left in its buffer).
  virtual bool samples_in_pass() const { return false; }

  // The distribution sampling draws from for one position's scores (what the
  // params' ForwardWants asked for), the history's ids and the params; the
  // cuts and ties as Sampler::distribution defines them. nullopt: the backend
  // leaves it to the caller (the Sampler's float computation), which is the
  // default.
  virtual std::optional<TokenDistribution> sampling_distribution(const PositionLogits& scores,
                                                                 const KernelSamplingParams& params,
                                                                 std::span<const int32_t> history) {
    (void)scores, (void)params, (void)history;
    return std::nullopt;
  }

  // The token the seeded draw `draw_index` of a request seeded params.seed
  // picks from sampling_distribution(scores, params, history), picked by the
  // backend itself (bpf_ops/draw.h: the same rule as the Sampler's
  // draw_token, so the same token). nullopt: the caller draws from the
  // distribution, which is the default.
  virtual std::optional<int32_t> sample_token(const PositionLogits& scores, const KernelSamplingParams& params,
                                              std::span<const int32_t> history, uint64_t draw_index) {
    (void)scores, (void)params, (void)history, (void)draw_index;
    return std::nullopt;
  }

  // The log-normalizer of one position's scores, for the logprobs the API
  // reports (position_logprobs, daemon/sampling): lse = max + ln(sum_i
  // exp(l_i - max)) at temperature 1 over the candidates the scores carry
  // (the whole vocabulary when they carry it, PositionLogits::whole_vocab,
  // else the top-k list), in Q16 from the backend's own Q16 logits, so that a
  // candidate's logprob is (l_q16 - lse) / 2^16. nullopt: the caller computes
  // the log-softmax in float, which is the default (the reference backend);
  // the BPF backend computes it in the kernel (qn_sample, QN_SAMPLE_LSE) for
  // scores that carry its Q16 logits.
  virtual std::optional<int64_t> log_normalizer_q16(const PositionLogits& scores) {
    (void)scores;
    return std::nullopt;
  }
};

// A forward-pass implementation. Its sampling calls (SamplingCalls) are
// serialized with forward() like every use of the engine; the daemon makes
// all of them on the scheduler's engine thread.
class Backend : public SamplingCalls {
 public:
  ~Backend() override = default;
  virtual const ModelConfig& config() const = 0;
  virtual BackendInfo info() const = 0;

  // Throws qwen3::Error(resource_exhausted) when max_context cannot be had.
  virtual std::unique_ptr<KvCache> create_kv(int max_context) = 0;

  // Feeds `tokens` after what `kv` holds, appends their K/V, and reports logits.
  // Throws qwen3::Error(invalid_argument) for an id >= vocab or a context overflow;
  // on any throw the cache is left as it was before the call.
  virtual ForwardResult forward(KvCache& kv, std::span<const int32_t> tokens,
                                const ForwardWants& wants) = 0;

  // Several sequences in one step, sharing passes over the weights where the
  // implementation can. The default runs them one after another.
  virtual void forward_batch(std::span<BatchItem> items) {
    for (auto& item : items) *item.result = forward(*item.kv, item.tokens, item.wants);
  }

  // Runs a whole generation in the kernel (the BPF backend with its kernel
  // driver loaded): on_token(id, index) for each chosen token, as it comes;
  // returning false ends the generation within one token (cancelled). The
  // cache then holds every fed token but the last chosen one (or, cancelled
  // before the first token, what it held before). nullopt: this backend or
  // this request cannot (the default; the caller decodes in user space).
  // Throws qwen3::Error as forward() does.
  virtual std::optional<KernelGenerateResult> generate_in_kernel(
      KvCache& kv, const KernelGenerateRequest& req, const std::function<bool(int32_t, int)>& on_token) {
    (void)kv, (void)req, (void)on_token;
    return std::nullopt;
  }

  // The doorbell of kernel-started generations (engine/kernel_door.h): the BPF
  // backend with its kernel driver loaded has one; nullptr otherwise.
  virtual engine::KernelDoor* kernel_door() { return nullptr; }
};

}  // namespace qwen3
