#include "service/inference.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <spdlog/spdlog.h>

#include "common/error.h"
#include "service/elapsed.h"
#include "sampling/speculative.h"
#include "service/stop_matcher.h"
#include "sessions/session.h"
#include "strict_utf8.h"

namespace qwen3 {

namespace {

using Steady = std::chrono::steady_clock;

// A prompt-cache session of `caller` able to hold `want` positions: the one
// whose cached history shares the longest prefix with `sequence`, else a new
// one while the caller has fewer than kPromptCacheSlots, else the least
// recently used idle one. Empty when none can be had (the request then runs on
// an ephemeral cache, as without cache_prompt).
SessionLease prompt_cache_lease(Runtime& rt, uint32_t caller, std::span<const int32_t> sequence, int want) {
  SessionManager& sm = *rt.sessions;
  std::vector<SessionSnapshot> mine;
  for (auto& s : sm.list(caller))
    if (s.owner_uid == caller && s.id.rfind(kPromptCachePrefix, 0) == 0) mine.push_back(s);
  std::sort(mine.begin(), mine.end(), [](const auto& a, const auto& b) { return a.last_used < b.last_used; });
  SessionLease best;
  int best_keep = -1;
  for (const auto& s : mine) {
    if (s.busy || s.max_context < static_cast<int>(sequence.size())) continue;
    SessionLease lease;
    try {
      lease = sm.acquire(s.id, caller);
    } catch (const Error&) {
      continue;  // taken or evicted meanwhile
    }
    const int keep = reusable_prefix(lease->history, lease->kv->positions(), sequence);
    if (keep > best_keep) {  // ties keep the least recently used
      best = std::move(lease);
      best_keep = keep;
    }
  }
  if (best && best_keep > 0) return best;
  if (static_cast<int>(mine.size()) < kPromptCacheSlots) {
    const SessionLimits limits = sm.limits();
    const int ctx = std::min(std::max(want, limits.default_context), limits.max_context);
    for (int attempt = 0; attempt < 4; ++attempt) {
      const std::string id = std::string(kPromptCachePrefix) + std::to_string(caller) + "-" +
                             std::to_string(std::random_device{}() % 1000000);
      try {
        sm.create(ctx, id, caller);
        return sm.acquire(id, caller);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::failed_precondition) break;  // limits reached: use what there is
      }
    }
  }
  return best;
}

// The session (or an ephemeral KV cache) a request runs on, with the KV
// truncated to what the request can reuse.
struct Prepared {
  SessionLease lease;
  std::vector<int32_t> sequence;  // the whole sequence the request stands for
  int keep = 0;                   // positions reused from the cache
};

// `chat`: messages that continue the conversation the session holds (APPEND).
Prepared prepare(Runtime& rt, const std::string& session_id, uint32_t caller, bool append, bool cache_prompt,
                 std::span<const int32_t> tokens, int extra_positions, const ChatContinuation* chat = nullptr) {
  if (chat && !append) throw invalid_argument("continuing a chat needs a session_id and history_mode APPEND");
  Prepared p;
  if (!session_id.empty()) {
    p.lease = rt.sessions->acquire(session_id, caller);
    if (append) {
      p.sequence = p.lease->history;
      if (chat) {
        const auto turn = encode_chat_continuation(*rt.tokenizer, p.lease->history, chat->messages, chat->enable_thinking);
        p.sequence.insert(p.sequence.end(), turn.begin(), turn.end());
      }
      p.sequence.insert(p.sequence.end(), tokens.begin(), tokens.end());
    } else {
      p.sequence.assign(tokens.begin(), tokens.end());
    }
    const int ctx = p.lease->kv->max_context();
    if (static_cast<int>(p.sequence.size()) > ctx)
      throw invalid_argument("prompt longer than the context: " + std::to_string(p.sequence.size()) +
                             " tokens (session history included) do not fit session " + printable(session_id) + "'s " +
                             std::to_string(ctx) + " positions; shorten it or create a session with a larger max_context");
  } else {
    if (append) throw invalid_argument("history_mode APPEND needs a session_id");
    p.sequence.assign(tokens.begin(), tokens.end());
    const int cap = rt.sessions->limits().max_context;
    if (static_cast<int>(p.sequence.size()) > cap)
      throw invalid_argument("prompt longer than the context: " + std::to_string(p.sequence.size()) +
                             " tokens, the context holds " + std::to_string(cap) + " positions");
    const long want = std::min<long>(static_cast<long>(p.sequence.size()) + std::max(extra_positions, 0), cap);
    if (cache_prompt) p.lease = prompt_cache_lease(rt, caller, p.sequence, static_cast<int>(want));
    if (!p.lease) p.lease = rt.sessions->create_ephemeral(static_cast<int>(want), caller);
  }
  p.keep = reusable_prefix(p.lease->history, p.lease->kv->positions(), p.sequence);
  p.lease->kv->truncate(p.keep);
  p.lease->history.assign(p.sequence.begin(), p.sequence.begin() + p.keep);
  return p;
}

// Top-n by logit with their logprobs (position_logprobs: from the kernel's
// log-normalizer for the BPF backend, asked through the engine thread, the
// float log-softmax otherwise), over
// the full logits when present, otherwise the candidates the backend
// reported; *chosen_lp: the logprob of `chosen` when it is a candidate.
std::vector<ScoredToken> top_scored(SamplingCalls& engine, const PositionLogits& p, int n, int32_t chosen = -1,
                                    std::optional<float>* chosen_lp = nullptr) {
  const PositionLogprobs lp = position_logprobs(p, n, &engine, chosen);
  if (chosen_lp) *chosen_lp = lp.chosen;
  std::vector<ScoredToken> out;
  out.reserve(lp.top.size());
  for (const TokenLogprob& t : lp.top) out.push_back({t.id, t.logit, t.logprob});
  return out;
}

bool is_cancel(const Error& e) { return e.kind() == ErrorKind::unavailable; }

}  // namespace

