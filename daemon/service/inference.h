// The inference core that the gRPC and HTTP adapters share: input rules
// (UTF-8, chat roles, token ids), sampling defaults from the model's
// generation_config, sessions and automatic prompt-prefix reuse, scheduling,
// stop logic, streaming text, cancellation, counters and metrics. The
// adapters only map their wire formats onto it. `qwen3-bpfd --check` uses the
// free functions run_forward / run_generate directly.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "sampling/defaults.h"
#include "sampling/sampler.h"
#include "service/session_transfer.h"
#include "service/counters.h"
#include "service/metrics.h"
#include "service/model_host.h"
#include "service/verify_slots.h"
#include "verify/pipeline.h"
#include "verify/repair.h"

namespace qwen3 {

// Throws invalid_argument naming the first id that is out of range.
void validate_token_ids(std::span<const int32_t> ids, int vocab_size, const std::string& field);
// Throws invalid_argument naming `field` unless `text` is strict UTF-8.
void require_utf8(const std::string& text, const std::string& field);
// Text to ids (special tokens parsed unless told otherwise), after the UTF-8 check.
std::vector<int32_t> encode_text(const Tokenizer& tok, const std::string& text, const std::string& field,
                                 bool parse_special = true);
// Messages through the model's chat template, with the generation prompt.
// Roles must be system, user, assistant or tool; contents strict UTF-8.
void validate_messages(const std::vector<ChatMessage>& messages);
std::vector<int32_t> encode_chat(const Tokenizer& tok, const std::vector<ChatMessage>& messages, bool enable_thinking);
// The tokens that continue a conversation whose tokens so far are `history`
// with `messages` (and the generation prompt): together they are what the
// template renders for the whole conversation when its last assistant turn is
// the one in `history` (kept with its think block, as the template keeps the
// last turn's), so a chat turn computes only its own tokens.
std::vector<int32_t> encode_chat_continuation(const Tokenizer& tok, std::span<const int32_t> history,
                                              const std::vector<ChatMessage>& messages, bool enable_thinking);
struct ChatContinuation {
  std::vector<ChatMessage> messages;
  bool enable_thinking = false;
};

// Sampling requests and the model defaults for unset fields: sampling/defaults.h.

struct ScoredToken {
  int32_t id = 0;
  float logit = 0;
  float logprob = 0;
};

struct ForwardOptions {
  std::vector<int32_t> tokens;
  std::string session_id;
  bool append = false;
  uint32_t caller_uid = 0;         // whose sessions the request may use (0: root, any)
  int top_k = 10;
  bool all_positions = false;
  bool full_logits = false;
  std::function<bool()> cancelled;
};

struct ForwardOutcome {
  std::vector<ScoredToken> top;
  std::vector<int32_t> position_argmax;
  std::vector<float> logits;
  int prompt_tokens = 0;
  int cached_tokens = 0;
  int session_positions = 0;
  double forward_ms = 0;
  std::vector<int32_t> input_ids;
};

ForwardOutcome run_forward(Runtime& rt, const ForwardOptions& options);

// Who steers decoding: the engine's threads (user) or the kernel on its own.
enum class Driver { user, kernel };

struct GenerateOptions {
  std::vector<int32_t> tokens;
  std::string session_id;
  bool append = false;
  // Without a session_id: reuse the longest cached prefix of this caller's
  // recent requests (llama.cpp's cache_prompt), keeping the KV afterwards.
  bool cache_prompt = false;
  uint32_t caller_uid = 0;         // whose sessions the request may use (0: root, any)
  // With append and a session: messages that continue the session's chat,
  // rendered against its history (encode_chat_continuation) before `tokens`.
  std::optional<ChatContinuation> chat_continuation;
  SamplingRequest sampling;
  int max_new_tokens = 256;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int logprobs = 0;
  // Prompt-lookup speculative decoding (sampling/speculative.h): same output
  // (greedy) or the same distribution (sampling), fewer passes over the
  // weights when the output copies its context. Unset: on. Requests with
  // logprobs decode plainly.
  std::optional<bool> speculative;
  // Who steers decoding (docs/kernel-driver.md); unset: the daemon's config.
  // The kernel driver serves requests without speculation and logprobs; the
  // others, and every request when the backend declines, decode in user space.
  std::optional<Driver> driver;
  std::function<bool()> cancelled;
  ServiceMetrics* metrics = nullptr;  // time to first token, time per output token
};

struct GeneratedToken {
  int32_t id = 0;
  int index = 0;
  std::string text;                 // released text (may be empty)
  bool has_logprobs = false;
  float logprob = 0;
  std::vector<ScoredToken> top;
};

enum class FinishReason { length, eos, stop_sequence, cancelled };
const char* to_string(FinishReason r);

struct GenerateOutcome {
  FinishReason finish = FinishReason::length;
  std::string final_text;           // text released at the end (held back until then)
  std::string matched_stop;
  int prompt_tokens = 0;
  int cached_tokens = 0;
  int completion_tokens = 0;
  double queue_ms = 0, prefill_ms = 0, decode_ms = 0;
  uint64_t seed = 0;
  SamplingParams sampling;          // what the generation used (request and model defaults merged)
  std::string text;                 // everything released, for callers that want it whole
  // Speculative decoding: draft tokens verified, and of those accepted (a
  // verified pass yields accepted + 1 tokens; some may be dropped after a stop).
  int draft_tokens = 0;
  int accepted_tokens = 0;
  bool kernel_driven = false;       // decoded by the kernel driver (docs/kernel-driver.md)
};

// `emit` is called for every token as it is produced; returning false means the
// receiver is gone (finish = cancelled).
GenerateOutcome run_generate(Runtime& rt, const GenerateOptions& options,
                             const std::function<bool(const GeneratedToken&)>& emit);

// The sessions the prompt cache keeps are named with this prefix (listed like
// any other session of their owner, evicted first-come under memory pressure).
inline constexpr const char* kPromptCachePrefix = "prompt-cache-";
inline constexpr int kPromptCacheSlots = 4;  // per caller

// What the loaded runtime is, for status reports.
struct RuntimeFacts {
  ModelConfig model;
  uint64_t parameter_bytes = 0;
  BackendInfo backend;
  int threads = 0;
  SessionTotals totals;
  SessionLimits limits;
};

// An XDP program asked of the model and verified (GenerateVerified).
struct XdpTaskOptions {
  std::string task;
  std::vector<verify::Fixture> fixtures;
  int attempts = 0;                // 0: 2; at most 5
  SamplingRequest sampling;
  int max_new_tokens = 0;          // 0: 1024; capped by the context left after the prompt
  std::function<bool()> cancelled;
};

// What a verification returned, and how long it ran once it had its slot.
struct VerifyOutcome {
  verify::VerifyResult result;
  std::optional<verify::RepairOutcome> repair;  // when asked for with `fix`
  double elapsed_ms = 0;
};
struct XdpTaskOutcome {
  std::vector<verify::Attempt> attempts;
  double elapsed_ms = 0;
};

// What both transports call, and all they call: the rules above plus the
// daemon-wide state (stop flag, default max tokens, counters, metrics, the XDP
// verify pipeline). The transports only map their wire formats onto it.
class InferenceCore {
 public:
  explicit InferenceCore(ModelHost& host);
  ~InferenceCore();

