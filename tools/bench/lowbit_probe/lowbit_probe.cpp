// lowbit_probe [--check] [--rows N] [--cols C] [--rounds R] [--seconds S]
//
// The low-bit kernel probe (issue 26 items 1 and 3): today's q8 kernel, the
// q4a8 kernel (4-bit weights x 8-bit inputs, 4 products per multiply) and the
// q8a8 kernel (q8 weights x 8-bit inputs in 21-bit lanes, 3 products per
// multiply) over a C x N matrix in BPF, in the forward programs' loop structure.
//   --check   the kernels and the input quantization against their C++
//             models (q4a8_model.h, q8a8_model.h), exact equality, on random
//             and extreme data at 1024 and 256 columns, and q8a8's lanes
//             against each row's plain sum; exit 1 on any difference (ctest
//             lowbit_probe_check).
//   default   the benchmark: rounds of q8, q4a8 and q8a8 alternated, each a
//             run of about S seconds on one thread, reported as products per
//             CPU-second and per wall-second, best and median
//             (docs/performance.md). --cols 256 --rows 151936 is the shipped
//             model's vocabulary projection.
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
#include "q8a8_model.h"

namespace {

using lowbit::Block;

double clock_s(clockid_t id) {
  timespec ts;
  clock_gettime(id, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// The three kernels: their program, weights map, block and group shapes.
enum Format { kQ8, kQ4a8, kQ8a8, kFormats };

struct FormatInfo {
  const char* name;
  const char* prog;
  const char* map;
  int block_rows;
  int group_cols;  // columns per weight scale
  uint32_t (*block_bytes)(uint32_t cols);
  void (*pack)(const Block&, uint8_t*);
};

const FormatInfo kInfo[kFormats] = {
    {"q8", "lb_q8", "lb_w_q8", QN_Q8_BLOCK_ROWS, QN_GROUP, lb_q8_block_bytes, lowbit::pack_q8},
    {"q4a8", "lb_q4a8", "lb_w_q4a8", QN_Q4_BLOCK_ROWS, QN_Q4_GROUP, lb_q4_block_bytes, lowbit::pack_q4},
    {"q8a8", "lb_q8a8", "lb_w_q8a8", QN_Q8A8_BLOCK_ROWS, QN_GROUP, lb_q8a8_block_bytes, lowbit::pack_q8a8},
};

int blocks_for(Format f, int rows) { return (rows + kInfo[f].block_rows - 1) / kInfo[f].block_rows; }

struct ObjectCloser {
  void operator()(bpf_object* o) const { bpf_object__close(o); }
};

struct Probe {
  std::unique_ptr<bpf_object, ObjectCloser> obj;
  int cols = 0;
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

// The object for a matrix of cols x rows: the column count into .rodata and
// each format's weights map sized to its blocks, then the verifier.
Probe load_probe(int cols, int rows) {
  Probe p;
  p.cols = cols;
  p.obj.reset(bpf_object__open_file(LOWBIT_PROBE_OBJ, nullptr));
  if (!p.obj) {
    std::fprintf(stderr, "lowbit_probe: cannot open %s: %s\n", LOWBIT_PROBE_OBJ, std::strerror(errno));
    std::exit(2);
  }
  lb_config cfg{uint32_t(cols)};
  bpf_map* rodata = bpf_object__find_map_by_name(p.obj.get(), ".rodata.lb_config");
  bool sized = rodata && bpf_map__set_initial_value(rodata, &cfg, sizeof cfg) == 0;
  for (int f = 0; f < kFormats && sized; f++) {
    bpf_map* m = bpf_object__find_map_by_name(p.obj.get(), kInfo[f].map);
    sized = m && bpf_map__set_value_size(m, kInfo[f].block_bytes(cols)) == 0 &&
            bpf_map__set_max_entries(m, blocks_for(Format(f), rows)) == 0;
  }
  if (!sized) {
    std::fprintf(stderr, "lowbit_probe: cannot size the maps of %s\n", LOWBIT_PROBE_OBJ);
    std::exit(2);
  }
  if (int err = bpf_object__load(p.obj.get())) {
    std::fprintf(stderr, "lowbit_probe: loading %s failed: %s (run as root; the verifier log is above)\n",
                 LOWBIT_PROBE_OBJ, std::strerror(-err));
    std::exit(2);
  }
  return p;
}

// Random codes and scales, or the extremes: q8 and q4a8 their largest code
// (as the q8 kernel's bound allows), q8a8 rows of all -128, all 127 and
// alternating -128 / 127; scales 2^26 (16-32 groups of the largest sums stay below 2^63).
Block random_block(Format f, int cols, std::mt19937_64& rng, bool extreme) {
  Block b;
  b.rows = kInfo[f].block_rows;
  b.cols = cols;
  b.codes.resize(size_t(b.rows) * cols);
  b.scales.resize(size_t(b.rows) * (cols / kInfo[f].group_cols));
  int top = f == kQ4a8 ? 15 : 255;
  std::uniform_int_distribution<int> code(0, top), scale(1, 1 << 20);
  for (int j = 0; j < b.rows; j++)
    for (int k = 0; k < cols; k++) {
      int pattern[4] = {0, top, k % 2 ? top : 0, k % 2 ? 0 : top};
      int c = !extreme ? code(rng) : f == kQ8a8 ? pattern[j % 4] : top;
      b.codes[size_t(j) * cols + k] = uint8_t(c);
    }
  for (auto& s : b.scales) s = extreme ? (1 << 26) : scale(rng);
  return b;
}

// Random inputs with a few outlier channels, an all-zero group and an
// all-equal group; or the extremes: per input group alternating -max / +max,
// all +max, all -max, all equal and small (every 8-bit code then +-127).
std::unique_ptr<lb_input> random_input(int cols, std::mt19937_64& rng, bool extreme) {
  auto in = std::make_unique<lb_input>();
  std::memset(in.get(), 0, sizeof *in);
  std::normal_distribution<double> n(0, 8000);
  const int32_t lim = 1 << QN_Q8_ACT_BITS;
  for (int k = 0; k < cols; k++) {
    double v = n(rng) * (k % 97 == 0 ? 20 : 1);  // a few outlier channels, as activations have
    int32_t pattern[4] = {k % 2 ? lim : -lim, lim, -lim, 3};
    in->x[k] = extreme ? pattern[k / QN_A8_GROUP % 4] : int32_t(std::clamp<double>(std::lround(v), -lim, lim));
  }
  if (!extreme && cols >= 6 * QN_A8_GROUP)
    for (int k = 0; k < QN_A8_GROUP; k++) {
      in->x[2 * QN_A8_GROUP + k] = 0;
      in->x[5 * QN_A8_GROUP + k] = -1234;
    }
  return in;
}

using Matrix = std::vector<Block>[kFormats];

void make_matrix(Matrix& m, int rows, int cols, std::mt19937_64& rng, bool extreme) {
  for (int f = 0; f < kFormats; f++) {
    m[f].clear();
    for (int b = 0; b < blocks_for(Format(f), rows); b++) m[f].push_back(random_block(Format(f), cols, rng, extreme));
  }
}

bool write_blocks(const Probe& p, Format f, const std::vector<Block>& blocks) {
  std::vector<uint8_t> buf(kInfo[f].block_bytes(p.cols));
  for (uint32_t b = 0; b < blocks.size(); b++) {
    kInfo[f].pack(blocks[b], buf.data());
    if (bpf_map_update_elem(p.map(kInfo[f].map), &b, buf.data(), BPF_ANY)) return false;
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

// The model's rows of one block.
std::vector<int64_t> model_rows(Format f, const Block& b, const lb_input& in) {
  std::vector<int64_t> y(b.rows);
  if (f == kQ8a8) {
    auto q = lowbit::q8a8_block(b, in, lowbit::q8a8_lane_sums);
    std::copy(q.begin(), q.end(), y.begin());
  } else {
    for (int j = 0; j < b.rows; j++) y[j] = f == kQ4a8 ? lowbit::q4a8_row(b, j, in) : lowbit::q8_row(b, j, in);
  }
  return y;
}

// One kernel against its model on one matrix; prints and counts differences.
int check_kernel(const Probe& p, Format f, const std::vector<Block>& blocks, const lb_input& model_in) {
  if (!write_blocks(p, f, blocks)) return 1;
  lb_args a{uint32_t(blocks.size()), 1};
  int rc = p.run(kInfo[f].prog, &a);
  if (rc) {
    std::fprintf(stderr, "%s returned %d\n", kInfo[f].prog, rc);
    return 1;
  }
  auto out = read_output(p);
  int bad = 0;
  for (size_t b = 0; b < blocks.size(); b++) {
    std::vector<int64_t> want = model_rows(f, blocks[b], model_in);
    for (int j = 0; j < blocks[b].rows; j++) {
      int64_t got = out->y[b * blocks[b].rows + j];
      if (got != want[j] && bad++ < 5)
        std::fprintf(stderr, "%s block %zu row %d: kernel %lld, model %lld\n", kInfo[f].name, b, j, (long long)got,
                     (long long)want[j]);
    }
  }
  return bad;
}

// q8a8's model against the plain integers: every row's sum per input group
// read from the lanes equals its sum of code x q one product at a time, and so
// do the outputs.
int check_q8a8_lanes(const std::vector<Block>& blocks, const lb_input& in) {
  int bad = 0;
  for (size_t b = 0; b < blocks.size(); b++) {
    for (int g = 0; g < blocks[b].groups(); g++)
      for (int h = 0; h < QN_GROUP / QN_A8_GROUP; h++) {
        auto lanes = lowbit::q8a8_lane_sums(blocks[b], in, g, h), plain = lowbit::q8a8_plain_sums(blocks[b], in, g, h);
        for (int j = 0; j < QN_Q8A8_BLOCK_ROWS; j++)
          if (lanes[j] != plain[j] && bad++ < 5)
            std::fprintf(stderr, "q8a8 block %zu group %d half %d row %d: lanes %lld, plain %lld\n", b, g, h, j,
                         (long long)lanes[j], (long long)plain[j]);
      }
    if (lowbit::q8a8_block(blocks[b], in, lowbit::q8a8_lane_sums) !=
            lowbit::q8a8_block(blocks[b], in, lowbit::q8a8_plain_sums) && bad++ < 5)
      std::fprintf(stderr, "q8a8 block %zu: outputs differ from the plain sums'\n", b);
  }
  return bad;
}

int check_at(int cols, std::mt19937_64& rng) {
  const int rows = 256;
  Probe p = load_probe(cols, rows);
  int bad = 0;
  for (bool extreme : {false, true}) {
    Matrix m;
    make_matrix(m, rows, cols, rng, extreme);
    auto in = random_input(cols, rng, extreme);
    if (!set_input(p, *in)) return 1;
    auto model_in = std::make_unique<lb_input>(*in);
    lowbit::prepare(*model_in);
    auto got = std::make_unique<lb_input>();
    uint32_t k = 0;
    bpf_map_lookup_elem(p.map("lb_in"), &k, got.get());
    if (std::memcmp(got.get(), model_in.get(), sizeof *got) != 0) {
      std::fprintf(stderr, "lb_prepare differs from the model (%s data)\n", extreme ? "extreme" : "random");
      bad++;
    }
    for (int f = 0; f < kFormats; f++) bad += check_kernel(p, Format(f), m[f], *model_in);
    bad += check_q8a8_lanes(m[kQ8a8], *model_in);
  }
  return bad;
}

int check() {
  std::mt19937_64 rng(26);
  int bad = check_at(LB_MAX_COLS, rng) + check_at(256, rng);
  std::printf("lowbit_probe --check: %s\n", bad ? "DIFFERENCES"
                                                : "q8, q4a8, q8a8 and the 8-bit input equal their model, "
                                                  "q8a8's lanes the plain sums");
  return bad ? 1 : 0;
}

struct Round {
  double cpu_rate, wall_rate;  // products per CPU-second / wall-second
};

// One run of about `seconds` of one kernel over its (already written) blocks.
Round time_kernel(const Probe& p, Format f, const std::vector<Block>& blocks, double seconds) {
  double products = double(blocks.size()) * blocks[0].rows * p.cols;
  lb_args one{uint32_t(blocks.size()), 1};
  double w0 = clock_s(CLOCK_MONOTONIC);
  p.run(kInfo[f].prog, &one);  // warm, and size the run
  uint32_t reps = std::max<uint32_t>(1, uint32_t(seconds / std::max(1e-6, clock_s(CLOCK_MONOTONIC) - w0)));
  lb_args a{uint32_t(blocks.size()), reps};
  double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), t0 = clock_s(CLOCK_MONOTONIC);
  p.run(kInfo[f].prog, &a);
  double cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0, wall = clock_s(CLOCK_MONOTONIC) - t0;
  return {products * reps / cpu, products * reps / wall};
}

double best(std::vector<double> v) { return *std::max_element(v.begin(), v.end()); }
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int bench(int rows, int cols, int rounds, double seconds) {
  Probe p = load_probe(cols, rows);
  std::mt19937_64 rng(1);
  Matrix m;
  make_matrix(m, rows, cols, rng, false);
  auto in = random_input(cols, rng, false);
  if (!set_input(p, *in)) return 1;
  std::printf("matrix %d x %d; weights", rows, cols);
  for (int f = 0; f < kFormats; f++) {
    if (!write_blocks(p, Format(f), m[f])) return 1;
    std::printf(" %s %.1f MB", kInfo[f].name, m[f].size() * double(kInfo[f].block_bytes(cols)) / 1e6);
  }
  std::printf(" (scales, code sums and start values included; q8a8 pads to whole blocks of 12 rows)\n");
  std::vector<double> cpu[kFormats], wall[kFormats];
  for (int r = 0; r < rounds; r++)
    for (int f = 0; f < kFormats; f++) {
      Round t = time_kernel(p, Format(f), m[f], seconds);
      cpu[f].push_back(t.cpu_rate / 1e9);
      wall[f].push_back(t.wall_rate / 1e9);
      std::printf("round %d %-5s %.2f G products/CPU-s, %.2f G/wall-s\n", r + 1, kInfo[f].name, t.cpu_rate / 1e9,
                  t.wall_rate / 1e9);
    }
  std::printf("\n| kernel | G products per CPU-second, best / median | per wall-second, best / median "
              "| / q8 per CPU-second, best / median |\n|---|---|---|---|\n");
  for (int f = 0; f < kFormats; f++)
    std::printf("| %s | %.2f / %.2f | %.2f / %.2f | %.2fx / %.2fx |\n", kInfo[f].name, best(cpu[f]), median(cpu[f]),
                best(wall[f]), median(wall[f]), best(cpu[f]) / best(cpu[kQ8]), median(cpu[f]) / median(cpu[kQ8]));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool do_check = false;
  int rows = 8192, cols = LB_MAX_COLS, rounds = 5;
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
    else if (a == "--cols") cols = std::atoi(val().c_str());
    else if (a == "--rounds") rounds = std::atoi(val().c_str());
    else if (a == "--seconds") seconds = std::atof(val().c_str());
    else {
      std::fprintf(stderr, "usage: lowbit_probe [--check] [--rows N] [--cols C] [--rounds R] [--seconds S]\n");
      return 2;
    }
  }
  if (do_check) return check();
  if (rows < QN_Q4_BLOCK_ROWS || rows > LB_MAX_ROWS || rows % QN_Q4_BLOCK_ROWS || cols < QN_GROUP ||
      cols > LB_MAX_COLS || cols % QN_GROUP || rounds < 1 || seconds <= 0) {
    std::fprintf(stderr,
                 "lowbit_probe: --rows must be a multiple of %d in %d..%d, --cols a multiple of %d in %d..%d, "
                 "--rounds >= 1, --seconds > 0\n",
                 QN_Q4_BLOCK_ROWS, QN_Q4_BLOCK_ROWS, LB_MAX_ROWS, QN_GROUP, QN_GROUP, LB_MAX_COLS);
    return 2;
  }
  return bench(rows, cols, rounds, seconds);
}
