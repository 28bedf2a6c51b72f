// Prompt-lookup speculative decoding against a fake backend whose
// distributions are known: greedy and seeded sampled output identical to plain
// decoding, sampled output with plain sampling's distribution, the KV cache holding exactly the
// accepted tokens, and stops inside an accepted draft.
#include "sampling/speculative.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>

#include "common/error.h"

namespace qwen3 {
namespace {

// The fake KV cache remembers the tokens themselves, so a test can check
// that the cache holds exactly the history (minus the pending token).
class FakeKv : public KvCache {
 public:
  explicit FakeKv(int max_context) : max_(max_context) {}
  int positions() const override { return static_cast<int>(tokens.size()); }
  int max_context() const override { return max_; }
  size_t bytes() const override { return tokens.size() * 4; }
  void truncate(int n) override {
    ASSERT_LE(n, positions());
    tokens.resize(n);
  }
  std::vector<int32_t> tokens;

 private:
  int max_;
};

// A toy model over `vocab` tokens: the logits after a prefix depend on its
// last two tokens (so generations fall into loops a lookup can draft from)
// and, every `period` positions, on the position too (so some drafts fail).
class FakeBackend : public Backend {
 public:
  FakeBackend(int vocab, int period, float sharpness) : vocab_(vocab), period_(period), sharp_(sharpness) {
    cfg_.vocab_size = vocab;
  }
  const ModelConfig& config() const override { return cfg_; }
  BackendInfo info() const override { return {.name = "fake"}; }
  std::unique_ptr<KvCache> create_kv(int max_context) override { return std::make_unique<FakeKv>(max_context); }

  std::vector<float> logits_after(std::span<const int32_t> prefix) const {
    const size_t n = prefix.size();
    const uint64_t a = n >= 2 ? prefix[n - 2] : 99, b = n >= 1 ? prefix[n - 1] : 98;
    std::vector<float> l(vocab_);
    for (int v = 0; v < vocab_; ++v) {
      uint64_t h = (a * 1000003 + b * 10007 + v * 101 + 7) * 0x9E3779B97F4A7C15ull;
      h ^= h >> 29;
      l[v] = sharp_ * static_cast<float>(h % 1000) / 1000.0f;
    }
    if (period_ > 0 && n % period_ == 0) l[(n * 3) % vocab_] += sharp_;  // a position-dependent twist
    return l;
  }

  ForwardResult forward(KvCache& kv, std::span<const int32_t> tokens, const ForwardWants& wants) override {
    auto& fk = dynamic_cast<FakeKv&>(kv);
    if (fk.positions() + static_cast<int>(tokens.size()) > fk.max_context()) throw invalid_argument("context overflow");
    ++calls;
    fed.push_back(static_cast<int>(tokens.size()));
    ForwardResult r;
    for (size_t i = 0; i < tokens.size(); ++i) {
      fk.tokens.push_back(tokens[i]);
      if (!wants.all_positions && i + 1 < tokens.size()) continue;
      const std::vector<float> l = logits_after(fk.tokens);
      PositionLogits p;
      std::vector<std::pair<int32_t, float>> c;
      for (int v = 0; v < vocab_; ++v) c.emplace_back(v, l[v]);
      std::stable_sort(c.begin(), c.end(), [](auto& x, auto& y) { return x.second > y.second; });
      p.argmax = c.front().first;
      c.resize(std::min<size_t>(c.size(), std::max(wants.top_k, 0)));
      p.top_k = c;
      if (wants.full_logits) p.full = l;
      r.positions.push_back(std::move(p));
    }
    // The daemon's scheduler cuts a long pass into chunks and reports only the
    // argmax of the positions before the last chunk.
    if (chunk > 0 && wants.all_positions && r.positions.size() > static_cast<size_t>(chunk)) {
      const size_t last_chunk = (r.positions.size() - 1) / chunk * chunk;
      for (size_t i = 0; i < last_chunk; ++i) {
        r.positions[i].top_k.clear();
        r.positions[i].full.clear();
      }
    }
    return r;
  }

  int chunk = 0;  // > 0: the scheduler's chunking, see forward()
  int calls = 0;
  std::vector<int> fed;  // tokens fed per call