const char* to_string(FinishReason r) {
  switch (r) {
    case FinishReason::length: return "length";
    case FinishReason::eos: return "eos";
    case FinishReason::stop_sequence: return "stop_sequence";
    case FinishReason::cancelled: return "cancelled";
  }
  return "?";
}

void validate_token_ids(std::span<const int32_t> ids, int vocab_size, const std::string& field) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw invalid_argument(field + "[" + std::to_string(i) + "] = " + std::to_string(ids[i]) +
                             " is not a token id: ids must be in [0, " + std::to_string(vocab_size) +
                             ") for this model (vocab_size " + std::to_string(vocab_size) + ")");
}

ForwardOutcome run_forward(Runtime& rt, const ForwardOptions& o) {
  const auto t0 = Steady::now();
  if (o.tokens.empty() && !o.append) throw invalid_argument("empty input: give token_ids or a non-empty text");
  validate_token_ids(o.tokens, rt.backend->config().vocab_size, "token_ids");
  if (o.top_k < 0) throw invalid_argument("top_k must be >= 0");
  Prepared p = prepare(rt, o.session_id, o.caller_uid, o.append, false, o.tokens, 0);
  if (p.sequence.empty()) throw invalid_argument("empty input: nothing to forward");

  ForwardWants wants;
  wants.all_positions = o.all_positions;
  wants.top_k = std::min(std::max(o.top_k, 1), rt.backend->config().vocab_size);
  wants.full_logits = true;  // logprobs need the whole distribution
  std::span<const int32_t> feed(p.sequence.data() + p.keep, p.sequence.size() - p.keep);
  ForwardResult r = rt.scheduler->run(*p.lease->kv, feed, wants, o.cancelled);
  p.lease->history = p.sequence;

  ForwardOutcome out;
  out.input_ids = p.sequence;
  out.prompt_tokens = static_cast<int>(p.sequence.size());
  out.cached_tokens = p.keep;
  out.session_positions = p.lease->kv->positions();
  if (r.positions.empty()) throw Error("the backend reported no logits for the forward step");
  const PositionLogits& last = r.positions.back();
  out.top = top_scored(*rt.scheduler, last, o.top_k);
  if (o.all_positions)
    for (auto& pos : r.positions) out.position_argmax.push_back(pos.argmax >= 0 ? pos.argmax
                                                               : (pos.top_k.empty() ? -1 : pos.top_k.front().first));
  if (o.full_logits) out.logits = last.full;
  out.forward_ms = ms_since(t0);
  return out;
}

namespace {

// What happens to each chosen token, on either driver: the history, the
// text (stop strings), the finish reasons judged in user space, the
// metrics and the stream.
class TokenSink {
 public:
  TokenSink(Runtime& rt, const GenerateOptions& o, Session& s, GenerateOutcome& out, Steady::time_point t0,
            const std::function<bool(const GeneratedToken&)>& emit)
      : rt_(rt), o_(o), s_(s), out_(out), t0_(t0), last_token_(Steady::now()), emit_(emit),
        decoder_(rt.tokenizer, /*skip_special=*/true), stopper_(o.stop) {}

