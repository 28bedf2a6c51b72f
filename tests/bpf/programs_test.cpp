// The programs that are not forward-pass operators, and the loader itself:
//   - qn_rope_table == its C++ model bit for bit, and within one Q30 unit of
//     the correctly rounded double table,
//   - qn_topk_merge == a sort of the workers' candidates (ties: lowest id
//     first), for 1 to 64 workers,
//   - a BpfPrograms constructor that throws (before or after load, map or
//     arena path) leaves no BPF map, program or mapping behind (a skeleton
//     not destroyed on a throw keeps its map and program fds and mappings).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "arena_skip.h"
#include "common/error.h"
#include "engine/bpf_programs.h"
#include "engine/model_plan.h"
#include "engine/rope_table.h"
#include "common/worker_pool.h"
#include "presets.h"

namespace qwen3::engine {
namespace {

ModelConfig small_config(int head_dim = 64, double theta = 1000000.0) {
  ModelConfig c = mkmodel::model_shape(128, 1, 2, 1, head_dim, 128, 1000);
  c.rope_theta = theta;
  return c;
}

ProgramLayout layout_for(const ModelConfig& c, uint32_t threads, uint32_t max_ctx, bool arena = false) {
  ModelPlan plan = make_model_plan(c, Precision::q24, arena, threads, max_ctx, 16);
  plan.layout.weight_entries = 1;  // these programs read no weights
  return plan.layout;
}

// The Qwen3 shape (head_dim 128, theta 1e6) and a classic one (theta 1e4,
// head_dim 64), over 4096 positions split across 3 workers.
TEST(RopeTable, KernelEqualsModelAndIsWithinOneUnitOfDouble) {
  for (auto [hd, theta] : {std::pair{128, 1000000.0}, std::pair{64, 10000.0}}) {
    ModelConfig c = small_config(hd, theta);
    c.num_attention_heads = 2;
    ProgramLayout l = layout_for(c, 3, 4096);
    BpfPrograms progs(l);
    WorkerPool pool(3);
    const uint32_t n = l.rope_positions;
    std::fill(progs.rope(), progs.rope() + size_t(n) * hd, int32_t(0x5a5a5a5a));  // every entry must be written
    fill_rope_table(progs, pool);
    std::vector<int32_t> model(size_t(n) * hd);
    rope_table_model(model.data(), n, hd, l.shape.rope_theta_q16);
    const uint32_t half = hd / 2;
    long worst = 0;
    for (uint32_t p = 0; p < n; p++)
      for (uint32_t i = 0; i < half; i++) {
        const size_t at = size_t(p) * hd + i;
        ASSERT_EQ(progs.rope()[at], model[at]) << "cos pos " << p << " i " << i;
        ASSERT_EQ(progs.rope()[at + half], model[at + half]) << "sin pos " << p << " i " << i;
        const double a = p * std::pow(theta, -2.0 * i / hd);
        worst = std::max(worst, std::labs(model[at] - std::lround(std::cos(a) * 1073741824.0)));
        worst = std::max(worst, std::labs(model[at + half] - std::lround(std::sin(a) * 1073741824.0)));
      }
    EXPECT_LE(worst, 1) << "head_dim " << hd << " theta " << theta;
  }
}

// Far positions keep their phase: the model at 40,960 positions (the default
// context) against double, where a float32 angle would be ~2e-3 rad off.
TEST(RopeTable, ModelHoldsItsBoundAtLongContext) {
  const uint32_t hd = 128, n = 40960;
  std::vector<int32_t> model(size_t(n) * hd);
  rope_table_model(model.data(), n, hd, uint64_t(1000000.0 * 65536.0 + 0.5));
  long worst = 0;
  for (uint32_t p = 0; p < n; p += 7)
    for (uint32_t i = 0; i < hd / 2; i++) {
      const double a = p * std::pow(1e6, -2.0 * i / hd);
      worst = std::max(worst, std::labs(model[size_t(p) * hd + i] - std::lround(std::cos(a) * 1073741824.0)));
    }
  EXPECT_LE(worst, 1);
}

// The C++ model of the merge: every worker's candidates sorted by (logit
// desc, id asc), the first k; argmax the lowest id of the largest logit.
TEST(TopkMerge, EqualsSortOfAllCandidatesWithTies) {
  for (uint32_t threads : {1u, 7u, 64u}) {
    ProgramLayout l = layout_for(small_config(), threads, 16);
    BpfPrograms progs(l);
    std::mt19937_64 rng(threads);
    const uint32_t npos = 3, k = 40;
    std::vector<std::vector<std::pair<int32_t, int32_t>>> want(npos);  // (-logit, id)
    for (uint32_t c = 0; c < npos; c++) {
      for (uint32_t t = 0; t < threads; t++) {
        // worker t owns ids [t * 1000, t * 1000 + 1000); few distinct logits force ties
        std::vector<std::pair<int32_t, int32_t>> mine;
        for (int32_t id = int32_t(t) * 1000; id < int32_t(t + 1) * 1000; id += 1 + int32_t(rng() % 20))
          mine.push_back({-int32_t(rng() % 9) * 65536, id});
        std::sort(mine.begin(), mine.end());
        mine.resize(std::min<size_t>(k, mine.size()));  // what the worker's pass kept
        qn_topk_slot* s = progs.topk(t, c);
        s->argmax_id = mine[0].second;
        s->argmax_logit = -mine[0].first;
        s->count = int32_t(mine.size());
        for (size_t j = 0; j < mine.size(); j++) s->e[j] = {mine[j].second, -mine[j].first};
        want[c].insert(want[c].end(), mine.begin(), mine.end());
      }
      std::sort(want[c].begin(), want[c].end());
    }
    qn_args a{};
    a.npos = npos;
    a.top_k = k;
    progs.topk_merge(a);
    for (uint32_t c = 0; c < npos; c++) {
      const auto& all = want[c];
      const qn_topk_slot* m = progs.merged_topk(c);
      ASSERT_EQ(m->count, int32_t(std::min<size_t>(k, all.size()))) << threads << " threads, position " << c;
      for (int32_t j = 0; j < m->count; j++)
        ASSERT_EQ(std::pair(-m->e[j].logit, m->e[j].id), all[j]) << threads << " threads, position " << c << " rank " << j;
      EXPECT_EQ(m->argmax_id, all[0].second);
      EXPECT_EQ(m->argmax_logit, -all[0].first);
    }
  }
}

TEST(TopkMerge, RejectsMoreThanTheKernelKeeps) {
  BpfPrograms progs(layout_for(small_config(), 2, 16));
  qn_args a{};
  a.npos = 1;
  a.top_k = QN_TOPK_MAX + 1;
  EXPECT_THROW(progs.topk_merge(a), Error);
}

// What this process holds of BPF: map and program fds, and its mappings.
struct Held {
  int maps = 0, progs = 0, mappings = 0;
  bool operator==(const Held&) const = default;
};
Held held() {
  Held h;
  if (DIR* d = opendir("/proc/self/fd")) {
    while (dirent* e = readdir(d)) {
      char target[256] = {};
      std::string path = std::string("/proc/self/fd/") + e->d_name;
      ssize_t n = readlink(path.c_str(), target, sizeof target - 1);
      if (n <= 0) continue;
      std::string t(target, size_t(n));
      if (t == "anon_inode:bpf-map") h.maps++;
      if (t == "anon_inode:bpf-prog") h.progs++;
    }
    closedir(d);
  }
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) h.mappings++;
  return h;
}
std::ostream& operator<<(std::ostream& o, const Held& h) {
  return o << h.maps << " maps, " << h.progs << " programs, " << h.mappings << " mappings";
}

uint64_t vm_size_bytes() {
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) * 1024;
  return 0;
}