 private:
  ModelConfig cfg_;
  int vocab_, period_;
  float sharp_;
};

struct Generation {
  std::vector<int32_t> tokens;
  std::vector<int32_t> kv;       // what the cache held at the end
  std::vector<int32_t> history;  // prompt + tokens
};

// The daemon's loop in miniature: prefill, then steps until `n` tokens or a
// stop token; a stop inside an accepted draft drops the rest and truncates.
Generation generate(FakeBackend& b, const std::vector<int32_t>& prompt, int n, const SamplingParams& sp,
                    SpeculativeDecoder* spec, int32_t stop = -1) {
  Sampler sampler(sp);
  auto kv = b.create_kv(static_cast<int>(prompt.size()) + n + 1);
  auto forward = [&b](KvCache& c, std::span<const int32_t> t, const ForwardWants& w) { return b.forward(c, t, w); };
  Generation g;
  g.history = prompt;
  const ForwardWants wants = sampler.wants();
  const ForwardResult first = b.forward(*kv, prompt, wants);
  std::vector<int32_t> step = {sampler.sample(first.positions.back(), g.history)};
  for (;;) {
    bool done = false;
    for (int32_t t : step) {
      g.history.push_back(t);
      g.tokens.push_back(t);
      if (t == stop || static_cast<int>(g.tokens.size()) >= n) {
        done = true;
        break;
      }
    }
    // Between steps (and at the end) the cache holds all but the pending token.
    kv->truncate(static_cast<int>(g.history.size()) - 1);
    EXPECT_EQ(dynamic_cast<FakeKv&>(*kv).tokens, std::vector<int32_t>(g.history.begin(), g.history.end() - 1));
    if (done) break;
    const int room = n - static_cast<int>(g.tokens.size());
    if (spec) {
      step = spec->step(forward, *kv, sampler, wants, g.history, room);
      EXPECT_LE(static_cast<int>(step.size()), room);
    } else {
      const int32_t last = g.history.back();
      step = {sampler.sample(b.forward(*kv, std::span<const int32_t>(&last, 1), wants).positions.back(), g.history)};
    }
  }
  g.kv = dynamic_cast<FakeKv&>(*kv).tokens;
  return g;
}

TEST(LookupDraft, ContinuesTheMostRecentLongestMatch) {
  //                        0  1  2  3  4  5  6  7  8  9 10
  const std::vector<int32_t> h{5, 1, 2, 9, 7, 1, 2, 8, 3, 1, 2};
  // "1 2" last occurred at 5..6, followed by 8 3 1 2
  EXPECT_EQ(lookup_draft(h, 2, 3, 3), (std::vector<int32_t>{8, 3, 1}));
  // past the end of the history the copy continues with its own period (4 here)
  EXPECT_EQ(lookup_draft(h, 2, 3, 6), (std::vector<int32_t>{8, 3, 1, 2, 8, 3}));
  // a 3-gram match wins over a more recent 2-gram one
  const std::vector<int32_t> h3{4, 1, 2, 6, 0, 1, 2, 5, 4, 1, 2};
  EXPECT_EQ(lookup_draft(h3, 2, 3, 1), (std::vector<int32_t>{6}));
  EXPECT_EQ(lookup_draft(h3, 2, 2, 1), (std::vector<int32_t>{5}));
  // a repeating run drafts its own continuation
  EXPECT_EQ(lookup_draft(std::vector<int32_t>{3, 3, 3}, 2, 3, 4), (std::vector<int32_t>{3, 3, 3, 3}));
  EXPECT_EQ(lookup_draft(std::vector<int32_t>{1, 4, 1, 4, 1}, 2, 3, 5), (std::vector<int32_t>{4, 1, 4, 1, 4}));
  // nothing recurs, or no room
  EXPECT_TRUE(lookup_draft(std::vector<int32_t>{1, 2, 3, 4, 5}, 2, 3, 4).empty());
  EXPECT_TRUE(lookup_draft(h, 2, 3, 0).empty());
  EXPECT_TRUE(lookup_draft(std::vector<int32_t>{}, 2, 3, 4).empty());
}

TEST(Speculative, RejectsBadOptions) {
  EXPECT_THROW(SpeculativeDecoder({.max_ngram = 1, .min_ngram = 2}), Error);
  EXPECT_THROW(SpeculativeDecoder({.max_draft = 0, .min_draft = 0}), Error);
  EXPECT_THROW(SpeculativeDecoder({.max_draft = 100}), Error);
}

TEST(Speculative, GreedyIsIdenticalToPlainAndDraftsAreBothAcceptedAndRejected) {
  uint64_t drafted = 0, accepted = 0;
  for (int seed = 0; seed < 20; ++seed) {
    FakeBackend b(50, 7 + seed % 5, 4.0f);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 12; ++i) prompt.push_back((seed * 31 + i * 7) % 50);
    for (auto [penalty, chunk] : {std::pair{1.0f, 0}, std::pair{1.3f, 0}, std::pair{1.3f, 2}, std::pair{1.0f, 3}}) {
      b.chunk = chunk;
      const SamplingParams sp{.repetition_penalty = penalty};
      b.calls = 0;
      const Generation plain = generate(b, prompt, 120, sp, nullptr);
      const int plain_calls = b.calls;
      b.calls = 0;
      SpeculativeDecoder spec;
      const Generation fast = generate(b, prompt, 120, sp, &spec);
      ASSERT_EQ(fast.tokens, plain.tokens) << "seed " << seed << " penalty " << penalty << " chunk " << chunk;
      EXPECT_EQ(fast.kv, plain.kv);
      EXPECT_LE(b.calls, plain_calls);
      drafted += spec.stats().drafted;
      accepted += spec.stats().accepted;
    }
  }
  EXPECT_GT(accepted, 0u);
  EXPECT_LT(accepted, drafted);
}

// Each position takes the draw plain decoding makes there (the same seed and
// draw index), so seeded sampling gives plain sampling's tokens, not only its
// distribution, also with a penalty and with split passes.
TEST(Speculative, SampledIsIdenticalToPlainForTheSameSeed) {
  uint64_t drafted = 0, accepted = 0;
  const std::vector<SamplingParams> configs = {
      {.temperature = 0.7f, .top_k = 5},
      {.temperature = 1.0f},
      {.temperature = 0.8f, .top_p = 0.8f, .repetition_penalty = 1.3f},
  };
  for (int seed = 0; seed < 12; ++seed) {
    FakeBackend b(50, 7 + seed % 5, 4.0f);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 12; ++i) prompt.push_back((seed * 31 + i * 7) % 50);
    for (size_t ci = 0; ci < configs.size(); ++ci) {
      SamplingParams sp = configs[ci];
      sp.seed = 1000 + seed;
      b.chunk = seed % 3 == 2 ? 2 : 0;
      const Generation plain = generate(b, prompt, 100, sp, nullptr);
      SpeculativeDecoder spec;
      const Generation fast = generate(b, prompt, 100, sp, &spec);
      ASSERT_EQ(fast.tokens, plain.tokens) << "seed " << seed << " config " << ci;
      EXPECT_EQ(fast.kv, plain.kv);
      drafted += spec.stats().drafted;
      accepted += spec.stats().accepted;
    }
  }
  EXPECT_GT(accepted, 0u);
  EXPECT_LT(accepted, drafted);
}

