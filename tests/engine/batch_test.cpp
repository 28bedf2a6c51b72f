// Several sessions in shared passes (BpfBackend::forward_batch) against the
// same work done one session at a time: logits, top-k and the K/V the kernel
// wrote must be bit-identical; a bad item leaves every cache as it was.
// Also the packing of positions into passes (engine/pass_builder.h).
#include <bpf/bpf.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/bpf_backend.h"
#include "engine/bpf_kv_cache.h"
#include "engine/pass_builder.h"
#include "test_backends.h"
#include "arena_skip.h"
#include "model/model_dir.h"
#include "op_args.h"

namespace qwen3 {
namespace {

Backend& bpf(const std::string& model, WeightPath path, Precision prec, int kv_bits = 16) {
  return test_support::bpf_backend(model, path, prec, kv_bits, 256);
}

std::vector<int32_t> random_ids(std::mt19937_64& rng, int n, int vocab) {
  std::vector<int32_t> ids(n);
  for (auto& id : ids) id = static_cast<int32_t>(rng() % 4 == 0 ? rng() % vocab : rng() % 20000);
  return ids;
}

// The records of a cache's first `positions` positions, every layer and kv
// head (entries of QN_KV_BLOCK positions each, layout.h: qn_kv_*).
std::vector<uint8_t> kv_bytes(KvCache& kv) {
  auto& c = dynamic_cast<engine::BpfKvCache&>(kv);
  bpf_map_info info{};
  uint32_t len = sizeof info;
  EXPECT_EQ(bpf_map_get_info_by_fd(c.map_fd(), &info, &len), 0);
  const uint32_t blocks = (uint32_t(kv.max_context()) + QN_KV_BLOCK - 1) / QN_KV_BLOCK;
  const uint32_t per_block = info.max_entries / blocks, rec = info.value_size / QN_KV_BLOCK;  // layers x kv heads
  EXPECT_EQ(per_block * blocks, info.max_entries);
  std::vector<uint8_t> entry(info.value_size), all;
  for (uint32_t key = 0; key < info.max_entries; key++) {
    const uint32_t first = key / per_block * QN_KV_BLOCK;
    if (first >= uint32_t(kv.positions())) break;  // keys are block-major
    EXPECT_EQ(bpf_map_lookup_elem(c.map_fd(), &key, entry.data()), 0);
    const uint32_t n = std::min<uint32_t>(QN_KV_BLOCK, uint32_t(kv.positions()) - first);
    all.insert(all.end(), entry.begin(), entry.begin() + size_t(n) * rec);
  }
  return all;
}

void expect_same(const ForwardResult& a, const ForwardResult& b, const std::string& what) {
  ASSERT_EQ(a.positions.size(), b.positions.size()) << what;
  for (size_t p = 0; p < a.positions.size(); p++) {
    EXPECT_EQ(a.positions[p].argmax, b.positions[p].argmax) << what << " position " << p;
    EXPECT_EQ(a.positions[p].top_k, b.positions[p].top_k) << what << " position " << p;
    ASSERT_EQ(a.positions[p].full, b.positions[p].full) << what << " position " << p;
  }
}

// One session's share of a test step.
struct Step {
  std::vector<int32_t> tokens;
  ForwardWants wants;
};

// Sessions with their own histories, run twice: batched and one by one.
struct Twins {
  Backend& b;
  std::vector<std::unique_ptr<KvCache>> batched, alone;

  Twins(Backend& backend, const std::vector<std::vector<int32_t>>& histories) : b(backend) {
    for (auto& h : histories) {
      batched.push_back(b.create_kv(200));
      alone.push_back(b.create_kv(200));
      if (h.empty()) continue;
      b.forward(*batched.back(), h, {});
      b.forward(*alone.back(), h, {});
    }
  }