  // Takes token `id` (index `index`); the finish it causes, if any.
  std::optional<FinishReason> take(int32_t id, int index, const PositionLogits* step_scores) {
    const ModelConfig& mc = rt_.backend->config();
    s_.history.push_back(id);
    ++out_.completion_tokens;
    std::optional<FinishReason> finish;
    GeneratedToken tok;
    tok.id = id;
    tok.index = index;
    if (o_.logprobs > 0 && step_scores) {
      std::optional<float> chosen;
      tok.top = top_scored(*rt_.scheduler, *step_scores, o_.logprobs, id, &chosen);
      tok.has_logprobs = true;
      if (chosen) tok.logprob = *chosen;
    }
    const bool eos = (!o_.ignore_eos && std::find(mc.eos_token_ids.begin(), mc.eos_token_ids.end(), id) != mc.eos_token_ids.end()) ||
                     std::find(o_.stop_token_ids.begin(), o_.stop_token_ids.end(), id) != o_.stop_token_ids.end();
    if (eos) {
      finish = FinishReason::eos;
    } else {
      // Ids between the tokenizer's and the model's vocabulary size (padding rows
      // of the embedding) have no text.
      const bool has_text = id < rt_.tokenizer->vocab_size();
      const auto stepped = stopper_.push(has_text ? decoder_.push(id) : std::string());
      tok.text = stepped.release;
      if (stepped.stopped) {
        finish = FinishReason::stop_sequence;
        out_.matched_stop = stepped.matched;
        stopped_by_string_ = true;
      }
    }
    if (!finish && out_.completion_tokens >= o_.max_new_tokens) finish = FinishReason::length;
    // No room to feed it (the cache holds everything before the pending token).
    if (!finish && static_cast<int>(s_.history.size()) - 1 >= s_.kv->max_context()) finish = FinishReason::length;
    out_.text += tok.text;
    if (o_.metrics) {
      const auto now = Steady::now();
      if (index == 0) o_.metrics->observe_time_to_first_token(std::chrono::duration<double>(now - t0_).count());
      else o_.metrics->observe_time_per_output_token(std::chrono::duration<double>(now - last_token_).count());
      last_token_ = now;
    }
    if (!emit_(tok)) finish = FinishReason::cancelled;
    if (!finish && o_.cancelled && o_.cancelled()) finish = FinishReason::cancelled;
    return finish;
  }

  // The text held back until the end, unless a stop string ended it.
  void flush(FinishReason finish) {
    out_.finish = finish;
    if (stopped_by_string_) return;
    const auto tail = stopper_.push(decoder_.flush());
    out_.final_text = tail.release;
    if (tail.stopped) {
      out_.finish = FinishReason::stop_sequence;
      out_.matched_stop = tail.matched;
    } else {
      out_.final_text += stopper_.flush();
    }
    out_.text += out_.final_text;
  }

 private:
  Runtime& rt_;
  const GenerateOptions& o_;
  Session& s_;
  GenerateOutcome& out_;
  Steady::time_point t0_, last_token_;
  const std::function<bool(const GeneratedToken&)>& emit_;
  StreamDecoder decoder_;
  StopMatcher stopper_;
  bool stopped_by_string_ = false;
};

// The kernel driver (docs/kernel-driver.md): the feed and every token in
// submissions that take turns with the other sessions' work on the engine
// thread (Scheduler::generate_in_kernel); the stream and stop strings as on
// the user driver. nullopt: the backend declined (the caller decodes in user
// space).
std::optional<FinishReason> decode_in_kernel(Runtime& rt, const GenerateOptions& o, Session& s, std::span<const int32_t> feed,
                                             const SamplingParams& sp, const ForwardWants& wants, TokenSink& sink,
                                             Steady::time_point& first_token) {
  const ModelConfig& mc = rt.backend->config();
  KernelGenerateRequest req;
  req.feed = feed;
  req.params = kernel_params(sp);
  req.wants = wants;
  req.max_tokens = o.max_new_tokens;  // the kernel stops at the context's end itself
  if (!o.ignore_eos) req.stop_ids = mc.eos_token_ids;
  req.stop_ids.insert(req.stop_ids.end(), o.stop_token_ids.begin(), o.stop_token_ids.end());
  const std::vector<int32_t> history = s.history;  // the sink grows s.history meanwhile
  req.history = history;
  std::optional<FinishReason> finish;
  std::optional<KernelGenerateResult> r;
  try {
    r = rt.scheduler->generate_in_kernel(*s.kv, req, [&](int32_t id, int index) {
      if (finish) return false;
      if (index == 0) first_token = Steady::now();
      finish = sink.take(id, index, nullptr);
      return !finish;
    }, o.cancelled);
  } catch (const Error& e) {
    if (!is_cancel(e)) throw;
    return finish ? finish : FinishReason::cancelled;
  }
  if (!r) return std::nullopt;
  if (!finish) finish = r->finish == KernelFinish::cancelled ? FinishReason::cancelled : FinishReason::length;
  return finish;
}

}  // namespace