// A draft d is accepted with probability p(d); when it is not, the token
// follows p without d, renormalised.
TEST(Speculative, ARejectedDraftDrawsFromTheRestRenormalised) {
  ForwardResult r;  // {0: 0.5, 1: 0.3, 2: 0.2} at the draft's position
  for (int i = 0; i < 2; ++i) {
    PositionLogits p;
    p.full = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
    r.positions.push_back(p);
  }
  const std::vector<int32_t> draft{0};
  std::map<int32_t, int> rejected;
  int accepts = 0;
  const int n = 20000;
  SpeculativeDecoder spec;
  for (int seed = 0; seed < n; ++seed) {
    Sampler sampler({.temperature = 1.0f, .seed = uint64_t(seed)});
    const auto v = spec.verify(sampler, r, draft, {});
    EXPECT_EQ(sampler.draws(), v.tokens.size()) << "one draw index per token kept";
    if (v.accepted == 1) {
      ++accepts;
      continue;
    }
    ASSERT_EQ(v.tokens.size(), 1u);
    rejected[v.tokens[0]]++;
  }
  EXPECT_NEAR(double(accepts) / n, 0.5, 0.02);
  const int rej = n - accepts;
  EXPECT_EQ(rejected.count(0), 0u);
  EXPECT_NEAR(double(rejected[1]) / rej, 0.6, 0.02);
  EXPECT_NEAR(double(rejected[2]) / rej, 0.4, 0.02);
}