  // Runs the step both ways and checks results and caches are the same.
  void step(const std::vector<Step>& steps, const std::string& what) {
    std::vector<ForwardResult> got(steps.size());
    std::vector<BatchItem> items;
    for (size_t i = 0; i < steps.size(); i++)
      items.push_back({batched[i].get(), steps[i].tokens, steps[i].wants, &got[i]});
    b.forward_batch(items);
    for (size_t i = 0; i < steps.size(); i++) {
      ForwardResult want = b.forward(*alone[i], steps[i].tokens, steps[i].wants);
      expect_same(got[i], want, what + ", session " + std::to_string(i));
      ASSERT_EQ(batched[i]->positions(), alone[i]->positions()) << what << ", session " << i;
      ASSERT_EQ(kv_bytes(*batched[i]), kv_bytes(*alone[i])) << what << ", K/V of session " << i;
    }
  }
};

struct Param {
  const char* model;
  WeightPath path;
  Precision prec;
  int kv_bits;
};

class BatchTest : public testing::TestWithParam<Param> {
 protected:
  void SetUp() override {
    if (GetParam().path == WeightPath::arena) QWEN3_SKIP_WITHOUT_ARENA();
  }
  Backend& backend() { return bpf(GetParam().model, GetParam().path, GetParam().prec, GetParam().kv_bits); }
};

TEST_P(BatchTest, SharedPassesEqualSessionsRunAlone) {
  Backend& b = backend();
  const int vocab = b.config().vocab_size;
  std::mt19937_64 rng(17);
  // histories of different lengths, one session new
  Twins t(b, {random_ids(rng, 5, vocab), random_ids(rng, 37, vocab), {}, random_ids(rng, 1, vocab),
              random_ids(rng, 16, vocab)});
  ForwardWants last, all_full, topk, wide_topk;
  all_full.all_positions = true;
  all_full.full_logits = true;
  topk.top_k = 5;
  topk.full_logits = true;
  wide_topk.top_k = QN_TOPK_MAX + 6;  // beyond what the kernel keeps: selected from the logits
  // decode steps, prefill chunks that straddle passes, different wants per session
  t.step({{random_ids(rng, 1, vocab), topk},
          {random_ids(rng, 7, vocab), all_full},
          {random_ids(rng, 23, vocab), last},
          {random_ids(rng, 1, vocab), wide_topk},
          {random_ids(rng, 3, vocab), topk}},
         "mixed step");
  for (int s = 0; s < 3; s++)
    t.step({{random_ids(rng, 1, vocab), topk},
            {random_ids(rng, 1, vocab), last},
            {random_ids(rng, 1, vocab), all_full},
            {random_ids(rng, 1, vocab), wide_topk},
            {random_ids(rng, 1, vocab), topk}},
           "decode step " + std::to_string(s));
  // more positions than one pass holds, from every session at once
  t.step({{random_ids(rng, 16, vocab), all_full},
          {random_ids(rng, 2, vocab), topk},
          {random_ids(rng, 17, vocab), last},
          {random_ids(rng, 9, vocab), all_full},
          {random_ids(rng, 1, vocab), last}},
         "long step");
}

TEST_P(BatchTest, BadItemLeavesEveryCacheAsItWas) {
  Backend& b = backend();
  const int vocab = b.config().vocab_size;
  std::mt19937_64 rng(23);
  Twins t(b, {random_ids(rng, 4, vocab), random_ids(rng, 9, vocab), random_ids(rng, 2, vocab)});
  std::vector<std::vector<uint8_t>> before;
  for (auto& kv : t.batched) before.push_back(kv_bytes(*kv));
  ForwardWants w;
  w.full_logits = true;
  auto good = random_ids(rng, 6, vocab), bad = random_ids(rng, 3, vocab);
  bad[1] = vocab;  // outside the vocabulary
  std::vector<ForwardResult> got(3);
  std::vector<int32_t> one{7};
  std::vector<BatchItem> items{{t.batched[0].get(), good, w, &got[0]},
                               {t.batched[1].get(), bad, w, &got[1]},
                               {t.batched[2].get(), one, w, &got[2]}};
  try {
    b.forward_batch(items);
    FAIL() << "an id beyond the vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
  }
  std::vector<int32_t> overflow(200, 1);  // more than the cache holds
  items[1].tokens = overflow;
  EXPECT_THROW(b.forward_batch(items), Error);
  for (size_t i = 0; i < 3; i++) {
    EXPECT_EQ(t.batched[i]->positions(), t.alone[i]->positions()) << "session " << i;
    EXPECT_EQ(kv_bytes(*t.batched[i]), before[i]) << "session " << i;
  }
  // the others still run exactly as alone
  auto fixed = random_ids(rng, 3, vocab);
  t.step({{good, w}, {fixed, w}, {one, w}}, "after the failed batch");
}

TEST_P(BatchTest, SameCacheTwiceRunsItemsInOrder) {
  Backend& b = backend();
  const int vocab = b.config().vocab_size;
  std::mt19937_64 rng(29);
  auto h = random_ids(rng, 6, vocab), x = random_ids(rng, 4, vocab), y = random_ids(rng, 2, vocab);
  ForwardWants w;
  w.all_positions = true;
  w.full_logits = true;
  auto kv = b.create_kv(64), ref = b.create_kv(64);
  b.forward(*kv, h, {});
  b.forward(*ref, h, {});
  std::vector<ForwardResult> got(2);
  std::vector<BatchItem> items{{kv.get(), x, w, &got[0]}, {kv.get(), y, w, &got[1]}};
  b.forward_batch(items);
  expect_same(got[0], b.forward(*ref, x, w), "first item");
  expect_same(got[1], b.forward(*ref, y, w), "second item");
  EXPECT_EQ(kv_bytes(*kv), kv_bytes(*ref));
}

INSTANTIATE_TEST_SUITE_P(Paths, BatchTest,
                         testing::Values(Param{"tiny-outliers", WeightPath::map, Precision::q24, 16},
                                         Param{"tiny-outliers", WeightPath::arena, Precision::q8, 16},
                                         Param{"small-outliers", WeightPath::map, Precision::q8, 8}),
                         [](const auto& i) {
                           std::string n = std::string(i.param.model) + "_" + weight_path_name(i.param.path) + "_" +
                                           precision_name(i.param.prec) + "_kv" + std::to_string(i.param.kv_bits);
                           for (auto& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

TEST(PackPasses, FillsPassesInOrderAndCoversEveryToken) {
  const std::vector<uint32_t> lengths{1, 20, 3, 1, 16, 5};
  const uint32_t cap = 16;
  auto passes = engine::pack_passes(lengths, cap);
  uint32_t total = 0;
  for (uint32_t n : lengths) total += n;
  ASSERT_EQ(passes.size(), (total + cap - 1) / cap);
  std::vector<uint32_t> next(lengths.size(), 0);  // next token expected of each item
  for (size_t k = 0; k < passes.size(); k++) {
    const auto& p = passes[k];
    if (k + 1 < passes.size()) {
      EXPECT_EQ(p.npos, cap) << "pass " << k << " not full";
    }
    uint32_t row = 0;
    for (const auto& s : p.slices) {
      EXPECT_EQ(s.pass_off, row) << "pass " << k;
      EXPECT_GT(s.npos, 0u);
      ASSERT_LT(s.item, lengths.size());
      EXPECT_EQ(s.token_off, next[s.item]) << "item " << s.item << " out of order in pass " << k;
      next[s.item] += s.npos;
      row += s.npos;
    }
    EXPECT_EQ(row, p.npos);
    EXPECT_LE(p.npos, cap);
  }
  EXPECT_EQ(next, lengths);
  EXPECT_TRUE(engine::pack_passes({}, cap).empty());
  EXPECT_THROW(engine::pack_passes(lengths, 0), Error);
}

}  // namespace
}  // namespace qwen3