GenerateOutcome run_generate(Runtime& rt, const GenerateOptions& o,
                             const std::function<bool(const GeneratedToken&)>& emit) {
  const auto t0 = Steady::now();
  const ModelConfig& mc = rt.backend->config();
  if (o.tokens.empty() && !o.append) throw invalid_argument("empty input: give a prompt, token_ids or messages");
  validate_token_ids(o.tokens, mc.vocab_size, "token_ids");
  validate_token_ids(o.stop_token_ids, mc.vocab_size, "stop_token_ids");
  if (o.max_new_tokens < 1) throw invalid_argument("max_new_tokens must be >= 1");
  if (o.logprobs < 0 || o.logprobs > 20) throw invalid_argument("logprobs must be in [0, 20]");

  for (const auto& stop : o.stop) require_utf8(stop, "stop");
  GenerateOutcome out;
  const ResolvedSampling resolved = resolve_sampling(o.sampling, mc);
  SamplingParams sp = resolved.params;
  if (resolved.random_seed) sp.seed = std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32);
  out.seed = sp.seed;
  out.sampling = sp;
  // Validates the parameters before any work; the engine's sampling calls (BPF) go through the engine thread.
  Sampler sampler(sp, rt.scheduler.get());
  ForwardWants wants = sampler.wants();
  if (o.logprobs > 0) {
    wants.full_logits = true;
    wants.top_k = std::max(wants.top_k, o.logprobs);
  }

  Prepared p = prepare(rt, o.session_id, o.caller_uid, o.append, o.cache_prompt, o.tokens, o.max_new_tokens,
                       o.chat_continuation ? &*o.chat_continuation : nullptr);
  if (p.sequence.empty()) throw invalid_argument("empty input: nothing to generate from");
  Session& s = *p.lease;
  out.prompt_tokens = static_cast<int>(p.sequence.size());
  out.cached_tokens = p.keep;
  out.queue_ms = ms_since(t0);
  // Logprobs come from the plain step's scores; those requests decode plainly.
  const bool speculate = o.speculative.value_or(speculation_pays(rt.backend->info())) && o.logprobs == 0;
  std::span<const int32_t> feed(p.sequence.data() + p.keep, p.sequence.size() - p.keep);

  // The kernel driver: prefill and decode in one submission (requests it
  // cannot serve decode in user space below).
  if (o.driver == Driver::kernel && !speculate && o.logprobs == 0) {
    s.history = p.sequence;
    TokenSink sink(rt, o, s, out, t0, emit);
    const auto t_prefill = Steady::now();
    Steady::time_point first_token = t_prefill;  // the prompt's passes end with the first token
    if (auto finish = decode_in_kernel(rt, o, s, feed, sp, wants, sink, first_token)) {
      out.kernel_driven = true;
      out.prefill_ms = std::chrono::duration<double, std::milli>(first_token - t_prefill).count();
      out.decode_ms = ms_since(first_token);
      sink.flush(*finish);
      return out;
    }
    s.history.assign(p.sequence.begin(), p.sequence.begin() + p.keep);
  }

  const auto t_prefill = Steady::now();
  ForwardResult r;
  try {
    r = rt.scheduler->run(*s.kv, feed, sampler.in_pass(wants, p.sequence), o.cancelled);
  } catch (const Error& e) {
    if (!is_cancel(e)) throw;
    out.finish = FinishReason::cancelled;
    out.prefill_ms = ms_since(t_prefill);
    return out;
  }
  s.history = p.sequence;
  out.prefill_ms = ms_since(t_prefill);

  const auto t_decode = Steady::now();
  TokenSink sink(rt, o, s, out, t0, emit);
  std::optional<FinishReason> finish;
  std::optional<SpeculativeDecoder> spec;
  if (speculate) spec.emplace();
  auto forward = [&](KvCache& kv, std::span<const int32_t> tokens, const ForwardWants& w) {
    return rt.scheduler->run(kv, tokens, w, o.cancelled);
  };
  if (r.positions.empty()) throw Error("the backend reported no logits for the prefill");
  // The tokens of one step: the first from the prefill's scores, then one
  // plain decode step or one verified draft (accepted drafts + one more).
  std::vector<int32_t> step = {sampler.sample(r.positions.back(), s.history)};
  const PositionLogits* step_scores = &r.positions.back();  // plain steps only (logprobs)
  for (int index = 0; !finish;) {
    for (size_t j = 0; j < step.size(); ++j, ++index) {
      finish = sink.take(step[j], index, step_scores);
      if (finish) break;  // tokens drafted past it are dropped
    }
    // The cache holds every token but the pending last one: drafts past a
    // stop are forgotten, and history and KV stay in step for the next request.
    if (s.kv->positions() > static_cast<int>(s.history.size()) - 1) s.kv->truncate(static_cast<int>(s.history.size()) - 1);
    if (finish) break;
    try {
      if (spec) {
        step = spec->step(forward, *s.kv, sampler, wants, s.history, o.max_new_tokens - out.completion_tokens);
        step_scores = nullptr;
      } else {
        const int32_t next[1] = {s.history.back()};
        r = forward(*s.kv, next, sampler.in_pass(wants, s.history));
        if (r.positions.empty()) throw Error("the backend reported no logits for the decode step");
        step_scores = &r.positions.back();
        step = {sampler.sample(*step_scores, s.history)};
      }
    } catch (const Error& e) {
      if (!is_cancel(e)) throw;
      finish = FinishReason::cancelled;
    }
  }
  if (spec) {
    out.draft_tokens = static_cast<int>(spec->stats().drafted);
    out.accepted_tokens = static_cast<int>(spec->stats().accepted);
  }
  sink.flush(*finish);
  out.decode_ms = ms_since(t_decode);
  return out;
}

