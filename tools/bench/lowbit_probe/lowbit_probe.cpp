// lowbit_probe [--check] [--rows N] [--rounds R] [--seconds S]
//
// The low-bit kernel probe (issue 26 items 1 and 3): today's q8 kernel and the
// q4a8 kernel (4-bit weights x 8-bit inputs, 4 products per multiply) over a
// LB_COLS x N matrix in BPF, in the forward programs' loop structure.
//   --check   both kernels and the input quantization against their C++
//             model (q4a8_model.h), exact equality, on random and extreme
//             data; exit 1 on any difference (ctest lowbit_probe_check).
//   default   the benchmark: rounds of q8 and q4a8 alternated, each a run of
//             about S seconds on one thread, reported as products per CPU-
//             second and per wall-second, best and median (docs/performance.md).
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "q4a8_model.h"

namespace {

using lowbit::Block;

double clock_s(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct ObjectCloser {
  void operator()(bpf_object* o) const { bpf_object__close(o); }
};

struct Probe {
  std::unique_ptr<bpf_object, ObjectCloser> obj;
  int prog(const char* name) const { return bpf_program__fd(bpf_object__find_program_by_name(obj.get(), name)); }
  int map(const char* name) const { return bpf_map__fd(bpf_object__find_map_by_name(obj.get(), name)); }
  int run(const char* name, lb_args* args) const {
    LIBBPF_OPTS(bpf_test_run_opts, o);
    if (args) {
      o.ctx_in = args;
      o.ctx_size_in = sizeof *args;
    }
    int err = bpf_prog_test_run_opts(prog(name), &o);
    if (err) return err;
    return int(o.retval);
  }
};

Probe load_probe() {
  Probe p;
  p.obj.reset(bpf_object__open_file(LOWBIT_PROBE_OBJ, nullptr));
  if (!p.obj) {
    std::fprintf(stderr, "lowbit_probe: cannot open %s: %s\n", LOWBIT_PROBE_OBJ, std::strerror(errno));
    std::exit(2);
  }
  if (int err = bpf_object__load(p.obj.get())) {
    std::fprintf(stderr, "lowbit_probe: loading %s failed: %s (run as root; the verifier log is above)\n",
                 LOWBIT_PROBE_OBJ, std::strerror(-err));
    std::exit(2);
  }
  return p;
}

Block random_block(int rows, int groups, bool q4, std::mt19937_64& rng, bool extreme) {
  Block b;
  b.rows = rows;
  b.codes.resize(size_t(rows) * LB_COLS);
  b.scales.resize(size_t(rows) * groups);
  std::uniform_int_distribution<int> code(0, q4 ? 15 : 255), scale(1, 1 << 20);
  for (auto& c : b.codes) c = uint8_t(extreme ? (q4 ? 15 : 255) : code(rng));
  for (auto& s : b.scales) s = extreme ? (1 << 26) : scale(rng);  // 16-32 groups of the largest sums stay below 2^63
  return b;
}

std::unique_ptr<lb_input> random_input(std::mt19937_64& rng, bool extreme) {
  auto in = std::make_unique<lb_input>();
  std::memset(in.get(), 0, sizeof *in);
  std::normal_distribution<double> n(0, 8000);
  for (int k = 0; k < LB_COLS; k++) {
    double v = n(rng) * (k % 97 == 0 ? 20 : 1);  // a few outlier channels, as activations have
    int32_t lim = 1 << QN_Q8_ACT_BITS;
    in->x[k] = extreme ? (k % 2 ? lim : -lim) : int32_t(std::clamp<double>(std::lround(v), -lim, lim));
  }
  if (!extreme) for (int k = 64; k < 96; k++) in->x[k] = 0;  // an all-zero group
  return in;
}

struct Matrix {
  std::vector<Block> q8, q4;
};

// One random matrix of `rows` rows in both formats. Both share the weights
// map's entries (only one kernel runs at a time), so each run writes its
// format's blocks first (write_blocks).
Matrix make_matrix(int rows, std::mt19937_64& rng, bool extreme) {
  Matrix m;
  for (int r = 0; r < rows; r += QN_Q8_BLOCK_ROWS)
    m.q8.push_back(random_block(QN_Q8_BLOCK_ROWS, LB_Q8_GROUPS, false, rng, extreme));
  for (int r = 0; r < rows; r += QN_Q4_BLOCK_ROWS)
    m.q4.push_back(random_block(QN_Q4_BLOCK_ROWS, LB_Q4_GROUPS, true, rng, extreme));
  return m;
}

bool write_blocks(const Probe& p, const std::vector<Block>& blocks, bool q4) {
  std::vector<uint8_t> buf(LB_BLOCK_BYTES);
  for (uint32_t b = 0; b < blocks.size(); b++) {
    if (q4) lowbit::pack_q4(blocks[b], buf.data());
    else lowbit::pack_q8(blocks[b], buf.data());
    if (bpf_map_update_elem(p.map("lb_weights"), &b, buf.data(), BPF_ANY)) return false;
  }
  return true;
}

bool set_input(const Probe& p, const lb_input& in) {
  uint32_t k = 0;
  return bpf_map_update_elem(p.map("lb_in"), &k, &in, BPF_ANY) == 0 && p.run("lb_prepare", nullptr) == 0;
}

std::unique_ptr<lb_output> read_output(const Probe& p) {
  auto out = std::make_unique<lb_output>();
  uint32_t k = 0;
  bpf_map_lookup_elem(p.map("lb_out"), &k, out.get());
  return out;
}

// One kernel against its model on one matrix; prints and counts differences.
int check_kernel(const Probe& p, const Matrix& m, const lb_input& model_in, bool q4) {
  const auto& blocks = q4 ? m.q4 : m.q8;
  if (!write_blocks(p, blocks, q4)) return 1;
  lb_args a{uint32_t(blocks.size()), 1};
  int rc = p.run(q4 ? "lb_q4a8" : "lb_q8", &a);
  if (rc) {
    std::fprintf(stderr, "%s returned %d\n", q4 ? "lb_q4a8" : "lb_q8", rc);
    return 1;
  }
  auto out = read_output(p);
  int bad = 0;
  for (size_t b = 0; b < blocks.size(); b++)
    for (int j = 0; j < blocks[b].rows; j++) {
      int64_t want = q4 ? lowbit::q4a8_row(blocks[b], j, model_in) : lowbit::q8_row(blocks[b], j, model_in);
      int64_t got = out->y[b * blocks[b].rows + j];
      if (got != want && bad++ < 5)
        std::fprintf(stderr, "%s block %zu row %d: kernel %lld, model %lld\n", q4 ? "q4a8" : "q8", b, j,
                     (long long)got, (long long)want);
    }
  return bad;
}

int check(const Probe& p) {
  std::mt19937_64 rng(26);
  int bad = 0;
  for (bool extreme : {false, true}) {
    Matrix m = make_matrix(256, rng, extreme);
    auto in = random_input(rng, extreme);
    if (!set_input(p, *in)) return 1;
    auto model_in = std::make_unique<lb_input>(*in);
    lowbit::prepare(*model_in);
    lb_input got;
    uint32_t k = 0;
    bpf_map_lookup_elem(p.map("lb_in"), &k, &got);
    if (std::memcmp(&got, model_in.get(), sizeof got) != 0) {
      std::fprintf(stderr, "lb_prepare differs from the model (%s data)\n", extreme ? "extreme" : "random");
      bad++;
    }
    bad += check_kernel(p, m, *model_in, false) + check_kernel(p, m, *model_in, true);
  }
  std::printf("lowbit_probe --check: %s\n", bad ? "DIFFERENCES" : "q8, q4a8 and the 8-bit input equal their model");
  return bad ? 1 : 0;
}

struct Round {
  double cpu_rate, wall_rate;  // products per CPU-second / wall-second
};

Round time_kernel(const Probe& p, const Matrix& m, bool q4, double seconds) {
  const auto& blocks = q4 ? m.q4 : m.q8;
  write_blocks(p, blocks, q4);
  double products = double(blocks.size()) * blocks[0].rows * LB_COLS;
  lb_args one{uint32_t(blocks.size()), 1};
  double w0 = clock_s(CLOCK_MONOTONIC);
  p.run(q4 ? "lb_q4a8" : "lb_q8", &one);  // warm, and size the run
  uint32_t reps = std::max<uint32_t>(1, uint32_t(seconds / std::max(1e-6, clock_s(CLOCK_MONOTONIC) - w0)));
  lb_args a{uint32_t(blocks.size()), reps};
  double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), t0 = clock_s(CLOCK_MONOTONIC);
  p.run(q4 ? "lb_q4a8" : "lb_q8", &a);
  double cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0, wall = clock_s(CLOCK_MONOTONIC) - t0;
  return {products * reps / cpu, products * reps / wall};
}

double best(std::vector<double> v) { return *std::max_element(v.begin(), v.end()); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int bench(const Probe& p, int rows, int rounds, double seconds) {
  std::mt19937_64 rng(1);
  Matrix m = make_matrix(rows, rng, false);
  auto in = random_input(rng, false);
  if (!set_input(p, *in)) return 1;
  std::vector<double> cpu[2], wall[2];
  std::printf("matrix %d x %d; q8 weights %.1f MB, q4a8 %.1f MB (scales and code sums included)\n", rows, LB_COLS,
              m.q8.size() * double(LB_Q8_BLOCK_BYTES) / 1e6, m.q4.size() * double(LB_Q4_BLOCK_BYTES) / 1e6);
  for (int r = 0; r < rounds; r++)
    for (int q4 : {0, 1}) {
      Round t = time_kernel(p, m, q4, seconds);
      cpu[q4].push_back(t.cpu_rate / 1e9);
      wall[q4].push_back(t.wall_rate / 1e9);
      std::printf("round %d %-5s %.2f G products/CPU-s, %.2f G/wall-s\n", r + 1, q4 ? "q4a8" : "q8", t.cpu_rate / 1e9,
                  t.wall_rate / 1e9);
    }
  std::printf("\n| kernel | G products per CPU-second, best / median | per wall-second, best / median |\n|---|---|---|\n");
  for (int q4 : {0, 1})
    std::printf("| %s | %.2f / %.2f | %.2f / %.2f |\n", q4 ? "q4a8" : "q8", best(cpu[q4]), median(cpu[q4]),
                best(wall[q4]), median(wall[q4]));
  std::printf("q4a8 / q8: %.2fx best, %.2fx median (per CPU-second)\n", best(cpu[1]) / best(cpu[0]),
              median(cpu[1]) / median(cpu[0]));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool do_check = false;
  int rows = 8192, rounds = 5;
  double seconds = 0.5;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "lowbit_probe: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--check") do_check = true;
    else if (a == "--rows") rows = std::atoi(val().c_str());
    else if (a == "--rounds") rounds = std::atoi(val().c_str());
    else if (a == "--seconds") seconds = std::atof(val().c_str());
    else {
      std::fprintf(stderr, "usage: lowbit_probe [--check] [--rows N] [--rounds R] [--seconds S]\n");
      return 2;
    }
  }
  if (rows < QN_Q4_BLOCK_ROWS || rows > LB_MAX_ROWS || rows % QN_Q4_BLOCK_ROWS || rounds < 1 || seconds <= 0) {
    std::fprintf(stderr, "lowbit_probe: --rows must be a multiple of %d in %d..%d, --rounds >= 1, --seconds > 0\n",
                 QN_Q4_BLOCK_ROWS, QN_Q4_BLOCK_ROWS, LB_MAX_ROWS);
    return 2;
  }
  Probe p = load_probe();
  return do_check ? check(p) : bench(p, rows, rounds, seconds);
}
