// The in-kernel backend end to end on generated models with planted outlier
// channels (ctest fixture test_models; QWEN3_TEST_MODELS_DIR):
//   - map and arena weight paths give bit-identical logits (agreement with
//     the float reference is accuracy_test.cpp's),
//   - KV isolation, incremental decode == batched prefill, KV maps freed,
//     errors leave the cache as it was.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>

#include "common/error.h"
#include "engine/bpf_backend.h"
#include "engine/q4_quantizer.h"
#include "engine/q8_quantizer.h"
#include "model/model_dir.h"
#include "reference/reference_backend.h"
#include "test_backends.h"
#include "arena_skip.h"

namespace qwen3 {
namespace {

using test_support::models_dir;
using test_support::open_model;

// One loaded backend per (model, path, precision, K/V width), shared by the tests.
// int16 K/V unless a test says otherwise: these tests hold the int16 path to its error bounds.
Backend& bpf(const std::string& model, WeightPath path, Precision prec, int kv_bits = 16) {
  return test_support::bpf_backend(model, path, prec, kv_bits, 512);
}

Backend& reference(const std::string& model) { return test_support::reference_backend(model); }
using test_support::random_prompt;

ForwardResult run(Backend& b, const std::vector<int32_t>& ids, ForwardWants w) {
  auto kv = b.create_kv(512);
  return b.forward(*kv, ids, w);
}

class PathsTest : public testing::TestWithParam<std::tuple<std::string, Precision>> {};

TEST_P(PathsTest, MapAndArenaGiveBitIdenticalLogits) {
  QWEN3_SKIP_WITHOUT_ARENA();
  auto [model, prec] = GetParam();
  std::mt19937_64 rng(11);
  ForwardWants w;
  w.all_positions = true;
  w.full_logits = true;
  w.top_k = 10;
  for (int prompt = 0; prompt < 2; prompt++) {
    auto ids = random_prompt(rng, 21, 151936);  // 21 positions: one full batch of 16 and a rest
    ForwardResult a = run(bpf(model, WeightPath::map, prec), ids, w);
    ForwardResult b = run(bpf(model, WeightPath::arena, prec), ids, w);
    ASSERT_EQ(a.positions.size(), ids.size());
    ASSERT_EQ(b.positions.size(), ids.size());
    for (size_t p = 0; p < ids.size(); p++) {
      EXPECT_EQ(a.positions[p].argmax, b.positions[p].argmax);
      ASSERT_EQ(a.positions[p].full, b.positions[p].full) << "position " << p;
      EXPECT_EQ(a.positions[p].top_k, b.positions[p].top_k);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PathsTest,
                         testing::Combine(testing::Values("tiny-outliers", "small-outliers"),
                                          testing::Values(Precision::q24, Precision::q8, Precision::q4)),
                         [](const auto& i) {
                           std::string n = std::get<0>(i.param) + "_" + precision_name(std::get<1>(i.param));
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

// Worker threads split rows, kv heads and RoPE positions, and the kernel
// merges their top-k lists: any count gives the same bits, here 1 and 16
// (more threads than this machine's 2 cores, and more than its 8 kv heads:
// some workers get no heads) against 2, prefill and decode.
TEST(Threads, OneAndSixteenGiveTheBitsOfTwo) {
  for (Precision prec : {Precision::q8, Precision::q24}) {
    Backend& two = bpf("small-outliers", WeightPath::map, prec);
    std::vector<std::unique_ptr<Backend>> others;
    for (int threads : prec == Precision::q8 ? std::vector<int>{1, 16} : std::vector<int>{16}) {
      BpfEngineOptions o;
      o.precision = prec;
      o.kv_bits = 16;
      o.threads = threads;
      o.max_context = 512;
      others.push_back(make_bpf_backend(test_support::open_model("small-outliers"), o));
    }
    std::mt19937_64 rng(23);
    auto ids = random_prompt(rng, 21, 151936);
    ForwardWants w;
    w.all_positions = true;
    w.full_logits = true;
    w.top_k = 40;
    auto step = [&](Backend& b) {
      auto kv = b.create_kv(64);
      std::vector<ForwardResult> out{b.forward(*kv, ids, w)};
      for (int32_t t : {17, 4242, 99})  // decode after the prefill
        out.push_back(b.forward(*kv, std::vector<int32_t>{t}, w));
      return out;
    };
    const auto want = step(two);
    for (auto& b : others) {
      const auto got = step(*b);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); i++) {
        ASSERT_EQ(got[i].positions.size(), want[i].positions.size());
        for (size_t p = 0; p < want[i].positions.size(); p++) {
          EXPECT_EQ(got[i].positions[p].argmax, want[i].positions[p].argmax);
          ASSERT_EQ(got[i].positions[p].full, want[i].positions[p].full) << precision_name(prec) << " step " << i;
          EXPECT_EQ(got[i].positions[p].top_k, want[i].positions[p].top_k);
        }
      }
    }
  }
}

// The q8 group quantizer: codes in int8, exact entries left to their int64
// slot, never a larger squared error than plain absmax rounding, and on
// average a smaller one (the reason it exists).
TEST(Q8Quantizer, ScaleSearchBeatsAbsmaxRounding) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<float> uni(-0.08f, 0.08f);
  std::normal_distribution<float> gauss(0.0f, 0.03f);
  const double p2 = std::ldexp(1.0, 30);
  double err_search = 0, err_absmax = 0;
  for (int g = 0; g < 4000; g++) {
    const size_t n = g % 7 == 0 ? 1 + rng() % QN_GROUP : QN_GROUP;  // short tail groups too
    float w[QN_GROUP] = {};
    bool exact[QN_GROUP] = {};
    for (size_t k = 0; k < n; k++) w[k] = g % 2 ? uni(rng) : gauss(rng);
    if (g % 5 == 0 && n > 1) {
      const size_t k = rng() % n;
      exact[k] = true;
      w[k] = 40.0f;  // an outlier column entry: must neither get a code nor set the scale
    }
    engine::Q8Group q;
    engine::q8_quantize_group(w, exact, n, p2, q);
    float mx = 0;
    for (size_t k = 0; k < n; k++)
      if (!exact[k]) mx = std::max(mx, std::fabs(w[k]));
    const double absmax = std::round(mx / 127.0 * p2);
    ASSERT_GT(q.scale, 0);
    EXPECT_GT(q.scale, 0.99 * absmax);
    EXPECT_LT(q.scale, 1.02 * absmax);
    double e_s = 0, e_a = 0;
    for (size_t k = 0; k < QN_GROUP; k++) {
      ASSERT_GE(q.codes[k], -127);
      if (k >= n || exact[k]) {
        EXPECT_EQ(q.codes[k], 0) << "group " << g << " entry " << k;
        continue;
      }
      const double ds = w[k] - double(q.codes[k]) * q.scale / p2;
      const double qa = std::clamp(std::round(double(w[k]) * p2 / absmax), -127.0, 127.0);
      const double da = w[k] - qa * absmax / p2;
      e_s += ds * ds;
      e_a += da * da;
    }
    EXPECT_LE(e_s, e_a * (1 + 1e-5) + 1e-30) << "group " << g;
    err_search += e_s;
    err_absmax += e_a;
  }
  std::printf("q8 group quantizer: rms weight error %.4g of absmax rounding's\n", std::sqrt(err_search / err_absmax));
  EXPECT_LT(err_search, 0.92 * err_absmax);
}

// The q4 group quantizer: codes 0..15, exact and padding entries on code 8;
// its scale search never loses to the Q4_0 scale (the extreme onto code -8);
// and a group already on a 4-bit grid (a checkpoint rounded offline) keeps
// exactly its values, whichever step and codes represent them.
TEST(Q4Quantizer, SearchBeatsQ4_0AndGridGroupsKeepTheirValues) {
  std::mt19937_64 rng(23);
  std::normal_distribution<float> gauss(0.0f, 0.03f);
  const double p2 = std::ldexp(1.0, 30);
  double err_search = 0, err_q40 = 0;
  for (int g = 0; g < 3000; g++) {
    const size_t n = g % 7 == 0 ? 1 + rng() % QN_Q4_GROUP : QN_Q4_GROUP;
    float w[QN_Q4_GROUP] = {};
    bool exact[QN_Q4_GROUP] = {};
    const bool grid = g % 3 == 0;
    const float step = 0.004f * (1 + rng() % 100) / 37.0f;
    for (size_t k = 0; k < n; k++) w[k] = grid ? float(int(rng() % 16) - 8) * step : gauss(rng);
    if (g % 5 == 0 && n > 1) {
      const size_t k = rng() % n;
      exact[k] = true;
      w[k] = 40.0f;  // an outlier column entry: neither a code nor the scale
    }
    engine::Q4Group q;
    engine::q4_quantize_group(w, exact, n, p2, q);
    float top = 0;
    for (size_t k = 0; k < n; k++)
      if (!exact[k] && std::fabs(w[k]) > std::fabs(top)) top = w[k];
    double e_s = 0, e_0 = 0;
    for (size_t k = 0; k < QN_Q4_GROUP; k++) {
      ASSERT_LE(q.codes[k], 15);
      if (k >= n || exact[k]) {
        EXPECT_EQ(q.codes[k], QN_Q4_CODE_BIAS) << "group " << g << " entry " << k;
        continue;
      }
      const double v = (int(q.codes[k]) - QN_Q4_CODE_BIAS) * double(q.scale) / p2;
      if (grid) {  // up to the int32 scale's rounding (half a unit of 2^-30, times a code of at most 8)
        ASSERT_NEAR(v, w[k], 8 * 0.5 / p2 + 1e-6 * std::fabs(top)) << "grid group " << g << " entry " << k;
      }
      const double s0 = -double(top) / 8.0;
      const double c0 = s0 == 0 ? 0 : std::clamp(std::nearbyint(w[k] / s0), -8.0, 7.0);
      e_s += (w[k] - v) * (w[k] - v);
      e_0 += (w[k] - c0 * s0) * (w[k] - c0 * s0);
    }
    if (grid) continue;  // held to its own values above
    const double fixed = 8 * 0.5 / p2;  // the int32 scale's rounding, per entry
    EXPECT_LE(e_s, e_0 * (1 + 1e-4) + double(n) * fixed * fixed) << "group " << g;
    err_search += e_s, err_q40 += e_0;
  }
  std::printf("q4 group quantizer: rms weight error %.4g of Q4_0 rounding's\n", std::sqrt(err_search / err_q40));
  EXPECT_LT(err_search, 0.9 * err_q40);
}

// q4_quantize_group the plain, slow way: the grid check with a division per
// entry, then the 43 candidate scales (Q4_0, then 0.6 .. 1.1 of it and of the
// other sign's) scored one at a time, squared errors summed in
// grid_squared_error's order (8 partial sums, then a tree), the first least
// kept. Its scales and codes are the contract (docs/numerics.md's figures).
engine::Q4Group q4_reference(const float* w, const bool* exact, size_t n, double p2) {
  engine::Q4Group out;
  std::fill(std::begin(out.codes), std::end(out.codes), uint8_t(QN_Q4_CODE_BIAS));
  auto round_away = [](double v) { return int64_t(v >= 0 ? v + 0.5 : v - 0.5); };
  auto to_scale = [&](double s) { return std::clamp<int64_t>(round_away(s), -INT32_MAX, INT32_MAX); };
  float top = 0;
  for (size_t k = 0; k < n; k++)
    if (!exact[k] && std::fabs(w[k]) > std::fabs(top)) top = w[k];
  if (top == 0) return out;
  for (int m = 8; m >= 1; m--)
    for (int code : {-m, m}) {
      if (code == 8) continue;
      const double step = double(top) / code;
      bool on_grid = true;
      for (size_t k = 0; k < n; k++) {
        const double q = w[k] / step, r = std::nearbyint(q);
        on_grid = on_grid && (exact[k] || (std::fabs(q - r) <= 1e-4 && r >= -8 && r <= 7));
      }
      if (!on_grid) continue;
      out.scale = int32_t(to_scale(step * p2));
      for (size_t k = 0; k < n; k++)
        if (!exact[k]) out.codes[k] = uint8_t(int(std::nearbyint(w[k] / step)) + QN_Q4_CODE_BIAS);
      return out;
    }
  const double mx = std::fabs(double(top)), s0 = -double(top) / 8.0 * p2;
  float u[QN_Q4_GROUP] = {};
  for (size_t k = 0; k < n; k++)
    if (!exact[k]) u[k] = float(w[k] / mx);
  int64_t best = 0;
  float best_err = 0;
  auto consider = [&](double s) {
    const int64_t sc = to_scale(s);
    if (sc == 0) return;
    const float f = float(double(sc) / (mx * p2)), inv = 1.0f / f;
    float lane[8] = {};
    for (int k = 0; k < QN_Q4_GROUP; k++) {
      const float d = u[k] - f * std::clamp(std::nearbyint(u[k] * inv), -8.0f, 7.0f);
      lane[k % 8] += d * d;
    }
    const float e = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
    if (best == 0 || e < best_err) best_err = e, best = sc;
  };
  consider(s0);
  for (int t = 0; t < 21; t++) {
    const double shrink = 0.6 + 0.025 * t;
    consider(s0 * shrink);
    consider(-s0 * 8.0 / 7.0 * shrink);
  }
  if (best == 0) return out;
  out.scale = int32_t(best);
  for (size_t k = 0; k < n; k++) {
    const double code = std::clamp(std::nearbyint(w[k] * (p2 / best)), -8.0, 7.0);
    if (!exact[k]) out.codes[k] = uint8_t(int(code) + QN_Q4_CODE_BIAS);
  }
  return out;
}

// The load's fast q4 quantizer (vectors across the candidates, on whichever
// of AVX-512, AVX2, SSE2 this CPU has) gives q4_reference's scale and codes,
// bit for bit: checkpoint-like and heavy-tailed groups, groups on a grid, near
// one, with exact columns, short, mostly zero, and scales down to a few units.
TEST(Q4Quantizer, SameScaleAndCodesAsAOneAtATimeSearch) {
  std::mt19937_64 rng(29);
  auto uniform = [&] { return std::uniform_real_distribution<double>(0, 1)(rng); };
  for (int g = 0; g < 20000; g++) {
    const size_t n = g % 5 == 0 ? rng() % (QN_Q4_GROUP + 1) : QN_Q4_GROUP;
    const double mag = std::pow(10.0, -6 + 6 * uniform());
    std::normal_distribution<double> gauss(0, mag);
    const float step = float(mag * (0.02 + uniform()));
    float w[QN_Q4_GROUP] = {};
    bool exact[QN_Q4_GROUP] = {};
    for (size_t k = 0; k < n; k++) {
      switch (g % 6) {
        case 0: w[k] = float(gauss(rng)); break;
        case 1: w[k] = float(gauss(rng) * gauss(rng) * gauss(rng) / (mag * mag)); break;  // heavy tails
        case 2: w[k] = float(int(rng() % 16) - 8) * step; break;                         // on a grid
        case 3: w[k] = float(int(rng() % 9) - 4) * step * float(1 + 2e-4 * (uniform() - 0.5)); break;
        case 4: w[k] = rng() % 4 ? 0.0f : float(gauss(rng)); break;
        default: w[k] = float(mag * (uniform() - 0.5)); break;
      }
    }
    if (g % 4 == 0 && n > 0)
      for (int e = 0; e < 3; e++) {
        const size_t k = rng() % n;
        exact[k] = true;
        w[k] = float(gauss(rng) * 1e3);  // an outlier column entry
      }
    float mx = 0;
    for (size_t k = 0; k < n; k++)
      if (!exact[k]) mx = std::max(mx, std::fabs(w[k]));
    // the matrix's 2^frac (max |w| p2 < 2^31), its max up to 1e8 times the group's: scales of a few units
    const double matrix_max = std::max(double(mx), 1e-30) * std::pow(10.0, g % 3 ? 0.0 : 8 * uniform());
    const double p2 = std::ldexp(1.0, int(std::floor(std::log2(2147483000.0 / matrix_max))));
    engine::Q4Group got;
    engine::q4_quantize_group(w, exact, n, p2, got);
    const engine::Q4Group want = q4_reference(w, exact, n, p2);
    ASSERT_EQ(got.scale, want.scale) << "group " << g;
    for (int k = 0; k < QN_Q4_GROUP; k++) ASSERT_EQ(got.codes[k], want.codes[k]) << "group " << g << " entry " << k;
  }
}

// q8 passes of several positions run the packed prefill kernel, one position
// the decode kernel (q4 models: their q8 matrices too): both must give the same bits.
TEST(Sessions, IncrementalDecodeEqualsBatchedPrefill) {
  for (Precision prec : {Precision::q24, Precision::q8, Precision::q4}) {
    Backend& b = bpf("small-outliers", WeightPath::map, prec);
    std::mt19937_64 rng(5);
    auto ids = random_prompt(rng, 40, 151936);
    ForwardWants w;
    w.all_positions = true;
    w.full_logits = true;
    ForwardResult batched = run(b, ids, w);
    auto kv = b.create_kv(64);
    ForwardWants one;
    one.full_logits = true;
    for (size_t p = 0; p < ids.size(); p++) {
      ForwardResult r = b.forward(*kv, std::span<const int32_t>(&ids[p], 1), one);
      ASSERT_EQ(r.positions.size(), 1u);
      ASSERT_EQ(r.positions[0].full, batched.positions[p].full) << precision_name(prec) << " position " << p;
    }
    EXPECT_EQ(kv->positions(), 40);
  }
}

TEST(Sessions, InterleavedSessionsEqualEachAlone) {
  Backend& b = bpf("small-outliers", WeightPath::map, Precision::q8);
  std::mt19937_64 rng(6);
  auto x = random_prompt(rng, 30, 151936), y = random_prompt(rng, 30, 151936);
  ForwardWants w;
  w.full_logits = true;
  auto alone = [&](const std::vector<int32_t>& ids) {
    auto kv = b.create_kv(64);
    std::vector<std::vector<float>> out;
    for (size_t off = 0; off < ids.size(); off += 10)
      out.push_back(b.forward(*kv, std::span<const int32_t>(ids).subspan(off, 10), w).positions[0].full);
    return out;
  };
  auto ax = alone(x), ay = alone(y);
  auto kx = b.create_kv(64), ky = b.create_kv(64);
  for (size_t i = 0; i < 3; i++) {
    auto rx = b.forward(*kx, std::span<const int32_t>(x).subspan(i * 10, 10), w);
    auto ry = b.forward(*ky, std::span<const int32_t>(y).subspan(i * 10, 10), w);
    ASSERT_EQ(rx.positions[0].full, ax[i]) << "session x step " << i;
    ASSERT_EQ(ry.positions[0].full, ay[i]) << "session y step " << i;
  }
}

// Ids of the KV maps this process holds an fd of (other processes on the
// machine create KV maps too, so the system-wide list is no yardstick).
std::set<uint32_t> own_kv_map_ids() {
  std::set<uint32_t> ids;
  for (int fd = 0; fd < 4096; fd++) {
    bpf_map_info info{};
    uint32_t len = sizeof info;
    if (bpf_map_get_info_by_fd(fd, &info, &len) == 0 && std::strcmp(info.name, "qwen3_kv") == 0) ids.insert(info.id);
  }
  return ids;
}

// A map that still exists in the kernel (held by anyone, e.g. the outer map).
bool map_exists(uint32_t id) {
  int fd = bpf_map_get_fd_by_id(id);
  if (fd < 0) return false;
  close(fd);
  return true;
}

TEST(Sessions, FreeingKvCachesLeavesNoMapsBehind) {
  Backend& b = bpf("tiny-outliers", WeightPath::map, Precision::q24);
  const std::set<uint32_t> before = own_kv_map_ids();
  std::vector<uint32_t> mine;
  {
    std::vector<std::unique_ptr<KvCache>> caches;
    for (int i = 0; i < 5; i++) caches.push_back(b.create_kv(100 + i));
    for (uint32_t id : own_kv_map_ids())
      if (!before.count(id)) mine.push_back(id);
    EXPECT_EQ(mine.size(), 5u);
    // 100 positions take 4 whole blocks of 32; per position layers * kv heads * (K+V int16 + 2 scales)
    EXPECT_EQ(caches[0]->bytes(), size_t(128) * 2 * 2 * (2 * 32 * 2 + 8));
    std::vector<int32_t> ids{1, 2, 3};
    b.forward(*caches[2], ids, {});
    for (uint32_t id : mine) EXPECT_TRUE(map_exists(id));
  }
  for (uint32_t id : mine) EXPECT_FALSE(map_exists(id)) << "KV map " << id << " outlived its cache";
  EXPECT_EQ(own_kv_map_ids(), before);
}

TEST(Errors, BadInputLeavesTheCacheAsItWas) {
  Backend& b = bpf("tiny-outliers", WeightPath::map, Precision::q24);
  auto kv = b.create_kv(8);
  std::vector<int32_t> ok{5, 6, 7};
  ForwardWants w;
  w.full_logits = true;
  auto first = b.forward(*kv, ok, w);
  std::vector<int32_t> bad{1, 151936};
  try {
    b.forward(*kv, bad, w);
    FAIL() << "an id beyond the vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
  }
  EXPECT_EQ(kv->positions(), 3);
  std::vector<int32_t> too_long(6, 1);
  EXPECT_THROW(b.forward(*kv, too_long, w), Error);
  EXPECT_EQ(kv->positions(), 3);
  EXPECT_THROW(b.create_kv(1 << 30), Error);
  // rolling back and feeding the same token again reproduces the same logits
  std::vector<int32_t> next{9};
  auto a1 = b.forward(*kv, next, w);
  kv->truncate(3);
  auto a2 = b.forward(*kv, next, w);
  EXPECT_EQ(a1.positions[0].full, a2.positions[0].full);
}

TEST(Info, ReportsProgramsAndWeights) {
  QWEN3_SKIP_WITHOUT_ARENA();
  Backend& b = bpf("tiny-outliers", WeightPath::arena, Precision::q8);
  BackendInfo i = b.info();
  EXPECT_EQ(i.name, "bpf");
  EXPECT_EQ(i.weight_path, "arena");
  EXPECT_EQ(i.precision, "q8");
  // q8: two matmul programs, their prefill variants, attention, embed, RoPE table, top-k merge, sampling
  EXPECT_EQ(i.bpf_programs, 9);
  EXPECT_GT(i.weight_bytes, size_t(151936) * 64);
  auto* api = dynamic_cast<BpfBackendApi*>(&b);
  ASSERT_NE(api, nullptr);
  BpfBackendStats s = api->stats();
  ASSERT_EQ(s.programs.size(), 9u);
  for (auto& p : s.programs) EXPECT_GT(p.verified_insns, 0u) << p.name;
  EXPECT_TRUE(i.load_warnings.empty());
}

// q4 on a plain checkpoint says it misses the accuracy bar and what to do; a
// checkpoint from qwen3-bpf-quantize (the fixture's trained-q4) loads quietly.
TEST(Info, Q4WarnsWhenTheWeightsWereNotRoundedOffline) {
  const BackendInfo plain = bpf("trained", WeightPath::map, Precision::q4).info();
  ASSERT_EQ(plain.load_warnings.size(), 1u);
  EXPECT_NE(plain.load_warnings[0].find("qwen3-bpf-quantize"), std::string::npos) << plain.load_warnings[0];
  EXPECT_TRUE(bpf("trained-q4", WeightPath::map, Precision::q4).info().load_warnings.empty());
}

}  // namespace
}  // namespace qwen3

namespace qwen3 {
namespace {

// Stage by stage: relative RMS error of the kernel's activations against the
// float reference on the same prompt (where accuracy is lost, if it is).
class StageTest : public testing::TestWithParam<Precision> {};

TEST_P(StageTest, StageErrorsStaySmall) {
  const std::string model = "small-outliers";
  const Precision prec = GetParam();
  auto* ref = dynamic_cast<ReferenceBackend*>(&reference(model));
  auto* k = dynamic_cast<BpfBackendApi*>(&bpf(model, WeightPath::map, prec));
  ASSERT_TRUE(ref && k);
  std::map<std::string, std::vector<float>> rs, ks;
  auto key = [](const char* s, int layer) { return std::string(s) + "." + std::to_string(layer); };
  ref->set_trace([&](const TracePoint& t) {
    std::string name;
    switch (t.stage) {
      case TraceStage::embedding: name = "embedding"; break;
      case TraceStage::attention: name = "attention"; break;
      case TraceStage::attn_residual: name = "attn_residual"; break;
      case TraceStage::act: name = "act"; break;
      case TraceStage::residual: name = "residual"; break;
      default: return;
    }
    rs[key(name.c_str(), t.layer)].assign(t.data, t.data + size_t(t.rows) * t.cols);
  });
  k->set_debug_trace([&](const BpfTracePoint& t) {
    ks[key(t.stage, t.layer)].assign(t.data, t.data + size_t(t.rows) * t.cols);
  });
  std::mt19937_64 rng(3);
  auto ids = random_prompt(rng, 12, 151936);
  run(*ref, ids, {});
  run(*k, ids, {});
  ref->set_trace({});
  k->set_debug_trace({});
  // Every stage the reference traces must be compared: the embedding and four
  // stages of every layer, each with its in-kernel counterpart (a test that
  // skipped names it did not find could pass comparing nothing).
  const int layers = ref->config().num_hidden_layers;
  EXPECT_EQ(rs.size(), size_t(1 + 4 * layers)) << "stages traced by the reference";
  int compared = 0;
  for (auto& [name, r] : rs) {
    auto it = ks.find(name);
    if (it == ks.end()) {
      ADD_FAILURE() << "stage " << name << " has no in-kernel trace to compare with";
      continue;
    }
    ++compared;
    ASSERT_EQ(it->second.size(), r.size()) << name;
    double num = 0, den = 0, mx = 0;
    for (size_t i = 0; i < r.size(); i++) {
      double d = double(it->second[i]) - r[i];
      num += d * d;
      den += double(r[i]) * r[i];
      mx = std::max(mx, std::fabs(d));
    }
    double rel = std::sqrt(num / std::max(den, 1e-30));
    std::printf("%-18s relative RMS error %.3g, max abs error %.3g\n", name.c_str(), rel, mx);
    EXPECT_LT(rel, prec == Precision::q24 ? 0.05 : 0.25) << name;
  }
  EXPECT_EQ(compared, 1 + 4 * layers);
}

INSTANTIATE_TEST_SUITE_P(Precisions, StageTest, testing::Values(Precision::q24, Precision::q8),
                         [](const auto& i) { return std::string(precision_name(i.param)); });

}  // namespace
}  // namespace qwen3
