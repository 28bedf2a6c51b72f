// qwen3-bpf-kbench: the matrix-product kernels alone, at a model shape, on
// synthetic weights (no model file, loads in seconds). Runs the matmul
// schedule of one forward pass (per layer qkv, o, gate/up, down; then the
// vocabulary) for one position (decode) or a pass of 16 (prefill), on the
// engine's worker threads, and prints milliseconds and G multiply-accumulates
// per second per op. Attention and embedding are not run: this isolates the
// kernels that dominate decode (docs/performance.md).
//
//   qwen3-bpf-kbench [--precision q24|q8] [--weights map|arena] [--npos N]
//                    [--reps N] [--threads N] [--layers N] [--vocab 0|1]
// --layers 1 --vocab 0 keeps the weights (~22 MiB q8) in the last-level
// cache: the kernels' compute speed without DRAM streaming.
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/bpf_backend.h"  // Precision names
#include "engine/bpf_programs.h"
#include "engine/model_plan.h"
#include "engine/weight_format.h"
#include "common/worker_pool.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace qwen3;
using namespace qwen3::engine;

struct Options {
  Precision precision = Precision::q8;
  bool arena = false;
  uint32_t npos = 1, reps = 5, threads = 2, layers = 28;
  bool vocab = true;
};

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr,
               "qwen3-bpf-kbench: %s\nusage: qwen3-bpf-kbench [--precision q24|q8] [--weights map|arena] "
               "[--npos N] [--reps N] [--threads N] [--layers N] [--vocab 0|1]\n",
               msg);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage("every option needs a value");
    std::string v = argv[++i];
    if (a == "--precision") o.precision = parse_precision(v);
    else if (a == "--weights") o.arena = v == "arena";
    else if (a == "--npos") o.npos = std::clamp<uint32_t>(std::stoul(v), 1, QN_PMAX);
    else if (a == "--reps") o.reps = std::max<uint32_t>(1, std::stoul(v));
    else if (a == "--threads") o.threads = std::clamp<uint32_t>(std::stoul(v), 1, QN_THREADS_LIMIT);
    else if (a == "--layers") o.layers = std::clamp<uint32_t>(std::stoul(v), 1, 28);
    else if (a == "--vocab") o.vocab = v != "0";
    else usage(("unknown option " + a).c_str());
  }
  return o;
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double load_average() {
  std::ifstream f("/proc/loadavg");
  double v = 0;
  f >> v;
  return v;
}

// Random weights in the stored row format (bpf_ops/layout.h); values only need to be in range.
void fill_weights(const ModelPlan& plan, BpfPrograms& progs, Precision p) {
  const uint32_t prec = static_cast<uint32_t>(p);
  std::mt19937_64 rng(11);
  for (const MatrixPlan& mp : plan.matrices) {
    std::vector<uint8_t> image(row_bytes_for(mp.cols, p));
    for (uint32_t r = 0; r < mp.rows; r++) {
      uint8_t* row = image.data();
      for (uint32_t g = 0; g < mp.m.groups; g++) {
        uint64_t bits = rng();
        uint8_t* gp = row + qn_group_off(prec, g);
        if (p == Precision::q8) {
          int32_t scale = 1 << 20;
          std::memcpy(gp, &scale, QN_Q8_SCALE_BYTES);
          for (int k = 0; k < QN_GROUP; k++, bits = bits * 6364136223846793005ULL + 1)
            gp[QN_Q8_SCALE_BYTES + k] = static_cast<uint8_t>(int8_t((bits >> 40) % 255 - 127));
        } else {
          for (int k = 0; k < QN_GROUP; k++, bits = bits * 6364136223846793005ULL + 1) {
            int32_t w = int32_t((bits >> 40) % (1 << 22)) - (1 << 21);
            std::memcpy(gp + 4 * k, &w, 4);
          }
        }
      }
      if (p == Precision::q8) std::memset(row + qn_q8_tail_off(mp.m.groups), 0, QN_OUT_TAIL_BYTES);
      store_row(progs.weights(), mp, r, row);
    }
  }
}

