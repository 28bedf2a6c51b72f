// bpf_attention_bench: cost of the attention program per cached position and
// layer at the Qwen3-0.6B shape (16 query heads, 8 kv heads of 128), for the
// int16 and the compact int8 K/V layouts, measured in the same run with the
// layouts and contexts interleaved (the machine is shared: compare ratios).
//
//   bpf_attention_bench [--contexts 128,2048] [--reps N] [--fill]
//
// One call = one decode position of one layer, all 8 kv heads on one thread
// (the engine splits the heads over its 2 workers). Without --fill the cache
// entries stay zero: every position gets the same weight, the worst case.
// With --fill, layer 0 is first filled through the program itself from random
// q/k/v with q/k-norm weights in [1.5, 3.5] (as the generated models have):
// positions whose softmax weight rounds to 0 are skipped, as in real decoding.
// Prints, per layout and context, the median wall and thread-CPU time of a
// call, and the slope between the first and last context: ns per cached
// position per layer, which times 28 layers is the decode cost of context.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "engine/attention_args.h"
#include "engine/bpf_kv_cache.h"
#include "engine/bpf_programs.h"
#include "engine/model_plan.h"
#include "engine/rope_table.h"
#include "common/worker_pool.h"
#include "presets.h"

namespace {

using namespace qwen3;
using namespace qwen3::engine;

double now_ns(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct Layout {
  uint32_t kv_bits;
  ModelPlan plan;
  std::unique_ptr<BpfPrograms> progs;
  std::shared_ptr<KvSlots> slots;
  std::unique_ptr<BpfKvCache> kv;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<uint32_t> contexts{128, 2048};
  int reps = 30;
  bool fill = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--contexts" && i + 1 < argc) {
      contexts.clear();
      std::stringstream ss(argv[++i]);
      for (std::string t; std::getline(ss, t, ',');) contexts.push_back(static_cast<uint32_t>(std::stoul(t)));
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--fill") {
      fill = true;
    } else {
      std::fprintf(stderr, "usage: bpf_attention_bench [--contexts 128,2048] [--reps N] [--fill]\n");
      return 2;
    }
  }
  if (contexts.empty() || reps <= 0) return 2;
  const uint32_t max_ctx = *std::max_element(contexts.begin(), contexts.end());

  const ModelConfig c = mkmodel::qwen3_06b_shape();

  std::vector<Layout> layouts;
  for (uint32_t bits : {16u, 8u}) {
    Layout l;
    l.kv_bits = bits;
    l.plan = make_model_plan(c, Precision::q24, false, 2, max_ctx, bits);
    l.plan.layout.weight_entries = 1;  // attention reads no weights
    l.progs = std::make_unique<BpfPrograms>(l.plan.layout);
    std::mt19937_64 rng(1);
    std::uniform_real_distribution<double> ud(1.5, 3.5);
    for (uint32_t i = 0; i < l.plan.layout.shape.norms_len; i++)
      l.progs->norms()[i] = static_cast<int32_t>(ud(rng) * (1 << QN_NORM_FRAC));
    WorkerPool pool(2);
    fill_rope_table(*l.progs, pool);
    std::normal_distribution<double> nd(0, 2);
    auto random_qkv = [&] {
      for (uint32_t i = 0; i < QN_PMAX * l.plan.layout.qkv_pad; i++)
        l.progs->qkv()[i] = static_cast<int32_t>(nd(rng) * 65536);
    };
    random_qkv();
    l.slots = std::make_shared<KvSlots>(l.progs->kv_outer_fd(), l.progs->layout().shape);
    l.kv = std::make_unique<BpfKvCache>(l.slots, static_cast<int>(max_ctx));
    for (uint32_t p0 = 0; fill && p0 < max_ctx; p0 += QN_PMAX) {
      random_qkv();
      qn_args a = attention_args(l.plan, *l.kv, {.layer = 0, .pos0 = p0, .npos = std::min<uint32_t>(QN_PMAX, max_ctx - p0)},
                                 0, c.num_key_value_heads);
      l.progs->attention(a);
    }
    layouts.push_back(std::move(l));
  }

  // [layout][context] samples, interleaved so load changes hit all alike
  std::vector<std::vector<std::vector<double>>> wall(layouts.size()), cpu(layouts.size());
  for (auto& w : wall) w.resize(contexts.size());
  for (auto& w : cpu) w.resize(contexts.size());
  for (int r = 0; r < reps; r++)
    for (size_t ci = 0; ci < contexts.size(); ci++)
      for (size_t li = 0; li < layouts.size(); li++) {
        Layout& l = layouts[li];
        const uint32_t layer = fill ? 0 : static_cast<uint32_t>(r % c.num_hidden_layers);
        qn_args a = attention_args(l.plan, *l.kv, {.layer = layer, .pos0 = contexts[ci] - 1, .npos = 1}, 0,
                                   c.num_key_value_heads);
        double w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
        l.progs->attention(a);
        wall[li][ci].push_back(now_ns(CLOCK_MONOTONIC) - w0);
        cpu[li][ci].push_back(now_ns(CLOCK_THREAD_CPUTIME_ID) - c0);
      }

  std::printf("attention program, 0.6B shape, one layer, 8 kv heads / 16 query heads on one thread, %d reps, %s\n",
              reps, fill ? "cache filled from random q/k/v" : "zero cache (all weights equal)");
  std::printf("%-8s %8s %14s %14s\n", "K/V", "context", "wall us/call", "cpu us/call");
  for (size_t li = 0; li < layouts.size(); li++)
    for (size_t ci = 0; ci < contexts.size(); ci++)
      std::printf("int%-5u %8u %14.1f %14.1f\n", layouts[li].kv_bits, contexts[ci], median(wall[li][ci]) / 1e3,
                  median(cpu[li][ci]) / 1e3);
  if (contexts.size() >= 2) {
    const size_t lo = 0, hi = contexts.size() - 1;
    const double dn = double(contexts[hi]) - contexts[lo];
    for (size_t li = 0; li < layouts.size(); li++) {
      double slope = (median(cpu[li][hi]) - median(cpu[li][lo])) / dn;
      std::printf("int%u: %.1f ns cpu per cached position per layer (16 query heads); x 28 layers: %.2f ms cpu per "
                  "token per 1000 positions\n",
                  layouts[li].kv_bits, slope, slope * 28 * 1000 / 1e6);
    }
  }
  return 0;
}