TEST(Speculative, GreedyStepsOnRepetitiveTextAreFewerThanTokens) {
  FakeBackend b(20, 0, 4.0f);  // no twist: the greedy output loops, every draft after the first loop lands
  SpeculativeDecoder spec;
  const Generation fast = generate(b, {1, 2, 3}, 200, {}, &spec);
  b.calls = 0;
  b.fed.clear();
  const Generation plain = generate(b, {1, 2, 3}, 200, {}, nullptr);
  EXPECT_EQ(fast.tokens, plain.tokens);
  EXPECT_GT(spec.stats().accepted, 100u);
  EXPECT_GT(double(spec.stats().accepted) / spec.stats().drafted, 0.8);
}

TEST(Speculative, NoMatchIsExactlyAPlainDecodeStep) {
  FakeBackend b(10, 0, 1.0f);
  Sampler sampler({});
  SpeculativeDecoder spec;
  auto kv = b.create_kv(16);
  const std::vector<int32_t> history{1, 2, 3, 4};  // nothing recurs
  b.forward(*kv, std::span<const int32_t>(history.data(), 3), sampler.wants());
  b.fed.clear();
  auto forward = [&b](KvCache& c, std::span<const int32_t> t, const ForwardWants& w) { return b.forward(c, t, w); };
  const auto out = spec.step(forward, *kv, sampler, sampler.wants(), history, 10);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(b.fed, std::vector<int>{1});
  EXPECT_EQ(kv->positions(), 4);
  EXPECT_EQ(spec.stats().steps, 0u);
}

TEST(Speculative, DraftRespectsRoomAndContext) {
  FakeBackend b(10, 0, 1.0f);
  Sampler sampler({});
  auto forward = [&b](KvCache& c, std::span<const int32_t> t, const ForwardWants& w) { return b.forward(c, t, w); };
  const std::vector<int32_t> history{1, 2, 3, 4, 5, 6, 7, 1, 2};  // "1 2" recurs: draft 3 4 5 ...
  for (int room : {1, 2, 3}) {
    SpeculativeDecoder spec({.max_draft = 7, .min_draft = 7});
    auto kv = b.create_kv(32);
    b.forward(*kv, std::span<const int32_t>(history.data(), history.size() - 1), sampler.wants());
    b.fed.clear();
    const auto out = spec.step(forward, *kv, sampler, sampler.wants(), history, room);
    EXPECT_EQ(b.fed.front(), room) << "pending token + room - 1 drafts";
    EXPECT_LE(static_cast<int>(out.size()), room);
    EXPECT_EQ(kv->positions(), static_cast<int>(history.size() + out.size()) - 1);
  }
  // a cache with room for the pending token and two more positions
  SpeculativeDecoder spec({.max_draft = 7, .min_draft = 7});
  auto kv = b.create_kv(static_cast<int>(history.size()) + 2);
  b.forward(*kv, std::span<const int32_t>(history.data(), history.size() - 1), sampler.wants());
  b.fed.clear();
  spec.step(forward, *kv, sampler, sampler.wants(), history, 100);
  EXPECT_EQ(b.fed.front(), 3);
}

TEST(Speculative, StopInsideAnAcceptedDraftDropsTheRest) {
  FakeBackend b(20, 0, 4.0f);
  const Generation plain = generate(b, {1, 2, 3}, 200, {}, nullptr);
  // stop at a token that appears late, inside the loop the drafts copy
  const int32_t stop = plain.tokens[150];
  const size_t first = std::find(plain.tokens.begin(), plain.tokens.end(), stop) - plain.tokens.begin();
  ASSERT_GT(first, 20u) << "pick a token the loop reaches only after drafts are flowing";
  const Generation plain_stop = generate(b, {1, 2, 3}, 200, {}, nullptr, stop);
  SpeculativeDecoder spec;
  const Generation fast_stop = generate(b, {1, 2, 3}, 200, {}, &spec, stop);
  EXPECT_EQ(fast_stop.tokens, plain_stop.tokens);
  EXPECT_EQ(fast_stop.tokens.size(), first + 1);
  EXPECT_EQ(fast_stop.kv, plain_stop.kv);
}