// Constructs with the address space capped just above its current size: the
// object loads (kernel memory is not address space), then mmapping the big
// buffers fails inside the constructor.
void construct_under_as_limit(const ProgramLayout& l) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &old), 0);
  rlimit cap = old;
  cap.rlim_cur = vm_size_bytes() + (48u << 20);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &cap), 0);
  std::string what;
  try {
    BpfPrograms progs(l);
  } catch (const std::exception& e) {
    what = e.what();
  }
  ASSERT_EQ(setrlimit(RLIMIT_AS, &old), 0);
  // map path: the object loaded and mmapping a buffer after the load failed;
  // arena path: libbpf's own mmap of the arena, the last step of the load,
  // fails first (its maps exist by then)
  const bool mapping = what.find("cannot mmap BPF map") != std::string::npos;
  const bool arena_load = l.arena && what.find("forward_arena failed (Cannot allocate memory)") != std::string::npos;
  EXPECT_TRUE(mapping || arena_load) << "constructor: " << what;
}

void expect_mapping_failure_leaks_nothing(bool arena) {
  ModelConfig c = small_config();
  c.vocab_size = 2000000;  // logits_buf: 128 MB to mmap, beyond the cap
  ProgramLayout l = layout_for(c, 2, 16, arena);
  construct_under_as_limit(l);  // the first one also warms libc's and libbpf's caches
  const Held before = held();
  construct_under_as_limit(l);
  EXPECT_EQ(held(), before) << (arena ? "arena" : "map") << " path";
}

TEST(Loader, ThrowWhileMappingLeaksNothing) { expect_mapping_failure_leaks_nothing(false); }

TEST(Loader, ThrowWhileMappingTheArenaLeaksNothing) {
  QWEN3_SKIP_WITHOUT_ARENA();
  expect_mapping_failure_leaks_nothing(true);
}

TEST(Loader, ThrowBeforeLoadLeaksNothing) {
  QWEN3_SKIP_WITHOUT_ARENA();  // the layout is the arena's
  ProgramLayout l = layout_for(small_config(), 2, 16, true);
  l.weight_bytes = uint64_t(5) << 30;  // beyond the 4 GiB arena: rejected after the object is opened
  EXPECT_THROW(BpfPrograms{l}, Error);
  const Held before = held();
  for (int i = 0; i < 3; i++) EXPECT_THROW(BpfPrograms{l}, Error);
  EXPECT_EQ(held(), before);
}

TEST(Loader, ThrowInsideTheVerifierLeaksNothing) {
  // a head_dim the attention program's loops cannot verify within the budget
  ProgramLayout l = layout_for(small_config(), 2, 16);
  l.shape.head_dim = 1u << 16;
  l.shape.q_dim = l.shape.n_heads * l.shape.head_dim;
  l.shape.kv_dim = l.shape.n_kv_heads * l.shape.head_dim;
  EXPECT_THROW(BpfPrograms{l}, Error);
  const Held before = held();
  EXPECT_THROW(BpfPrograms{l}, Error);
  EXPECT_EQ(held(), before);
}

}  // namespace
}  // namespace qwen3::engine