void require_utf8(const std::string& text, const std::string& field) {
  if (!qwen3bpf::v1::valid_utf8(text)) throw invalid_argument(field + " is not valid UTF-8");
}

std::vector<int32_t> encode_text(const Tokenizer& tok, const std::string& text, const std::string& field,
                                 bool parse_special) {
  require_utf8(text, field);
  return tok.encode(text, parse_special);
}

void validate_messages(const std::vector<ChatMessage>& messages) {
  if (messages.empty()) throw invalid_argument("messages is empty: give at least one message");
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool")
      throw invalid_argument("messages[" + std::to_string(i) + "].role must be system, user, assistant or tool (got '" +
                             printable(m.role) + "')");
    require_utf8(m.content, "messages[" + std::to_string(i) + "].content");
  }
}

std::vector<int32_t> encode_chat(const Tokenizer& tok, const std::vector<ChatMessage>& messages, bool enable_thinking) {
  validate_messages(messages);
  return tok.encode(tok.apply_chat_template(messages, true, enable_thinking), true);
}

std::vector<int32_t> encode_chat_continuation(const Tokenizer& tok, std::span<const int32_t> history,
                                              const std::vector<ChatMessage>& messages, bool enable_thinking) {
  validate_messages(messages);
  std::string text;
  if (!history.empty()) {
    // The template ends every turn with "<|im_end|>\n". A reply the model
    // ended with <|im_end|> needs only the newline; one cut short (length,
    // stop string, cancel) or ended by another EOS is closed here.
    const auto im_end = tok.token_to_id("<|im_end|>");
    if (!im_end || history.back() != *im_end) text += "<|im_end|>";
    text += "\n";
  }
  text += tok.apply_chat_template(messages, true, enable_thinking);
  return tok.encode(text, true);
}

InferenceCore::InferenceCore(ModelHost& host) : host_(host), started_(std::chrono::steady_clock::now()) {
  default_max_new_tokens_ = host.config().default_max_new_tokens;
  set_default_speculative(host.config().speculative);
  // auto: the kernel driver, faster by measurement for one session and for
  // several (docs/kernel-driver.md, "Several sessions").
  set_default_driver(host.config().driver == "user" ? Driver::user : Driver::kernel);
  kernel_loaded_ = host.config().driver != "user";
  verify::PipelineOptions po;
  po.data_dir = host.config().state_dir + "/verify";  // vmlinux.h and the header tree are cached there
  pipeline_ = std::make_unique<verify::Pipeline>(po);
}