TEST(Speculative, PausesAfterRepeatedMisses) {
  Sampler sampler({});
  SpeculativeDecoder spec({.miss_limit = 2, .pause_steps = 5});
  const std::vector<int32_t> history{1, 2, 5, 1, 2};  // "1 2" recurs: draft 5 ...
  // The model wants 9 at every position: every draft fails at once.
  auto rejecting = [](size_t positions) {
    ForwardResult r;
    for (size_t i = 0; i < positions; ++i) r.positions.push_back({.argmax = 9, .top_k = {{9, 1.0f}}});
    return r;
  };
  for (int miss = 0; miss < 2; ++miss) {
    const auto draft = spec.propose(history, 10);
    ASSERT_FALSE(draft.empty());
    const auto v = spec.verify(sampler, rejecting(draft.size() + 1), draft, history);
    EXPECT_EQ(v.tokens, std::vector<int32_t>{9});
    EXPECT_EQ(v.accepted, 0);
  }
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(spec.propose(history, 10).empty()) << "paused step " << i;
  EXPECT_FALSE(spec.propose(history, 10).empty()) << "drafting resumes after the pause";
  EXPECT_EQ(spec.stats().accepted, 0u);
  EXPECT_EQ(spec.stats().steps, 2u);
}

TEST(Speculative, RepetitionPenaltySeesTheAcceptedDrafts) {
  // Drafts given by hand (a lookup only drafts tokens already in the history):
  // d1 = 7 is new; after it the penalty must make 3 beat 7.
  Sampler sampler({.repetition_penalty = 1.5f});
  SpeculativeDecoder spec;
  const std::vector<int32_t> history{1, 2};
  ForwardResult r;
  for (int i = 0; i < 3; ++i) {
    PositionLogits p;
    p.full = std::vector<float>(10, 0.0f);
    p.full[7] = 2.0f;
    p.full[3] = 1.9f;
    r.positions.push_back(p);
  }
  const std::vector<int32_t> draft{7, 7};
  const auto v = spec.verify(sampler, r, draft, history);
  EXPECT_EQ(v.tokens, (std::vector<int32_t>{7, 3}));
}

TEST(Speculative, SplitPassesShortenTheDrafts) {
  // A scheduler that runs 3 positions per chunk: a sampled verification of
  // 4 or more positions gets only argmaxes for its first chunk.
  FakeBackend b(20, 0, 4.0f);
  b.chunk = 3;
  SpeculativeDecoder spec;
  const Generation g = generate(b, {1, 2, 3}, 120, {.temperature = 0.05f, .seed = 5}, &spec);
  EXPECT_EQ(g.tokens.size(), 120u);
  EXPECT_LE(spec.draft_length(), 2) << "drafts fit in one chunk (K + 1 <= 3)";
  EXPECT_GT(spec.stats().accepted * 10, spec.stats().drafted * 7) << "and still land";
}

TEST(Speculative, ABadPassLeavesTheCacheAsBefore) {
  FakeBackend b(10, 0, 1.0f);
  Sampler sampler({});
  SpeculativeDecoder spec;
  const std::vector<int32_t> history{1, 2, 3, 1, 2};
  auto kv = b.create_kv(32);
  b.forward(*kv, std::span<const int32_t>(history.data(), 4), sampler.wants());
  // a broken forward that reports only the last position
  auto forward = [&b](KvCache& c, std::span<const int32_t> t, const ForwardWants& w) {
    ForwardWants last = w;
    last.all_positions = false;
    return b.forward(c, t, last);
  };
  EXPECT_THROW(spec.step(forward, *kv, sampler, sampler.wants(), history, 10), Error);
  EXPECT_EQ(kv->positions(), 4);
}

// The exact probability of a whole continuation under plain sampling, from
// the sampler's own distribution() at every position.
double exact_probability(FakeBackend& b, const Sampler& s, std::vector<int32_t> history, std::span<const int32_t> seq) {
  double p = 1;
  for (int32_t t : seq) {
    PositionLogits pl;
    pl.full = b.logits_after(history);
    pl.argmax = static_cast<int32_t>(std::max_element(pl.full.begin(), pl.full.end()) - pl.full.begin());
    for (int v = 0; v < static_cast<int>(pl.full.size()); ++v) pl.top_k.emplace_back(v, pl.full[v]);
    std::stable_sort(pl.top_k.begin(), pl.top_k.end(), [](auto& x, auto& y) { return x.second > y.second; });
    p *= s.distribution(pl, history).prob_of(t);
    history.push_back(t);
  }
  return p;
}

