#include "sampling/speculative.h"

#include <algorithm>
#include <string>

#include "common/error.h"

namespace qwen3 {

bool speculation_pays(const BackendInfo& backend) {
  return !(backend.name == "bpf" && (backend.precision == "q8" || backend.precision == "q4"));
}

std::vector<int32_t> lookup_draft(std::span<const int32_t> history, int min_ngram, int max_ngram, int max_tokens) {
  const int n_hist = static_cast<int>(history.size());
  if (max_tokens < 1 || min_ngram < 1) return {};
  for (int n = std::min(max_ngram, n_hist - 1); n >= min_ngram; --n) {
    const int32_t* tail = history.data() + n_hist - n;
    // Latest start first: the most recent copy predicts best. A match close
    // to the end (a repeating run) continues into the draft itself: the run
    // goes on with its period n_hist - from.
    for (int start = n_hist - n - 1; start >= 0; --start) {
      if (!std::equal(tail, tail + n, history.data() + start)) continue;
      const int from = start + n;
      std::vector<int32_t> draft;
      draft.reserve(max_tokens);
      for (int j = 0; j < max_tokens; ++j) {
        const int at = from + j;
        draft.push_back(at < n_hist ? history[at] : draft[at - n_hist]);
      }
      return draft;
    }
  }
  return {};
}

SpeculativeDecoder::SpeculativeDecoder(const SpeculativeOptions& o) : opt_(o), k_(o.min_draft), cap_(o.max_draft) {
  auto bad = [](const std::string& what) { return invalid_argument("speculative decoding: " + what); };
  if (o.min_ngram < 1 || o.max_ngram < o.min_ngram)
    throw bad("n-gram lengths must satisfy 1 <= min_ngram <= max_ngram (got " + std::to_string(o.min_ngram) + ", " +
              std::to_string(o.max_ngram) + ")");
  if (o.min_draft < 1 || o.max_draft < o.min_draft || o.max_draft > 63)
    throw bad("draft lengths must satisfy 1 <= min_draft <= max_draft <= 63 (got " + std::to_string(o.min_draft) +
              ", " + std::to_string(o.max_draft) + ")");
  if (o.miss_limit < 1 || o.pause_steps < 0) throw bad("miss_limit must be >= 1 and pause_steps >= 0");
}

std::vector<int32_t> SpeculativeDecoder::propose(std::span<const int32_t> history, int room) {
  if (paused_ > 0) {
    --paused_;
    return {};
  }
  return lookup_draft(history, opt_.min_ngram, opt_.max_ngram, std::min(k_, room));
}

ForwardWants SpeculativeDecoder::verify_wants(const ForwardWants& plain) {
  ForwardWants w = plain;
  w.all_positions = true;
  return w;
}

SpeculativeDecoder::Verdict SpeculativeDecoder::verify(Sampler& sampler, const ForwardResult& scores,
                                                       std::span<const int32_t> draft,
                                                       std::span<const int32_t> history) {
  const size_t K = draft.size();
  if (scores.positions.size() != K + 1)
    throw Error("speculative decoding: the verification pass reported " + std::to_string(scores.positions.size()) +
                " positions for " + std::to_string(K + 1) + " fed tokens");
  Verdict v;
  // A caller's scheduler may split a long pass into chunks and report only
  // the argmax for all but the last: a position without what the sampler
  // needs ends the verdict there (its drafts are kept, the last of them
  // becomes the pending token); with none usable the verdict is empty.
  const ForwardWants need = sampler.wants();
  auto usable = [&need](const PositionLogits& p) {
    if (p.sampled >= 0) return true;  // drawn in the pass (Sampler::in_pass)
    if (need.full_logits) return !p.full.empty();
    if (need.top_k > 1) return !p.top_k.empty() || !p.full.empty();
    return p.argmax >= 0 || !p.top_k.empty() || !p.full.empty();
  };
  // The repetition penalty of position i sees the history and d1..di.
  std::vector<int32_t> seen(history.begin(), history.end());
  seen.reserve(seen.size() + K + 1);
  for (size_t i = 0;; ++i) {
    if (!usable(scores.positions[i])) {
      // The pass was split: its first usable position starts the last chunk,
      // so a chunk holds that many positions. Drafts stay within one from now on.
      size_t u = i;
      while (u <= K && !usable(scores.positions[u])) ++u;
      cap_ = std::max(opt_.min_draft, std::min(cap_, static_cast<int>(u) - 1));
      break;
    }
    // The token plain decoding draws at this position (the same draw index):
    // d is accepted exactly when that draw picks it, so P(d) = p(d), any
    // other x comes with p(x), and the tokens are plain sampling's own for
    // the seed; greedy (a point mass) accepts exactly when d is the argmax.
    const int32_t t = sampler.peek_sample(scores.positions[i], seen, i);
    v.tokens.push_back(t);
    if (i == K || t != draft[i]) break;  // the model's token, or the end of the drafts
    seen.push_back(t);
    ++v.accepted;
  }
  sampler.skip(v.tokens.size());
  adapt(static_cast<int>(K), v.accepted);
  return v;
}

std::vector<int32_t> SpeculativeDecoder::step(const ForwardFn& forward, KvCache& kv, Sampler& sampler,
                                              const ForwardWants& wants, std::span<const int32_t> history, int room) {
  if (history.empty()) throw invalid_argument("speculative decoding: a decode step needs a pending token");
  const int base = kv.positions();
  // The draft must leave the pending token and itself room in the context.
  const int ctx_room = kv.max_context() - base - 1;
  std::vector<int32_t> draft = propose(history, std::min(room - 1, ctx_room));
  std::vector<int32_t> feed;
  feed.reserve(draft.size() + 1);
  feed.push_back(history.back());
  feed.insert(feed.end(), draft.begin(), draft.end());
  // The draws in the pass where the backend makes them (no logits out to
  // user space): the plain step's, or each draft position's up to the first
  // that rejects the draft.
  if (draft.empty()) {
    const ForwardResult r = forward(kv, feed, sampler.in_pass(wants, history));
    if (r.positions.empty()) throw Error("the backend reported no logits for the decode step");
    return {sampler.sample(r.positions.back(), history)};
  }
  const ForwardResult r = forward(kv, feed, sampler.in_pass(verify_wants(wants), history));
  Verdict v;
  try {
    v = verify(sampler, r, draft, history);
  } catch (...) {
    kv.truncate(std::min(base, kv.positions()));  // history and KV stay in step
    throw;
  }
  if (v.tokens.empty()) {
    // Nothing usable came back (a chunked pass): forget it, take a plain step.
    kv.truncate(base);
    const ForwardResult plain = forward(kv, std::span<const int32_t>(feed.data(), 1), sampler.in_pass(wants, history));
    if (plain.positions.empty()) throw Error("the backend reported no logits for the decode step");
    return {sampler.sample(plain.positions.back(), history)};
  }
  // The cache keeps the pending token and every new token but the last.
  kv.truncate(base + static_cast<int>(v.tokens.size()));
  return std::move(v.tokens);
}

void SpeculativeDecoder::adapt(int drafted, int accepted) {
  ++stats_.steps;
  stats_.drafted += drafted;
  stats_.accepted += accepted;
  if (accepted == drafted) {
    // Whole drafts accepted: try the next longer one (K+1 = 2, 4, 8 positions,
    // the BPF kernels' q8 prefill path works on pairs of positions).
    k_ = std::min(cap_, 2 * k_ + 1);
    misses_ = 0;
  } else if (accepted > 0) {
    k_ = std::max(opt_.min_draft, std::min({k_, accepted, cap_}));
    misses_ = 0;
  } else {
    k_ = std::min(opt_.min_draft, cap_);
    if (++misses_ >= opt_.miss_limit) {
      paused_ = opt_.pause_steps;
      misses_ = 0;
    }
  }
}

}  // namespace qwen3