InferenceCore::~InferenceCore() = default;

Runtime& InferenceCore::runtime_for_work() {
  if (shutting_down_) throw unavailable("the daemon is stopping");
  return host_.runtime();
}

int InferenceCore::max_new_tokens(int requested) const {
  if (requested < 0) throw invalid_argument("max_new_tokens must be >= 0 (0 = default), got " + std::to_string(requested));
  return requested == 0 ? default_max_new_tokens_.load() : requested;
}

std::function<bool()> InferenceCore::cancellation(std::function<bool()> transport_cancelled) const {
  return [this, t = std::move(transport_cancelled)] { return shutting_down_.load() || (t && t()); };
}

ForwardOutcome InferenceCore::forward(ForwardOptions o) {
  ++counters_.forward;
  Runtime& rt = runtime_for_work();
  o.cancelled = cancellation(std::move(o.cancelled));
  ForwardOutcome r = run_forward(rt, o);
  counters_.prompt_tokens += r.prompt_tokens - r.cached_tokens;
  counters_.cached_tokens += r.cached_tokens;
  metrics_.count_tokens(r.prompt_tokens - r.cached_tokens, r.cached_tokens, 0);
  return r;
}

GenerateOutcome InferenceCore::generate(GenerateOptions o, const std::function<bool(const GeneratedToken&)>& emit) {
  ++counters_.generate;
  struct StreamCount {
    std::atomic<int>& n;
    explicit StreamCount(std::atomic<int>& c) : n(c) { ++n; }
    ~StreamCount() { --n; }
  } count(counters_.active_streams);
  Runtime& rt = runtime_for_work();
  o.cancelled = cancellation(std::move(o.cancelled));
  o.metrics = &metrics_;
  if (!o.speculative) {
    const int d = default_speculative_.load();
    o.speculative = d == kAuto ? speculation_pays(rt.backend->info()) : d == kOn;
  }
  if (!o.driver) o.driver = default_kernel_driver_.load() ? Driver::kernel : Driver::user;
  // driver = user does not load the kernel driver's programs: no turn to try.
  if (*o.driver == Driver::kernel && !kernel_loaded_) o.driver = Driver::user;
  GenerateOutcome r = run_generate(rt, o, emit);
  metrics_.count_speculative(r.draft_tokens, r.accepted_tokens);
  if (r.kernel_driven) metrics_.count_kernel_driven(r.completion_tokens);
  counters_.prompt_tokens += r.prompt_tokens - r.cached_tokens;
  counters_.cached_tokens += r.cached_tokens;
  counters_.completion_tokens += r.completion_tokens;
  metrics_.count_tokens(r.prompt_tokens - r.cached_tokens, r.cached_tokens, r.completion_tokens);
  if (r.finish == FinishReason::cancelled) {
    ++counters_.cancelled;
    spdlog::info("generation cancelled after {} tokens ({})", r.completion_tokens,
                 shutting_down_ ? "daemon stopping" : "client cancelled or disconnected");
  }
  return r;
}

MetricsGauges InferenceCore::gauges() const {
  MetricsGauges g;
  g.kv_budget_bytes = static_cast<uint64_t>(host_.config().kv_budget_mib) * 1024 * 1024;
  g.max_sessions = host_.config().max_sessions;
  g.active_streams = counters_.active_streams;
  if (Runtime* rt = host_.runtime_if_ready()) {
    g.loaded = true;
    const SessionTotals t = rt->sessions->totals();
    const SessionLimits l = rt->sessions->limits();
    g.kv_bytes = t.kv_bytes;
    g.kv_budget_bytes = l.kv_budget_bytes;
    g.sessions = t.sessions;
    g.ephemeral_sessions = t.ephemeral;
    g.busy_sessions = t.busy;
    g.max_sessions = l.max_sessions;
    g.evicted_sessions = t.evicted;
    g.queue_depth = rt->scheduler->stats().queued;
    const BackendInfo info = rt->backend->info();
    g.bpf_programs = info.bpf_programs;
    g.bpf_maps = info.bpf_maps;
  }
  return g;
}

}  // namespace qwen3
