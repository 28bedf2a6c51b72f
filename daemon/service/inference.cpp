#include "service/inference.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>

#include "common/error.h"
#include "service/stop_matcher.h"
#include "sessions/session.h"

namespace qwen3 {

namespace {

using Steady = std::chrono::steady_clock;

double ms_since(Steady::time_point t) {
  return std::chrono::duration<double, std::milli>(Steady::now() - t).count();
}

// The session (or an ephemeral KV cache) a request runs on, with the KV
// truncated to what the request can reuse.
struct Prepared {
  SessionLease lease;
  std::vector<int32_t> sequence;  // the whole sequence the request stands for
  int keep = 0;                   // positions reused from the cache
};

Prepared prepare(Runtime& rt, const std::string& session_id, uint32_t caller, bool append,
                 std::span<const int32_t> tokens, int extra_positions) {
  Prepared p;
  if (!session_id.empty()) {
    p.lease = rt.sessions->acquire(session_id, caller);
    if (append) {
      p.sequence = p.lease->history;
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
    const long want = static_cast<long>(p.sequence.size()) + std::max(extra_positions, 0);
    p.lease = rt.sessions->create_ephemeral(static_cast<int>(std::min<long>(want, cap)));
  }
  p.keep = reusable_prefix(p.lease->history, p.lease->kv->positions(), p.sequence);
  p.lease->kv->truncate(p.keep);
  p.lease->history.assign(p.sequence.begin(), p.sequence.begin() + p.keep);
  return p;
}

float log_sum_exp(const std::vector<float>& v) {
  float m = -std::numeric_limits<float>::infinity();
  for (float x : v) m = std::max(m, x);
  double s = 0;
  for (float x : v) s += std::exp(static_cast<double>(x) - m);
  return m + static_cast<float>(std::log(s));
}

// Top-n by logit with log-softmax values from the full logits when present,
// otherwise from the candidates the backend reported.
std::vector<ScoredToken> top_scored(const PositionLogits& p, int n, float* lse_out) {
  std::vector<std::pair<int32_t, float>> cand;
  if (!p.full.empty()) {
    cand.reserve(p.full.size());
    for (size_t i = 0; i < p.full.size(); ++i) cand.emplace_back(static_cast<int32_t>(i), p.full[i]);
  } else {
    cand = p.top_k;
  }
  std::vector<float> values;
  values.reserve(cand.size());
  for (auto& c : cand) values.push_back(c.second);
  const float lse = values.empty() ? 0.0f : log_sum_exp(values);
  if (lse_out) *lse_out = lse;
  const size_t k = std::min(cand.size(), static_cast<size_t>(std::max(n, 0)));
  std::partial_sort(cand.begin(), cand.begin() + k, cand.end(),
                    [](const auto& a, const auto& b) { return a.second > b.second || (a.second == b.second && a.first < b.first); });
  std::vector<ScoredToken> out;
  for (size_t i = 0; i < k; ++i) out.push_back({cand[i].first, cand[i].second, cand[i].second - lse});
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
  Prepared p = prepare(rt, o.session_id, o.caller_uid, o.append, o.tokens, 0);
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
  out.top = top_scored(last, o.top_k, nullptr);
  if (o.all_positions)
    for (auto& pos : r.positions) out.position_argmax.push_back(pos.argmax >= 0 ? pos.argmax
                                                               : (pos.top_k.empty() ? -1 : pos.top_k.front().first));
  if (o.full_logits) out.logits = last.full;
  out.forward_ms = ms_since(t0);
  return out;
}

GenerateOutcome run_generate(Runtime& rt, const GenerateOptions& o,
                             const std::function<bool(const GeneratedToken&)>& emit) {
  const auto t0 = Steady::now();
  const ModelConfig& mc = rt.backend->config();
  if (o.tokens.empty() && !o.append) throw invalid_argument("empty input: give a prompt, token_ids or messages");
  validate_token_ids(o.tokens, mc.vocab_size, "token_ids");
  validate_token_ids(o.stop_token_ids, mc.vocab_size, "stop_token_ids");
  if (o.max_new_tokens < 1) throw invalid_argument("max_new_tokens must be >= 1");
  if (o.logprobs < 0 || o.logprobs > 20) throw invalid_argument("logprobs must be in [0, 20]");

  GenerateOutcome out;
  SamplingParams sp = o.sampling;
  if (o.random_seed) sp.seed = std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32);
  out.seed = sp.seed;
  Sampler sampler(sp);  // validates the parameters before any work
  ForwardWants wants = sampler.wants();
  if (o.logprobs > 0) {
    wants.full_logits = true;
    wants.top_k = std::max(wants.top_k, o.logprobs);
  }

  Prepared p = prepare(rt, o.session_id, o.caller_uid, o.append, o.tokens, o.max_new_tokens);
  if (p.sequence.empty()) throw invalid_argument("empty input: nothing to generate from");
  Session& s = *p.lease;
  out.prompt_tokens = static_cast<int>(p.sequence.size());
  out.cached_tokens = p.keep;
  out.queue_ms = ms_since(t0);

  const auto t_prefill = Steady::now();
  ForwardResult r;
  try {
    std::span<const int32_t> feed(p.sequence.data() + p.keep, p.sequence.size() - p.keep);
    r = rt.scheduler->run(*s.kv, feed, wants, o.cancelled);
  } catch (const Error& e) {
    if (!is_cancel(e)) throw;
    out.finish = FinishReason::cancelled;
    out.prefill_ms = ms_since(t_prefill);
    return out;
  }
  s.history = p.sequence;
  out.prefill_ms = ms_since(t_prefill);

  const auto t_decode = Steady::now();
  StreamDecoder decoder(rt.tokenizer, /*skip_special=*/true);
  StopMatcher stopper(o.stop);
  const int ctx = s.kv->max_context();
  bool stopped_by_string = false;
  std::optional<FinishReason> finish;
  for (int index = 0;; ++index) {
    if (r.positions.empty()) throw Error("the backend reported no logits for the decode step");
    const PositionLogits& scores = r.positions.back();
    const int32_t id = sampler.sample(scores, s.history);
    s.history.push_back(id);
    ++out.completion_tokens;

    GeneratedToken tok;
    tok.id = id;
    tok.index = index;
    if (o.logprobs > 0) {
      float lse = 0;
      tok.top = top_scored(scores, o.logprobs, &lse);
      tok.has_logprobs = true;
      if (!scores.full.empty() && id < static_cast<int32_t>(scores.full.size())) tok.logprob = scores.full[id] - lse;
    }
    const bool eos = (!o.ignore_eos && std::find(mc.eos_token_ids.begin(), mc.eos_token_ids.end(), id) != mc.eos_token_ids.end()) ||
                     std::find(o.stop_token_ids.begin(), o.stop_token_ids.end(), id) != o.stop_token_ids.end();
    if (eos) {
      finish = FinishReason::eos;
    } else {
      // Ids between the tokenizer's and the model's vocabulary size (padding rows
      // of the embedding) have no text.
      const bool has_text = id < rt.tokenizer->vocab_size();
      const auto step = stopper.push(has_text ? decoder.push(id) : std::string());
      tok.text = step.release;
      if (step.stopped) {
        finish = FinishReason::stop_sequence;
        out.matched_stop = step.matched;
        stopped_by_string = true;
      }
    }
    if (!finish && out.completion_tokens >= o.max_new_tokens) finish = FinishReason::length;
    if (!finish && s.kv->positions() >= ctx) finish = FinishReason::length;  // no room to feed it
    out.text += tok.text;
    if (!emit(tok)) {
      finish = FinishReason::cancelled;
      break;
    }
    if (finish) break;
    if (o.cancelled && o.cancelled()) {
      finish = FinishReason::cancelled;
      break;
    }
    try {
      const int32_t next[1] = {id};
      r = rt.scheduler->run(*s.kv, next, wants, o.cancelled);
    } catch (const Error& e) {
      if (!is_cancel(e)) throw;
      finish = FinishReason::cancelled;
      break;
    }
  }
  out.finish = *finish;
  if (!stopped_by_string) {
    const auto tail = stopper.push(decoder.flush());
    out.final_text = tail.release;
    if (tail.stopped) {
      out.finish = FinishReason::stop_sequence;
      out.matched_stop = tail.matched;
    } else {
      out.final_text += stopper.flush();
    }
    out.text += out.final_text;
  }
  out.decode_ms = ms_since(t_decode);
  return out;
}

}  // namespace qwen3
