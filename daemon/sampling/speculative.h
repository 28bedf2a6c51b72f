// Exact speculative decoding by prompt lookup: drafts are copied from the
// sequence's own history (the tokens that followed the latest earlier
// occurrence of its last n tokens) and verified in one forward pass over
// [last token, d1..dK] with every position's scores. Greedy output is
// identical to plain greedy decoding, and so is seeded sampled output: each
// position takes the draw plain decoding would make there (the same draw
// index, Sampler::peek_sample), and a draft is accepted exactly when that draw
// is the draft (probability p(d); otherwise the draw is p without d, renormalised).
//
// The caller owns the forward calls and the KV cache:
//   tokens = spec.step(forward, kv, sampler, wants, history, room);
//   history += tokens;                 // kv now holds history.size() - 1 positions
// step() is propose() + one forward + verify() + the KV truncation; a caller
// that keeps fewer of the tokens (EOS, a stop string) truncates the KV again
// to history.size() - 1: the last token is always the one fed next.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/backend.h"
#include "sampling/sampler.h"

namespace qwen3 {

struct SpeculativeOptions {
  // n-gram lengths tried, longest first. 2 finds most of the copies a repair
  // prompt offers; 1 drafts on every common token and mostly misses.
  int max_ngram = 3;
  int min_ngram = 2;
  // Draft length bounds. A pass of K+1 positions computes the vocabulary
  // projection K+1 times, so K grows only while drafts are accepted whole.
  int max_draft = 7;
  int min_draft = 1;
  // After this many drafts in a row without one accepted token, no drafting
  // for `pause_steps` decode steps (text that does not repeat costs nothing).
  int miss_limit = 2;
  int pause_steps = 16;
};

// Whether verification passes save work on this backend, i.e. whether a pass
// over n positions costs clearly less than n single-position steps: true where
// a step streams the weights once for every position of the pass (q24, the
// float reference); false for the BPF q8 and q4 block kernels, which are bound
// by the core's multiplier and cost the same per position batched or not (measured:
// 1.02-1.04x on a copy-heavy prompt, 0.90-0.97x on text that barely repeats;
// docs/performance.md). The daemon's `speculative = auto` follows it.
bool speculation_pays(const BackendInfo& backend);

// The tokens after the most recent earlier occurrence of the last n tokens of
// `history` (n from max_ngram down to min_ngram), at most `max_tokens`; empty
// when no n-gram recurs.
std::vector<int32_t> lookup_draft(std::span<const int32_t> history, int min_ngram, int max_ngram, int max_tokens);

struct SpeculativeStats {
  uint64_t steps = 0;     // verification passes (drafts fed)
  uint64_t drafted = 0;   // draft tokens fed
  uint64_t accepted = 0;  // of those, accepted
};

class SpeculativeDecoder {
 public:
  // Throws invalid_argument for bounds out of order or below 1.
  explicit SpeculativeDecoder(const SpeculativeOptions& options = {});

  // The draft for the next step, at most `room` tokens (what the token limit
  // and the context still allow after the pending last token); empty while
  // paused, when room < 1 or when no n-gram recurs. `history` ends with the
  // pending token (generated, not yet in the KV cache).
  std::vector<int32_t> propose(std::span<const int32_t> history, int room);

  // What to ask of the verification pass: the sampler's wants at every position.
  static ForwardWants verify_wants(const ForwardWants& plain);

  struct Verdict {
    // The accepted drafts, then one token the model chose; without that last
    // token when the position after the drafts had no usable scores (see
    // verify), and empty when position 0 had none.
    std::vector<int32_t> tokens;
    int accepted = 0;  // drafts accepted
  };
  // Checks `draft` against the pass's scores (positions [0, draft.size()]:
  // position i holds the distribution after history + d1..di). `history` is
  // the sequence before the draft (ending with the token fed first); the
  // repetition penalty of position i sees it plus d1..di. Updates the
  // adaptive draft length and the counters. A position without what the
  // sampler needs (its wants(): a scheduler that splits a long pass reports
  // only the argmax of the early chunks) ends the verdict before it. Throws
  // Error when the pass reported fewer positions than it was fed.
  Verdict verify(Sampler& sampler, const ForwardResult& scores, std::span<const int32_t> draft,
                 std::span<const int32_t> history);

  // How the caller runs a forward pass (the backend, or the daemon's scheduler).
  using ForwardFn = std::function<ForwardResult(KvCache&, std::span<const int32_t>, const ForwardWants&)>;
  // One decode step after `history` (last token pending; `kv` holds
  // history.size() - 1 positions): feeds the pending token, with a draft when
  // one is found, and returns the 1..K+1 tokens it yields, `kv` truncated to
  // hold everything but the last of them. Without a draft it is exactly a
  // plain decode step (forward of one token, sampler.sample). Both draw in
  // the pass where the backend can (Sampler::in_pass). `room`: tokens
  // the caller may still take (>= 1). `wants`: the sampler's. Errors of
  // `forward` pass through with the cache as it left it.
  std::vector<int32_t> step(const ForwardFn& forward, KvCache& kv, Sampler& sampler, const ForwardWants& wants,
                            std::span<const int32_t> history, int room);

  const SpeculativeStats& stats() const { return stats_; }
  int draft_length() const { return k_; }

 private:
  void adapt(int drafted, int accepted);

  SpeculativeOptions opt_;
  SpeculativeStats stats_;
  int k_;           // current draft length
  int cap_;         // longest draft whose pass came back whole (max_draft until one did not)
  int misses_ = 0;  // drafts in a row with nothing accepted
  int paused_ = 0;  // decode steps left without drafting
};

}  // namespace qwen3