// Pearson chi-square of `counts` (n runs) against the exact probabilities;
// cells with expectation < 5 are pooled.
double chi_square(const std::map<std::vector<int32_t>, int>& counts, const std::map<std::vector<int32_t>, double>& exact,
                  int n, int* dof) {
  double chi = 0, pooled_e = 0, pooled_o = 0;
  int cells = 0;
  for (const auto& [seq, p] : exact) {
    const double e = p * n;
    const auto it = counts.find(seq);
    const double o = it == counts.end() ? 0 : it->second;
    if (e < 5) {
      pooled_e += e, pooled_o += o;
      continue;
    }
    chi += (o - e) * (o - e) / e;
    ++cells;
  }
  if (pooled_e > 0) chi += (pooled_o - pooled_e) * (pooled_o - pooled_e) / pooled_e, ++cells;
  *dof = cells - 1;
  return chi;
}

TEST(Speculative, SampledOutputKeepsPlainSamplingsDistribution) {
  const std::vector<SamplingParams> configs = {
      {.temperature = 1.0f},
      {.temperature = 0.7f, .top_k = 3},
      {.temperature = 1.0f, .top_p = 0.8f, .repetition_penalty = 1.5f},
      {.temperature = 1.0f},  // passes chunked as the scheduler does (below)
  };
  const int vocab = 3, length = 5, runs = 40000;
  for (size_t ci = 0; ci < configs.size(); ++ci) {
    FakeBackend b(vocab, 3, 2.0f);
    b.chunk = ci == 3 ? 1 : 0;  // every position but the last reports only its argmax
    const std::vector<int32_t> prompt{0, 1, 2, 0, 1, 2, 0, 1};  // drafts from the start
    // The exact distribution of the first `length` tokens.
    std::map<std::vector<int32_t>, double> exact;
    const Sampler probe(configs[ci]);
    std::vector<int32_t> seq(length, 0);
    for (int code = 0; code < std::pow(vocab, length); ++code) {
      for (int i = 0, c = code; i < length; ++i, c /= vocab) seq[i] = c % vocab;
      if (const double p = exact_probability(b, probe, prompt, seq); p > 0) exact[seq] = p;
    }
    double total = 0;
    for (auto& [s, p] : exact) total += p;
    ASSERT_NEAR(total, 1.0, 1e-9);

    std::map<std::vector<int32_t>, int> plain_counts, spec_counts;
    uint64_t drafted = 0, accepted = 0;
    for (int run = 0; run < runs; ++run) {
      SamplingParams sp = configs[ci];
      sp.seed = 1000003ull * run + ci + 1;
      ++plain_counts[generate(b, prompt, length, sp, nullptr).tokens];
      SpeculativeDecoder spec;
      sp.seed += 77;
      ++spec_counts[generate(b, prompt, length, sp, &spec).tokens];
      drafted += spec.stats().drafted;
      accepted += spec.stats().accepted;
    }
    int dof_plain = 0, dof_spec = 0;
    const double chi_plain = chi_square(plain_counts, exact, runs, &dof_plain);
    const double chi_spec = chi_square(spec_counts, exact, runs, &dof_spec);
    // The 0.999 quantile of chi-square is below dof + 3.3 sqrt(2 dof) + 10 for these dofs.
    const double bound = dof_spec + 3.3 * std::sqrt(2.0 * dof_spec) + 10;
    EXPECT_LT(chi_plain, dof_plain + 3.3 * std::sqrt(2.0 * dof_plain) + 10) << "config " << ci;
    EXPECT_LT(chi_spec, bound) << "config " << ci << " (dof " << dof_spec << ")";
    // Total variation from the exact distribution, against three standard
    // deviations of every cell's frequency.
    double tv = 0, tv_bound = 0;
    for (auto& [s, p] : exact) {
      tv += std::abs((spec_counts.count(s) ? spec_counts[s] : 0) / double(runs) - p) / 2;
      tv_bound += 3 * std::sqrt(p * (1 - p) / runs) / 2;
    }
    EXPECT_LT(tv, tv_bound) << "config " << ci;
    EXPECT_GT(drafted, static_cast<uint64_t>(runs / 2)) << "the test must exercise drafts";
    if (b.chunk == 1) {
      EXPECT_EQ(accepted, 0u) << "nothing verifiable: every step fell back to a plain one";
    } else {
      EXPECT_GT(accepted, 0u);
      EXPECT_LT(accepted, drafted);
    }
  }
}

}  // namespace
}  // namespace qwen3