// Qwen3-0.6B's shape with `layers` layers.
ModelConfig shape_0_6b(uint32_t layers) {
  ModelConfig c;
  c.hidden_size = 1024;
  c.num_hidden_layers = int(layers);
  c.num_attention_heads = 16;
  c.num_key_value_heads = 8;
  c.head_dim = 128;
  c.intermediate_size = 3072;
  c.vocab_size = 151936;
  c.tie_word_embeddings = true;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  try {
    const ModelConfig c = shape_0_6b(o.layers);
    const bool q8 = o.precision == Precision::q8;
    ModelPlan plan = make_model_plan(c, o.precision, o.arena, o.threads, 256);
    BpfPrograms progs(plan.layout);
    fill_weights(plan, progs, o.precision);
    for (auto& mp : plan.matrices) mp.m.act_bits = q8 ? QN_Q8_ACT_BITS : 24;
    std::mt19937_64 rng(5);
    std::normal_distribution<double> nd;
    const ProgramLayout& L = plan.layout;
    auto fill = [&](int32_t* b, uint32_t stride, uint32_t n) {
      for (uint32_t p = 0; p < QN_PMAX; p++)
        for (uint32_t i = 0; i < stride; i++) b[p * stride + i] = i < n ? int32_t(nd(rng) * 65536) : 0;
    };
    fill(progs.resid(), L.hid_pad, c.hidden_size);
    fill(progs.attn(), L.qd_pad, c.q_dim());
    fill(progs.mlp(), L.inter_pad, c.intermediate_size);
    for (uint32_t i = 0; i < L.shape.norms_len; i++) progs.norms()[i] = 1 << 16;

    WorkerPool pool(int(o.threads));
    enum { kQkv, kO, kGateUp, kDown, kVocab, kOps };
    const char* names[kOps] = {"qkv", "o", "gate_up", "down", "vocab"};
    double macs[kOps] = {};
    std::vector<std::vector<double>> per_rep(kOps);
    double cpu[kOps] = {};  // CPU seconds of all workers, summed over the measured reps
    std::atomic<int> current{0};
    std::atomic<bool> measuring{false};
    std::mutex cpu_mu;
    auto run_op = [&](uint32_t op, const MatrixPlan& mp, uint32_t norm_off, uint32_t mask) {
      const uint32_t rows = op == QN_OP_GATEUP ? mp.rows / 2 : mp.rows;
      qn_args base{};
      base.mat = mp.m;
      if (L.arena) base.mat.arena_off = reinterpret_cast<uintptr_t>(progs.weights()) + mp.offset;
      base.op = op;
      base.npos = o.npos;
      base.norm_off = norm_off;
      base.pos_mask = mask;
      base.top_k = 40;
      pool.run([&](int t) {
        qn_args a = base;
        a.thread = uint32_t(t);
        const RowRange rr = worker_rows(rows, op == QN_OP_GATEUP, o.precision, uint32_t(t), uint32_t(pool.size()));
        a.row_begin = rr.begin;
        a.row_end = rr.end;
        double c0 = thread_cpu_seconds();
        if (a.row_begin < a.row_end) progs.matmul(a);
        double used = thread_cpu_seconds() - c0;
        if (measuring) {
          std::lock_guard lock(cpu_mu);
          cpu[current] += used;
        }
      });
    };
    std::vector<double> totals;
    for (uint32_t rep = 0; rep < o.reps + 1; rep++) {  // rep 0 warms up
      double t[kOps] = {};
      measuring = rep > 0;
      auto timed = [&](int k, auto&& fn) {
        current = k;
        auto t0 = Clock::now();
        fn();
        t[k] += std::chrono::duration<double>(Clock::now() - t0).count();
      };
      for (int l = 0; l < c.num_hidden_layers; l++) {
        const NormOffsets& n = plan.norms[l];
        timed(kQkv, [&] { run_op(QN_OP_QKV, plan.layer_matrix(l, MatrixKind::qkv), n.input, 0); });
        timed(kO, [&] { run_op(QN_OP_O, plan.layer_matrix(l, MatrixKind::o), 0, 0); });
        // the projections add into resid; reset it so values stay in range
        fill(progs.resid(), L.hid_pad, c.hidden_size);
        timed(kGateUp, [&] { run_op(QN_OP_GATEUP, plan.layer_matrix(l, MatrixKind::gate_up), n.post, 0); });
        timed(kDown, [&] { run_op(QN_OP_DOWN, plan.layer_matrix(l, MatrixKind::down), 0, 0); });
        fill(progs.resid(), L.hid_pad, c.hidden_size);
      }
      if (o.vocab) timed(kVocab, [&] { run_op(QN_OP_VOCAB, plan.lm_head(), plan.final_norm, 1u << (o.npos - 1)); });
      if (rep == 0) continue;
      double sum = 0;
      for (int k = 0; k < kOps; k++) {
        per_rep[k].push_back(t[k]);
        sum += t[k];
      }
      totals.push_back(sum);
    }
    for (int l = 0; l < c.num_hidden_layers; l++) {
      macs[kQkv] += double(plan.layer_matrix(l, MatrixKind::qkv).rows) * c.hidden_size * o.npos;
      macs[kO] += double(plan.layer_matrix(l, MatrixKind::o).rows) * c.q_dim() * o.npos;
      macs[kGateUp] += double(plan.layer_matrix(l, MatrixKind::gate_up).rows) * c.hidden_size * o.npos;
      macs[kDown] += double(plan.layer_matrix(l, MatrixKind::down).rows) * c.intermediate_size * o.npos;
    }
    macs[kVocab] = o.vocab ? double(c.vocab_size) * c.hidden_size : 0;
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf("%s %s, %u layers, %u position(s) per pass, %u threads, %u reps, load average %.1f\n",
                precision_name(o.precision), o.arena ? "arena" : "map", o.layers, o.npos, o.threads, o.reps, load_average());
    double all_macs = 0, cpu_all = 0;
    for (int k = 0; k < kOps; k++) {
      if (macs[k] == 0) continue;
      double m = median(per_rep[k]);
      all_macs += macs[k];
      std::printf("  %-8s %8.2f ms  %6.2f G MAC/s   cpu %8.2f ms  %5.2f G MAC/s per cpu-second\n", names[k], m * 1e3,
                  macs[k] / m / 1e9, cpu[k] / o.reps * 1e3, macs[k] * o.reps / cpu[k] / 1e9);
      cpu_all += cpu[k];
    }
    double tm = median(totals), tmin = *std::min_element(totals.begin(), totals.end());
    std::printf("  %-8s %8.2f ms (min %.2f)  %6.2f G MAC/s; per position %.2f ms; cpu %.2f ms, %.2f G MAC/s per "
                "cpu-second\n",
                "total", tm * 1e3, tmin * 1e3, all_macs / tm / 1e9, tm * 1e3 / o.npos, cpu_all / o.reps * 1e3,
                all_macs * o.reps / cpu_all / 1e9);
  } catch (const qwen3::Error& e) {
    std::fprintf(stderr, "qwen3-bpf-kbench: %s\n", e.what());
    return 1;
  }
  return 0;
}