  LoadProgress progress() const { return host_.progress(); }
  const DaemonConfig& config() const { return host_.config(); }
  // The loaded model's tokenizer and vocabulary size (embedding rows, >= the
  // tokenizer's), for the transports' text mapping. Throw unavailable while
  // loading, after a failure, or once stopping.
  const Tokenizer& tokenizer();
  int vocab_size();
  // The facts of the loaded runtime; nullopt until it is ready.
  std::optional<RuntimeFacts> runtime_facts() const;

  // SIGTERM: running generations finish with cancelled, new ones are refused.
  void begin_shutdown() { shutting_down_ = true; }
  bool shutting_down() const { return shutting_down_; }
  void set_default_max_new_tokens(int n) { default_max_new_tokens_ = n; }
  // Whether requests that do not say use speculative decoding (config
  // `speculative`: on, off, or nullopt = auto, on where speculation_pays()).
  void set_default_speculative(std::optional<bool> on) { default_speculative_ = !on ? kAuto : *on ? kOn : kOff; }
  // The driver of requests that do not say (config `driver`: user, or
  // kernel for kernel and auto; docs/kernel-driver.md).
  void set_default_driver(Driver d) { default_kernel_driver_ = d == Driver::kernel; }
  // 0 (or absent): the configured default; must be >= 0.
  int max_new_tokens(int requested) const;

