// qn_sample's log-normalizer mode (QN_SAMPLE_LSE, the reported logprobs):
// == the model (fixed::lse_model) bit for bit, within the derived bound of the
// exact log-sum-exp, and position_logprobs built on it within that bound of
// the float log-softmax.
#include "sample_cases.h"

namespace qwen3::engine {
namespace {

using namespace samplecases;

// ---- the log-normalizer of the reported logprobs (QN_SAMPLE_LSE) --------------

namespace lse {

// Runs the program's log-normalizer mode on raw candidates.
int64_t run_kernel_lse(BpfPrograms& progs, const std::vector<qn_topk_entry>& cand, uint32_t flags = QN_SAMPLE_LSE) {
  uint8_t* b = progs.sample_buf();
  std::copy(cand.begin(), cand.end(), reinterpret_cast<qn_topk_entry*>(b + qn_sample_cand_off()));
  qn_sample_hdr h{};
  h.n = uint32_t(cand.size());
  h.flags = flags;
  h.kept = 77;
  *progs.sample_hdr() = h;
  progs.sample();
  EXPECT_EQ(progs.sample_hdr()->kept, 0u);
  return progs.sample_hdr()->lse_q16;
}

// The exact log-sum-exp (nats) of the same Q16 logits, in long double.
long double exact_lse(const std::vector<qn_topk_entry>& cand) {
  int32_t M = cand[0].logit;
  for (const auto& c : cand) M = std::max(M, c.logit);
  long double s = 0;
  for (const auto& c : cand) s += std::exp((long double)(int64_t(c.logit) - M) / 65536.0L);
  return (long double)M / 65536.0L + std::log(s);
}

// The derived bound on |lse_kernel / 2^16 - lse| in nats (docs/numerics.md,
// "Logprobs in BPF"), lse the exact log-sum-exp of the same Q16 logits. Each
// weight is within kWeightRel of 2^44 exp(l - M) (T = 1: the same table
// exponential and temperature factor as sampling) plus half a Q44 unit of
// rounding (a weight dropped from 46 octaves on is below a quarter unit), so
// S is within x = kWeightRel + n 2^-45 of 2^44 sum exp(l - M) relatively
// (that sum is >= 1: the best's own term); ln turns that into at most
// x / (1 - x) nats; the logarithm's truncations (log2 bit by bit in Q57,
// times ln 2 in Q62) add < 2^-40; rounding to Q16 adds 2^-17, which
// dominates: 7.63e-6 nats, 7.65e-6 at 151,936 candidates.
double lse_bound(size_t n) {
  const double x = kWeightRel + double(n) * std::ldexp(1, -45);
  return std::ldexp(1, -17) + x / (1 - x) + std::ldexp(1, -40);
}

struct Judge {
  double worst = 0, worst_ratio = 0, worst_units = 0, worst_sum = 0;
  int cases = 0, not_nearest = 0;
  // kernel == model bit for bit, and within the bound of the exact value
  void check(BpfPrograms& progs, const std::vector<qn_topk_entry>& cand, const std::string& what) {
    const int64_t k = run_kernel_lse(progs, cand);
    const int64_t m = fixed::lse_model(cand);
    ASSERT_EQ(k, m) << what;
    const long double exact = exact_lse(cand);
    const double err = double(std::fabs((long double)k / 65536.0L - exact));
    ASSERT_LE(err, lse_bound(cand.size())) << what << ": lse " << k << " exact " << double(exact * 65536.0L);
    worst = std::max(worst, err);
    worst_ratio = std::max(worst_ratio, err / lse_bound(cand.size()));
    worst_units = std::max(worst_units, double(err * 65536.0));
    if (k != int64_t(std::llround(exact * 65536.0L))) not_nearest++;
    // the weights' part alone: M + ln(S / 2^44) before the logarithm and its rounding
    const fixed::LseSum ws = fixed::lse_sum_model(cand);
    const long double unrounded = (long double)ws.M / 65536.0L + std::log((long double)ws.S / std::ldexp(1.0L, 44));
    worst_sum = std::max(worst_sum, double(std::fabs(unrounded - exact)));
    cases++;
  }
  void print(const char* name) const {
    std::printf("%s: %d cases, max |lse - exact| %.3g nats (%.4f Q16 units; %.3f of the bound), %d not the nearest "
                "Q16 value; the weights' sum alone (before ln and rounding) %.3g nats\n",
                name, cases, worst, worst_units, worst_ratio, not_nearest, worst_sum);
  }
};

}  // namespace lse

TEST(SampleLse, EqualsModelAndWithinTheBoundOnRandomInputs) {
  const uint32_t vocab = 5000;
  BpfPrograms& progs = programs(vocab);
  std::mt19937_64 rng(41);
  lse::Judge j;
  for (int iter = 0; iter < 400; iter++) {
    const uint32_t sizes[] = {1, 2, 20, 64, 300, vocab};
    const uint32_t n = sizes[rng() % 6];
    const double sigmas[] = {0.01, 0.5, 2.0, 8.0, 40.0};
    auto cand = random_logits(rng, n, sigmas[rng() % 5], rng() % 2, vocab);
    if (iter % 10 == 0)  // anywhere in int32, saturated extremes included
      for (auto& c : cand) c.logit = int32_t(int64_t(rng() % (uint64_t(1) << 32)) - (int64_t(1) << 31) + 1);
    j.check(progs, cand, "iteration " + std::to_string(iter) + " n " + std::to_string(n));
    if (HasFatalFailure()) return;
  }
  j.print("lse, random");
}

TEST(SampleLse, EdgeInputs) {
  const uint32_t vocab = 5000;
  BpfPrograms& progs = programs(vocab);
  lse::Judge j;
  auto flat = [&](uint32_t n, int32_t v) {
    std::vector<qn_topk_entry> c(n);
    for (uint32_t i = 0; i < n; i++) c[i] = {int32_t(i), v};
    return c;
  };
  // one candidate: lse is its logit, its logprob exactly 0
  for (int32_t v : {0, 12345, -(7 << 16), INT32_MAX, -INT32_MAX}) {
    const std::vector<qn_topk_entry> one = {{42, v}};
    EXPECT_EQ(lse::run_kernel_lse(progs, one), int64_t(v));
    j.check(progs, one, "one candidate " + std::to_string(v));
  }
  // all equal: M + ln n, the nearest Q16 value
  for (uint32_t n : {2u, 3u, 1000u, vocab})
    for (int32_t v : {0, -(100 << 16), INT32_MAX}) {
      const int64_t k = lse::run_kernel_lse(progs, flat(n, v));
      EXPECT_EQ(k, int64_t(v) + std::llround(std::log(double(n)) * 65536.0)) << n << " " << v;
      j.check(progs, flat(n, v), "all equal n " + std::to_string(n));
    }
  EXPECT_GT(lse::run_kernel_lse(progs, flat(vocab, INT32_MAX)), int64_t(INT32_MAX));  // beyond int32: int64
  {  // a huge spread: the rest underflow to exactly 0
    auto c = flat(vocab, -(200 << 16));
    c[1234].logit = 200 << 16;
    EXPECT_EQ(lse::run_kernel_lse(progs, c), int64_t(200 << 16));
    j.check(progs, c, "one far above");
    c[1234].logit = INT32_MAX;
    c[17].logit = -INT32_MAX;
    EXPECT_EQ(lse::run_kernel_lse(progs, c), int64_t(INT32_MAX));
    j.check(progs, c, "saturated");
  }
  {  // a ramp through the underflow: 0 down to -40 nats, weights from 1 to below 2^-46
    std::vector<qn_topk_entry> c(vocab);
    for (uint32_t i = 0; i < vocab; i++) c[i] = {int32_t(i), -int32_t(uint64_t(i) * (40u << 16) / vocab)};
    j.check(progs, c, "ramp");
    for (auto& e : c) e.logit += 1 << 29;  // the same 8,192 higher
    j.check(progs, c, "ramp, shifted");
  }
  {  // two equal best, the rest at the edge of the weights' range (31.9 nats: 46 octaves)
    auto c = flat(vocab, -int32_t(std::lround(46 * std::log(2.0) * 65536)));
    c[0].logit = c[4999].logit = 0;
    j.check(progs, c, "edge of the range");
  }
  j.print("lse, edge cases");
}

TEST(SampleLse, EqualsModelOverTheQwenVocabulary) {
  BpfPrograms& progs = programs(kQwenVocab);
  std::mt19937_64 rng(43);
  lse::Judge j;
  double best_us = 1e30;
  for (int iter = 0; iter < 6; iter++) {
    auto cand = random_logits(rng, kQwenVocab, iter % 3 == 0 ? 0.3 : iter % 3 == 1 ? 3.0 : 8.0, false, kQwenVocab);
    if (iter == 5)
      for (auto& c : cand) c.logit = 5 << 16;  // all equal: M + ln 151,936
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t k = lse::run_kernel_lse(progs, cand);
    best_us = std::min(best_us, std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (iter == 5) {
      EXPECT_EQ(k, (int64_t(5) << 16) + std::llround(std::log(double(kQwenVocab)) * 65536.0));
    }
    j.check(progs, cand, "vocabulary, iteration " + std::to_string(iter));
    if (HasFatalFailure()) return;
  }
  j.print("lse, 151,936 candidates");
  std::printf("one QN_SAMPLE_LSE call over 151,936 candidates (wall, fastest of 6, busy host): %.0f us\n", best_us);
}

TEST(SampleLse, RejectsOtherFlagsAndBadInput) {
  BpfPrograms& progs = programs(1000);
  std::vector<qn_topk_entry> cand = {{1, 0}, {2, 1 << 16}};
  EXPECT_NO_THROW(lse::run_kernel_lse(progs, cand));
  EXPECT_THROW(lse::run_kernel_lse(progs, cand, QN_SAMPLE_LSE | QN_SAMPLE_PENALTY), Error);
  EXPECT_THROW(lse::run_kernel_lse(progs, cand, QN_SAMPLE_LSE | QN_SAMPLE_GREEDY), Error);
  EXPECT_THROW(lse::run_kernel_lse(progs, {}), Error);
  cand[1].id = 1000;  // outside the vocabulary
  EXPECT_THROW(lse::run_kernel_lse(progs, cand), Error);
}

TEST(SampleFormulas, LogarithmWithinHalfAQ16UnitOfDouble) {
  std::mt19937_64 rng(47);
  double worst = 0;
  EXPECT_EQ(qn_ln_q44_q16(uint64_t(1) << 44), 0);
  for (int k = 0; k < 18; k++)
    EXPECT_EQ(qn_ln_q44_q16(uint64_t(1) << (44 + k)), std::llround(k * std::log(2.0) * 65536.0)) << k;
  for (int i = 0; i < 100000; i++) {
    const int bits = 45 + int(rng() % 18);  // S in [2^44, 2^62)
    const uint64_t S = std::max(uint64_t(1) << 44, rng() >> (64 - bits));
    const long double want = std::log((long double)S / std::ldexp(1.0L, 44)) * 65536.0L;
    const double err = double(std::fabs((long double)qn_ln_q44_q16(S) - want));
    worst = std::max(worst, err);
    ASSERT_LE(err, 0.5 + std::ldexp(1, -24)) << "S " << S;  // the rounding, and the truncations' < 2^-40 nats
  }
  std::printf("ln(S / 2^44) in Q16: max |error| %.6f units (the rounding's 0.5 + < 2^-24)\n", worst);
}

// position_logprobs (daemon/sampling), the one place the reported logprobs
// are computed: from the kernel's normalizer when the backend gives it,
// (l_q16 - lse) / 2^16 exactly, within the bound above (and the two floats'
// roundings) of the float log-softmax, in the same order.
class KernelLseBackend : public Backend {
 public:
  KernelLseBackend(BpfPrograms& progs, bool give) : progs_(progs), give_(give),
      cfg_(config_with_vocab(progs.layout().shape.vocab)) {}
  const ModelConfig& config() const override { return cfg_; }
  BackendInfo info() const override {
    BackendInfo i;
    i.name = "test";
    return i;
  }
  std::unique_ptr<KvCache> create_kv(int) override { throw Error("no KV"); }
  ForwardResult forward(KvCache&, std::span<const int32_t>, const ForwardWants&) override { throw Error("no forward"); }
  std::optional<int64_t> log_normalizer_q16(const PositionLogits& s) override {
    calls++;
    return give_ ? kernel_log_normalizer(progs_, s) : std::nullopt;
  }
  int calls = 0;

 private:
  BpfPrograms& progs_;
  bool give_;
  ModelConfig cfg_;
};

TEST(SampleLse, PositionLogprobsAreTheKernelsAndCloseToFloat) {
  const uint32_t vocab = 5000;
  BpfPrograms& progs = programs(vocab);
  KernelLseBackend kb(progs, true), declines(progs, false);
  std::mt19937_64 rng(53);
  double worst = 0;
  for (int iter = 0; iter < 60; iter++) {
    const bool full = iter % 2 == 0;
    auto raw = random_logits(rng, full ? vocab : 20 + uint32_t(rng() % 45), iter % 3 == 0 ? 0.5 : 4.0, true, vocab);
    PositionLogits s;
    if (full) {
      s.full.resize(vocab);
      s.full_q16.resize(vocab);
      for (auto& c : raw) s.full[c.id] = c.logit / 65536.0f, s.full_q16[c.id] = c.logit;
      if (iter % 4 == 2) s.full.clear();  // Q16 only, as for a wide top-k
    } else {
      for (auto& c : raw) s.top_k.push_back({c.id, c.logit / 65536.0f}), s.top_k_q16.push_back(c.logit);
    }
    std::vector<qn_topk_entry> cand;
    if (full)
      for (uint32_t i = 0; i < vocab; i++) cand.push_back({int32_t(i), s.full_q16[i]});
    else
      cand = raw;
    const int32_t chosen = raw[rng() % raw.size()].id;
    const int calls0 = kb.calls;
    const PositionLogprobs k = position_logprobs(s, 8, &kb, chosen);
    ASSERT_EQ(kb.calls - calls0, 1);
    ASSERT_TRUE(k.kernel);
    const int64_t L = fixed::lse_model(cand);
    ASSERT_EQ(kernel_log_normalizer(progs, s).value(), L);
    const PositionLogprobs f = position_logprobs(s, 8, nullptr, chosen);
    const PositionLogprobs d = position_logprobs(s, 8, &declines, chosen);
    ASSERT_FALSE(f.kernel);
    ASSERT_FALSE(d.kernel);
    ASSERT_EQ(k.top.size(), 8u);
    ASSERT_EQ(f.top.size(), 8u);
    auto q16_of = [&](int32_t id) {
      for (auto& c : cand)
        if (c.id == id) return c.logit;
      ADD_FAILURE() << "id " << id;
      return 0;
    };
    for (size_t r = 0; r < 8; r++) {
      // the logits below 256: the floats are exact, so the same order and ties by the lower id
      ASSERT_EQ(k.top[r].id, f.top[r].id) << iter << " rank " << r;
      ASSERT_EQ(d.top[r].id, f.top[r].id);
      ASSERT_EQ(d.top[r].logprob, f.top[r].logprob);
      ASSERT_EQ(k.top[r].logit, f.top[r].logit);
      const int32_t q = q16_of(k.top[r].id);
      ASSERT_EQ(k.top[r].logprob, float(double(int64_t(q) - L) / 65536.0)) << iter;  // two kernel integers
      if (r > 0) {
        ASSERT_LE(k.top[r].logprob, k.top[r - 1].logprob);
      }
      const double e = std::fabs(double(k.top[r].logprob) - double(f.top[r].logprob));
      // the bound, and each float's rounding (half an ulp of |logprob|)
      ASSERT_LE(e, lse::lse_bound(cand.size()) + 2 * std::fabs(double(f.top[r].logprob)) * std::ldexp(1, -24))
          << iter << " rank " << r;
      worst = std::max(worst, e);
    }
    ASSERT_TRUE(k.chosen && f.chosen);
    EXPECT_EQ(*k.chosen, float(double(int64_t(q16_of(chosen)) - L) / 65536.0));
    EXPECT_LE(std::fabs(double(*k.chosen) - double(*f.chosen)),
              lse::lse_bound(cand.size()) + 2 * std::fabs(double(*f.chosen)) * std::ldexp(1, -24));
    // Sampler::top_logprobs is the same function
    const auto tl = Sampler::top_logprobs(s, 8, &kb);
    ASSERT_EQ(tl.size(), 8u);
    for (size_t r = 0; r < 8; r++) EXPECT_EQ(tl[r], std::make_pair(k.top[r].id, k.top[r].logprob));
  }
  std::printf("position_logprobs: kernel vs float log-softmax, max |difference| %.3g nats (bound %.3g + float rounding)\n",
              worst, lse::lse_bound(vocab));
  // scores without Q16 logits: not asked for, the float path
  PositionLogits floats;
  floats.top_k = {{3, 1.5f}, {9, 0.25f}};
  const int calls0 = kb.calls;
  const PositionLogprobs p = position_logprobs(floats, 2, &kb, 9);
  EXPECT_EQ(kb.calls, calls0);
  EXPECT_FALSE(p.kernel);
  ASSERT_EQ(p.top.size(), 2u);
  EXPECT_NEAR(std::exp(p.top[0].logprob) + std::exp(*p.chosen), 1.0, 1e-6);
  // nothing asked: no call
  EXPECT_TRUE(position_logprobs(floats, 0, &kb).top.empty());
  EXPECT_EQ(kb.calls, calls0);
}

}  // namespace
}  // namespace qwen3::engine