  // The stop flag joined with the transport's own cancellation.
  std::function<bool()> cancellation(std::function<bool()> transport_cancelled) const;

  ForwardOutcome forward(ForwardOptions options);
  GenerateOutcome generate(GenerateOptions options, const std::function<bool(const GeneratedToken&)>& emit);

  // Text to ids, special tokens parsed unless `split_special` (no BOS/EOS is
  // added: Qwen3 adds none); with `pieces`, each id's piece too.
  std::vector<int32_t> tokenize(const std::string& text, bool split_special, std::vector<std::string>* pieces = nullptr);
  // Ids beyond the tokenizer's vocabulary (embedding padding) have no text.
  std::string detokenize(std::vector<int32_t> ids, bool skip_special);

  // The session table, as `caller_uid` may see it.
  SessionSnapshot create_session(int max_context, const std::string& id, uint32_t caller_uid);
  SessionSnapshot session(const std::string& id, uint32_t caller_uid);
  std::vector<SessionSnapshot> sessions(uint32_t caller_uid);
  uint64_t delete_session(const std::string& id, uint32_t caller_uid);  // the bytes freed
  SessionLimits session_limits();
  // Sessions that move (session_transfer.h): the export file's bytes, and an
  // import of such a file; the largest import this daemon accepts.
  std::string export_session(const ExportRequest& request);
  ImportOutcome import_session(std::string_view file, const ImportRequest& request);
  size_t max_import_bytes();

  // XDP verification (daemon/verify/), at most two at once (callers wait up to
  // a minute for a slot). generate_verified asks the model through generate().
  // `fix`: a failing program also goes through the repair engine (verify/repair.h).
  VerifyOutcome verify_program(const verify::VerifyRequest& request, const std::function<bool()>& cancelled,
                               bool fix = false);
  XdpTaskOutcome generate_verified(XdpTaskOptions options);

  RequestCounters& counters() { return counters_; }
  ServiceMetrics& metrics() { return metrics_; }
  // Gauges of the loaded runtime (zeros while loading) and the counters above.
  MetricsGauges gauges() const;
  std::chrono::steady_clock::time_point started() const { return started_; }

 private:
  // Throws unavailable while loading, after a failure, or once stopping.
  Runtime& runtime_for_work();

  ModelHost& host_;
  std::atomic<bool> shutting_down_{false};
  std::atomic<int> default_max_new_tokens_{256};
  static constexpr int kAuto = 0, kOn = 1, kOff = 2;
  std::atomic<int> default_speculative_{kAuto};
  std::atomic<bool> default_kernel_driver_{false};
  bool kernel_loaded_ = true;  // the backend has the kernel driver (config driver != user)
  RequestCounters counters_;
  ServiceMetrics metrics_;
  std::chrono::steady_clock::time_point started_;
  std::unique_ptr<verify::Pipeline> pipeline_;
  VerifySlots verify_slots_{2};
};

}  // namespace qwen3
