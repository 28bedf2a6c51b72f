#include "engine/bpf_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "common/error.h"
#include "engine/attention_args.h"
#include "engine/bpf_kv_cache.h"
#include "engine/bpf_programs.h"
#include "engine/kernel_driver.h"
#include "engine/kernel_door.h"
#include "engine/model_plan.h"
#include "engine/pass_builder.h"
#include "engine/q4_quantizer.h"
#include "engine/rope_table.h"
#include "engine/sampling_kernel.h"
#include "engine/shape_check.h"
#include "engine/weight_format.h"
#include "common/worker_pool.h"
#include "model/model_dir.h"

namespace qwen3 {

WeightPath parse_weight_path(const std::string& s) {
  if (s == "map") return WeightPath::map;
  if (s == "arena") return WeightPath::arena;
  throw invalid_argument("unknown weight path '" + s + "' (expected map or arena)");
}

Precision parse_precision(const std::string& s) {
  if (s == "q24") return Precision::q24;
  if (s == "q8") return Precision::q8;
  if (s == "q4") return Precision::q4;
  throw invalid_argument("unknown precision '" + s + "' (expected q24, q8 or q4)");
}

const char* weight_path_name(WeightPath p) { return p == WeightPath::arena ? "arena" : "map"; }
const char* precision_name(Precision p) {
  return p == Precision::q8 ? "q8" : p == Precision::q4 ? "q4" : p == Precision::q8a8 ? "q8a8" : "q24";
}

namespace engine {
namespace {

// Numbers the vocabulary projections of every backend in the process.
uint64_t next_logits_pass() {
  static std::atomic<uint64_t> n{0};
  return ++n;
}

void release_pages(const uint8_t* data, size_t n) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t b = (reinterpret_cast<uintptr_t>(data) + page - 1) / page * page;
  uintptr_t e = (reinterpret_cast<uintptr_t>(data) + n) / page * page;
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
}

// Whether a q4 model's 4-bit matrices come rounded offline (qwen3-bpf-quantize):
// most groups of the first q4 matrix's first rows already lie on a 4-bit grid.
bool q4_rounded_offline(const ModelDir& model) {
  const TensorView& t = model.layer_tensor(0, "self_attn.q_proj.weight");
  const int64_t cols = t.cols(), rows = std::min<int64_t>(t.rows(), 8);
  std::vector<float> row(static_cast<size_t>(cols));
  int64_t groups = 0, on_grid = 0;
  for (int64_t r = 0; r < rows; r++) {
    t.to_float(row, r * cols);
    for (int64_t c0 = 0; c0 + QN_Q4_GROUP <= cols; c0 += QN_Q4_GROUP, groups++)
      on_grid += q4_on_grid(&row[static_cast<size_t>(c0)], QN_Q4_GROUP);
  }
  return groups > 0 && 2 * on_grid > groups;
}

class BpfBackend final : public BpfBackendApi {
 public:
  BpfBackend(std::shared_ptr<const ModelDir> model, const BpfEngineOptions& opts);

  const ModelConfig& config() const override { return cfg_; }
  BackendInfo info() const override;
  std::unique_ptr<KvCache> create_kv(int max_context) override;
  ForwardResult forward(KvCache& kv, std::span<const int32_t> tokens, const ForwardWants& wants) override;
  void forward_batch(std::span<BatchItem> items) override;
  BpfBackendStats stats() const override;
  void set_debug_trace(std::function<void(const BpfTracePoint&)> fn) override { trace_ = std::move(fn); }
  // In the kernel (qn_sample), holding the engine as a pass does: sample_buf
  // is shared with the passes and the kernel driver's chain. Over the logits
  // row in place while logits_buf still holds it (held_row).
  std::optional<TokenDistribution> sampling_distribution(const PositionLogits& scores, const KernelSamplingParams& params,
                                                         std::span<const int32_t> history) override {
    std::lock_guard lock(mu_);
    const EngineOwner::Hold own = hold_engine();
    return kernel_distribution(*progs_, scores, params, history, held_row(scores));
  }
  // The draw in the kernel too (qn_sample, QN_SAMPLE_DRAW).
  std::optional<int32_t> sample_token(const PositionLogits& scores, const KernelSamplingParams& params,
                                      std::span<const int32_t> history, uint64_t draw_index) override {
    std::lock_guard lock(mu_);
    const EngineOwner::Hold own = hold_engine();
    return kernel_sample_token(*progs_, scores, params, history, draw_index, held_row(scores));
  }
  // ForwardWants::sample: in the kernel, right after the pass (sample_in_pass).
  bool samples_in_pass() const override { return true; }
  // The logprobs' normalizer in the kernel too (qn_sample, QN_SAMPLE_LSE).
  std::optional<int64_t> log_normalizer_q16(const PositionLogits& scores) override {
    std::lock_guard lock(mu_);
    const EngineOwner::Hold own = hold_engine();
    return kernel_log_normalizer(*progs_, scores, held_row(scores));
  }
  std::optional<KernelGenerateResult> generate_in_kernel(KvCache& kv, const KernelGenerateRequest& req,
                                                         const std::function<bool(int32_t, int)>& on_token) override;
  KernelDoor* kernel_door() override { return kdoor_.get(); }

 private:
  void trace(const char* stage, int layer, uint32_t pos0, uint32_t npos, const int32_t* buf, uint32_t stride,
             uint32_t cols) const {
    if (!trace_) return;
    std::vector<float> v(size_t(npos) * cols);
    for (uint32_t p = 0; p < npos; p++)
      for (uint32_t c = 0; c < cols; c++) v[size_t(p) * cols + c] = buf[size_t(p) * stride + c] / 65536.0f;
    trace_({stage, layer, int(pos0), int(npos), int(cols), v.data()});
  }
  void progress(double f, const std::string& what) const {
    if (opts_.progress) opts_.progress(f, what);
  }
  void convert_weights();
  void convert_norms();
  qn_args mat_args(const MatrixPlan& mp) const;
  void matmul_op(uint32_t op, const MatrixPlan& mp, uint32_t norm_off, uint32_t npos, uint32_t mask = 0,
                 uint32_t top_k = 0);
  // What one batch item becomes once checked: its cache and where its tokens start.
  struct Sequence {
    BatchItem* item;
    BpfKvCache* kv;
    uint32_t start;
  };
  BpfKvCache& checked_cache(KvCache* kv, std::span<const int32_t> tokens) const;
  void attention_op(uint32_t layer, const Pass& pass, std::span<const Sequence> seqs);
  void run_pass(const Pass& pass, std::span<const Sequence> seqs);
  PositionLogits collect(uint32_t c, const ForwardWants& wants) const;
  PositionLogits sample_in_pass(uint32_t c, const BatchItem& item, uint32_t at);
  // The row of logits_buf that still holds the scores' whole vocabulary, or
  // nullopt: none (top-k scores), or overwritten since (a later pass, or a
  // kernel-driven chain: its start time moved). Called holding the engine.
  std::optional<uint32_t> held_row(const PositionLogits& scores) const {
    if (scores.logits_pass == 0 || scores.logits_pass != logits_pass_ || chain_start() != logits_chain_)
      return std::nullopt;
    return scores.logits_row;
  }
  uint64_t chain_start() const {
    qn_drive_state* st = progs_->drive_state();
    return st ? std::atomic_ref<uint64_t>(st->t_start_ns).load() : 0;
  }
  // The engine from kernel-started generations (engine_owner.h); free without the kernel driver.
  EngineOwner::Hold hold_engine() { return kdoor_ ? kdoor_->owner().hold() : EngineOwner::Hold(nullptr); }

  std::shared_ptr<const ModelDir> model_;
  ModelConfig cfg_;
  BpfEngineOptions opts_;
  ModelPlan plan_;
  std::unique_ptr<BpfPrograms> progs_;
  std::unique_ptr<WorkerPool> pool_;
  std::unique_ptr<KernelDriver> kdriver_;  // opts.kernel_driver
  std::unique_ptr<KernelDoor> kdoor_;      // with kdriver_: kernel-started generations; owns the engine's owner word
  std::shared_ptr<KvSlots> slots_;
  std::mutex mu_;  // one use of the engine at a time: the activation maps and sample_buf are shared
  // The latest vocabulary projection's number (next_logits_pass: unique in
  // the process, so no other backend's scores match) and the kernel
  // driver's last chain start then: what held_row checks.
  uint64_t logits_pass_ = 0;
  uint64_t logits_chain_ = 0;
  double load_seconds_ = 0;
  std::vector<std::string> load_warnings_;  // BackendInfo::load_warnings
  std::function<void(const BpfTracePoint&)> trace_;
};

BpfBackend::BpfBackend(std::shared_ptr<const ModelDir> model, const BpfEngineOptions& opts)
    : model_(std::move(model)), cfg_(model_->config()), opts_(opts) {
  auto t0 = std::chrono::steady_clock::now();
  plan_ = plan_for(cfg_, opts, opts.precision);
  // Refused here, with the figures, rather than by the kernel in map creation.
  const MemoryLimit limit = memory_limit_for(opts);
  check_memory_fit(memory_need(cfg_, plan_, opts, limit), limit);
  // Opening the model validated (and so paged in) every tensor; the weight map
  // is resident from its creation on. Drop the file pages first so the peak
  // is the converted weights plus one source matrix at a time.
  for (const auto& name : model_->tensor_names()) {
    const TensorView& t = model_->tensor(name);
    release_pages(t.data, t.nbytes);
  }
  progress(0.0, "loading BPF programs");
  progs_ = std::make_unique<BpfPrograms>(plan_.layout);
  if (opts.verbose)
    for (auto& st : progs_->stats())
      std::fprintf(stderr, "bpf program %s: %u instructions processed by the verifier\n", st.name.c_str(),
                   st.verified_insns);
  pool_ = std::make_unique<WorkerPool>(opts.threads);
  slots_ = std::make_shared<KvSlots>(progs_->kv_outer_fd(), progs_->layout().shape);
  convert_norms();
  fill_rope_table(*progs_, *pool_);
  convert_weights();
  if (opts.precision == Precision::q4 && !q4_rounded_offline(*model_))
    load_warnings_.push_back(
        "precision = q4 on weights not rounded offline: rounded at load they miss the 98% agreement bar on the "
        "shipped model (96.6%); make a calibrated q4 checkpoint with qwen3-bpf-quantize (docs/numerics.md)");
  if (opts.kernel_driver)
    kdriver_ = std::make_unique<KernelDriver>(*progs_, plan_, [this](const MatrixPlan& mp) { return mat_args(mp); });
  if (opts.kernel_driver) kdoor_ = std::make_unique<KernelDoor>(*progs_, [this](int n) { return create_kv(n); });
  load_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress(1.0, "weights resident");
}

void BpfBackend::convert_norms() {
  auto put = [&](const TensorView& t, uint32_t off, uint32_t n) {
    if (t.numel() != n)
      throw invalid_argument("tensor " + t.name + " in " + t.file + " has " + std::to_string(t.numel()) +
                             " elements, expected " + std::to_string(n));
    std::vector<float> v(n);
    t.to_float(v);
    for (uint32_t i = 0; i < n; i++) progs_->norms()[off + i] = to_fixed(v[i], QN_NORM_FRAC, t.name.c_str());
  };
  const uint32_t h = cfg_.hidden_size, hd = cfg_.head_dim;
  for (int l = 0; l < cfg_.num_hidden_layers; l++) {
    const NormOffsets& n = plan_.norms[l];
    put(model_->layer_tensor(l, "input_layernorm.weight"), n.input, h);
    put(model_->layer_tensor(l, "post_attention_layernorm.weight"), n.post, h);
    put(model_->layer_tensor(l, "self_attn.q_norm.weight"), n.q, hd);
    put(model_->layer_tensor(l, "self_attn.k_norm.weight"), n.k, hd);
  }
  put(model_->tensor("model.norm.weight"), plan_.final_norm, h);
}

// Converts every matrix straight into the mmapped weight map / arena, rows
// split over the worker threads; no intermediate copy of a whole tensor.
void BpfBackend::convert_weights() {
  uint64_t total = 0, done = 0;
  for (auto& mp : plan_.matrices) total += uint64_t(mp.rows) * mp.cols;
  for (auto& mp : plan_.matrices) {
    const Precision prec = mp.precision;  // a q4 model keeps some matrices at q8
    // (tensor, first destination row, interleave stride, interleave phase)
    struct Source {
      const TensorView* t;
      uint32_t dst0;
      uint32_t stride;
    };
    std::vector<Source> src;
    auto lt = [&](const char* s) { return &model_->layer_tensor(mp.layer, s); };
    switch (mp.kind) {
      case MatrixKind::qkv:
        src = {{lt("self_attn.q_proj.weight"), 0, 1},
               {lt("self_attn.k_proj.weight"), uint32_t(cfg_.q_dim()), 1},
               {lt("self_attn.v_proj.weight"), uint32_t(cfg_.q_dim() + cfg_.kv_dim()), 1}};
        break;
      case MatrixKind::o: src = {{lt("self_attn.o_proj.weight"), 0, 1}}; break;
      case MatrixKind::gate_up:  // gate row j -> 2j, up row j -> 2j+1
        src = {{lt("mlp.gate_proj.weight"), 0, 2}, {lt("mlp.up_proj.weight"), 1, 2}};
        break;
      case MatrixKind::down: src = {{lt("mlp.down_proj.weight"), 0, 1}}; break;
      case MatrixKind::embed: src = {{&model_->embed_tokens(), 0, 1}}; break;
      case MatrixKind::lm_head: src = {{&model_->lm_head(), 0, 1}}; break;
    }
    uint32_t covered = 0;
    for (auto& s : src) {
      if (s.t->cols() != mp.cols)
        throw invalid_argument("tensor " + s.t->name + " in " + s.t->file + " has " + std::to_string(s.t->cols()) +
                               " columns, expected " + std::to_string(mp.cols));
      covered += static_cast<uint32_t>(s.t->rows());
    }
    if (covered != mp.rows)
      throw invalid_argument("tensors of " + std::string(src[0].t->name) + " have " + std::to_string(covered) +
                             " rows in total, expected " + std::to_string(mp.rows));
    // First pass: per-column maxima pick the outlier columns (q8, q4); the largest
    // remaining |w| decides the matrix's fraction bits.
    std::vector<std::vector<float>> col_max(pool_->size(), std::vector<float>(mp.cols, 0.0f));
    pool_->run([&](int t) {
      std::vector<float> row(mp.cols);
      const int T = pool_->size();
      for (auto& s : src) {
        const uint32_t rows = static_cast<uint32_t>(s.t->rows());
        const uint32_t r0 = uint32_t(uint64_t(rows) * t / T), r1 = uint32_t(uint64_t(rows) * (t + 1) / T);
        for (uint32_t r = r0; r < r1; r++) {
          s.t->to_float(row, int64_t(r) * mp.cols);
          for (uint32_t c = 0; c < mp.cols; c++) col_max[t][c] = std::max(col_max[t][c], std::fabs(row[c]));
        }
      }
    });
    for (size_t t = 1; t < col_max.size(); t++)
      for (uint32_t c = 0; c < mp.cols; c++) col_max[0][c] = std::max(col_max[0][c], col_max[t][c]);
    std::vector<uint32_t> ocols =
        prec != Precision::q24 ? pick_outlier_columns(col_max[0]) : std::vector<uint32_t>{};
    double max_abs = 0;
    for (uint32_t c = 0; c < mp.cols; c++)
      if (std::find(ocols.begin(), ocols.end(), c) == ocols.end()) max_abs = std::max(max_abs, double(col_max[0][c]));
    const int frac = weight_frac_for(max_abs, prec, src[0].t->name.c_str());
    mp.m.wfrac = static_cast<uint32_t>(frac);
    for (int k = 0; k < QN_OUT_COLS; k++) mp.m.ocol[k] = k < int(ocols.size()) ? ocols[k] : 0;
    std::vector<uint64_t> max_l1(pool_->size(), 0);
    pool_->run([&](int t) {
      std::vector<float> row(mp.cols);
      const int T = pool_->size();
      for (auto& s : src) {
        const uint32_t rows = static_cast<uint32_t>(s.t->rows());
        const uint32_t r0 = uint32_t(uint64_t(rows) * t / T), r1 = uint32_t(uint64_t(rows) * (t + 1) / T);
        for (uint32_t r = r0; r < r1; r++) {
          s.t->to_float(row, int64_t(r) * mp.cols);
          uint32_t dst = s.dst0 + r * s.stride;
          uint64_t l1 =
              convert_row_into(progs_->weights(), mp, dst, row, frac, s.t->name.c_str(), ocols);
          max_l1[t] = std::max(max_l1[t], l1);
        }
      }
    });
    mp.m.act_bits = act_bits_for(*std::max_element(max_l1.begin(), max_l1.end()), prec);
    // The source pages are no longer needed by the engine: drop them from this
    // process's resident set so peak RAM stays near the converted bytes plus
    // one matrix (they are re-read from the page cache if anyone reads them).
    for (auto& s : src) release_pages(s.t->data, s.t->nbytes);
    done += uint64_t(mp.rows) * mp.cols;
    progress(0.02 + 0.98 * double(done) / double(total), "converting weights");
  }
}

qn_args BpfBackend::mat_args(const MatrixPlan& mp) const {
  qn_args a{};
  a.mat = mp.m;
  if (plan_.layout.arena) a.mat.arena_off = reinterpret_cast<uintptr_t>(progs_->weights()) + mp.offset;
  return a;
}

void BpfBackend::matmul_op(uint32_t op, const MatrixPlan& mp, uint32_t norm_off, uint32_t npos, uint32_t mask,
                           uint32_t top_k) {
  const uint32_t rows = op == QN_OP_GATEUP ? mp.rows / 2 : mp.rows;
  const qn_args base = [&] {
    qn_args a = mat_args(mp);
    a.op = op;
    a.npos = npos;
    a.norm_off = norm_off;
    a.pos_mask = mask;
    a.top_k = top_k;
    return a;
  }();
  pool_->run([&](int t) {
    const int T = pool_->size();
    qn_args a = base;
    a.thread = static_cast<uint32_t>(t);
    const RowRange rr = worker_rows(rows, op == QN_OP_GATEUP, mp.precision, uint32_t(t), uint32_t(T));
    a.row_begin = rr.begin;
    a.row_end = rr.end;
    if (a.row_begin < a.row_end) {
      progs_->matmul(a);
    } else if (op == QN_OP_VOCAB) {  // no rows: an empty list for the merge, not the last pass's
      for (uint32_t c = 0; c < QN_PMAX; c++) *progs_->topk(a.thread, c) = qn_topk_slot{-1, 0, 0, 0, {}};
    }
  });
  if (op == QN_OP_VOCAB) {
    qn_args m{};
    m.op = QN_OP_TOPK_MERGE;
    m.npos = static_cast<uint32_t>(__builtin_popcount(mask));
    m.top_k = top_k;
    progs_->topk_merge(m);
  }
}

// Each worker runs its kv heads for every sequence's slice of the pass, one
// call per slice: a slice names its session's cache and absolute positions.
void BpfBackend::attention_op(uint32_t layer, const Pass& pass, std::span<const Sequence> seqs) {
  const uint32_t heads = cfg_.num_key_value_heads;
  pool_->run([&](int t) {
    const int T = pool_->size();
    const uint32_t head_begin = uint32_t(uint64_t(heads) * t / T);
    const uint32_t head_end = uint32_t(uint64_t(heads) * (t + 1) / T);
    if (head_begin >= head_end) return;
    for (const PassSlice& s : pass.slices) {
      const AttentionSlice slice{layer, seqs[s.item].start + s.token_off, s.npos, s.pass_off};
      qn_args a = attention_args(plan_, *seqs[s.item].kv, slice, head_begin, head_end, static_cast<uint32_t>(t));
      progs_->attention(a);
    }
  });
}

PositionLogits BpfBackend::collect(uint32_t c, const ForwardWants& wants) const {
  PositionLogits pl;
  // argmax and top-k as merged over the workers by qn_topk_merge (sorted,
  // best first; a pass keeps the largest k any of its items asked for). The
  // kernel's Q16 logits go along exactly (top_k_q16, full_q16): the floats
  // are exact only below |logit| 256, and sampling (qn_sample) reads these.
  const qn_topk_slot* s = progs_->merged_topk(c);
  pl.argmax = s->argmax_id;
  const int32_t* logits = progs_->logits() + size_t(c) * cfg_.vocab_size;
  const bool wide = wants.top_k > QN_TOPK_MAX;  // more than the kernel selects
  if (wide) {
    // The list the caller reports (Forward's top scores): ordered from the
    // kernel's logits by a sort, no arithmetic. Sampling does not use it: the
    // candidates are the whole vocabulary and qn_sample makes the cut.
    std::vector<std::pair<int32_t, int32_t>> cand;  // (logit, id)
    cand.reserve(cfg_.vocab_size);
    for (int32_t i = 0; i < cfg_.vocab_size; i++) cand.push_back({logits[i], i});
    const size_t k = std::min<size_t>(wants.top_k, cand.size());
    std::partial_sort(cand.begin(), cand.begin() + k, cand.end(), [](auto& a, auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    pl.top_k.reserve(k);
    pl.top_k_q16.reserve(k);
    for (size_t i = 0; i < k; i++) {
      pl.top_k.push_back({cand[i].second, cand[i].first / 65536.0f});
      pl.top_k_q16.push_back(cand[i].first);
    }
  } else {
    const int k = std::min(wants.top_k, std::min<int>(s->count, QN_TOPK_MAX));
    pl.top_k.reserve(std::max(k, 0));
    pl.top_k_q16.reserve(std::max(k, 0));
    for (int i = 0; i < k; i++) {
      pl.top_k.push_back({s->e[i].id, s->e[i].logit / 65536.0f});
      pl.top_k_q16.push_back(s->e[i].logit);
    }
  }
  // The whole vocabulary stays where it is (held_row); only floats asked
  // for go out, with their exact Q16 values for when the row is overwritten.
  if (wants.full_logits || wide) {
    pl.logits_pass = logits_pass_;
    pl.logits_row = c;
  }
  if (wants.full_logits) {
    pl.full_q16.assign(logits, logits + cfg_.vocab_size);
    pl.full.resize(cfg_.vocab_size);
    for (int32_t i = 0; i < cfg_.vocab_size; i++) pl.full[i] = logits[i] / 65536.0f;
  }
  return pl;
}

// Logits row c's report for fed position `at` of `item`, and with
// ForwardWants::sample its token drawn in the kernel while the row is still
// in logits_buf, over the candidates sample_token would take from collect's
// scores: the whole vocabulary (full logits asked, or a top-k beyond the
// kernel's list: the cut is qn_sample's) straight from the row
// (kernel_sample_row), else the kernel's top-k list. With all_positions
// (PassSampling: a draft), position `at` at draw index + at with the history
// and the fed tokens 1..at, only while every earlier position drew the fed
// token after it. Scores the caller does not read are left out; declined (a
// vocabulary above QN_SAMPLE_MAX): the scores as asked, for the caller's Sampler.
PositionLogits BpfBackend::sample_in_pass(uint32_t c, const BatchItem& item, uint32_t at) {
  const ForwardWants& wants = item.wants;
  if (!wants.sample) return collect(c, wants);
  const PassSampling& ps = *wants.sample;
  const bool whole = wants.full_logits || wants.top_k > QN_TOPK_MAX;
  ForwardWants own = wants;
  if (ps.scores_unused) {  // what the draw needs: the argmax, or the top-k list
    own.full_logits = false;
    if (whole) own.top_k = 1;
  }
  if (wants.all_positions) {  // the draft's earlier positions, in order: each drew the fed token after it?
    const std::vector<PositionLogits>& before = item.result->positions;
    if (before.size() != at) return collect(c, wants);
    for (uint32_t j = 0; j < at; j++) {
      if (before[j].sampled < 0) return collect(c, wants);  // declined there: the scores as asked, for the Sampler
      if (before[j].sampled != item.tokens[j + 1]) return collect(c, own);  // rejected: the caller reads none of it
    }
  }
  std::vector<int32_t> seen;  // the penalty's ids at a draft position: the history and the drafts before it
  std::span<const int32_t> history = ps.history;
  if (wants.all_positions && at > 0 && ps.params.penalty) {
    seen.assign(ps.history.begin(), ps.history.end());
    seen.insert(seen.end(), item.tokens.begin() + 1, item.tokens.begin() + at + 1);
    history = seen;
  }
  const uint64_t draw = ps.draw_index + (wants.all_positions ? at : 0);
  PositionLogits pl = collect(c, own);
  const std::optional<int32_t> id = whole ? kernel_sample_row(*progs_, c, ps.params, history, draw)
                                         : kernel_sample_token(*progs_, pl, ps.params, history, draw);
  if (!id) return collect(c, wants);
  pl.sampled = *id;
  pl.sampled_draw = draw;
  return pl;
}

// One pass: the positions of every slice embedded together, each weight
// matrix run once over all of them, attention per slice, and the vocabulary
// projection only for the positions whose sequence wants logits there.
void BpfBackend::run_pass(const Pass& pass, std::span<const Sequence> seqs) {
  const uint32_t npos = pass.npos;
  qn_args e = mat_args(plan_.embed());
  e.npos = npos;
  uint32_t mask = 0, top_k = 0;
  for (const PassSlice& s : pass.slices) {
    const BatchItem& it = *seqs[s.item].item;
    for (uint32_t k = 0; k < s.npos; k++) e.tokens[s.pass_off + k] = it.tokens[s.token_off + k];
    uint32_t bits = 0;
    if (it.wants.all_positions) bits = ((1u << s.npos) - 1) << s.pass_off;
    else if (s.token_off + s.npos == it.tokens.size()) bits = 1u << (s.pass_off + s.npos - 1);
    // The kernel keeps the best k of each position; a larger k than an item
    // asked for holds its best k as a prefix, so the pass uses the largest.
    if (bits) top_k = std::max(top_k, static_cast<uint32_t>(std::min(it.wants.top_k, QN_TOPK_MAX)));
    mask |= bits;
  }
  progs_->embed(e);
  const ProgramLayout& L = plan_.layout;
  const uint32_t H = cfg_.hidden_size;
  const uint32_t pos0 = seqs[pass.slices[0].item].start + pass.slices[0].token_off;  // for the trace only
  trace("embedding", -1, pos0, npos, progs_->resid(), L.hid_pad, H);
  for (int l = 0; l < cfg_.num_hidden_layers; l++) {
    const NormOffsets& n = plan_.norms[l];
    matmul_op(QN_OP_QKV, plan_.layer_matrix(l, MatrixKind::qkv), n.input, npos);
    trace("qkv", l, pos0, npos, progs_->qkv(), L.qkv_pad, L.shape.qkv_dim);
    attention_op(static_cast<uint32_t>(l), pass, seqs);
    trace("attention", l, pos0, npos, progs_->attn(), L.qd_pad, L.shape.q_dim);
    matmul_op(QN_OP_O, plan_.layer_matrix(l, MatrixKind::o), 0, npos);
    trace("attn_residual", l, pos0, npos, progs_->resid(), L.hid_pad, H);
    matmul_op(QN_OP_GATEUP, plan_.layer_matrix(l, MatrixKind::gate_up), n.post, npos);
    trace("act", l, pos0, npos, progs_->mlp(), L.inter_pad, L.shape.inter);
    matmul_op(QN_OP_DOWN, plan_.layer_matrix(l, MatrixKind::down), 0, npos);
    trace("residual", l, pos0, npos, progs_->resid(), L.hid_pad, H);
  }
  if (mask == 0) return;
  logits_pass_ = next_logits_pass();  // the rows any earlier scores name are overwritten from here on
  logits_chain_ = chain_start();
  matmul_op(QN_OP_VOCAB, plan_.lm_head(), plan_.final_norm, npos, mask, top_k);
  uint32_t c = 0;  // logits rows are compact: one per set bit of the mask, in pass order
  for (const PassSlice& s : pass.slices) {
    BatchItem& it = *seqs[s.item].item;
    for (uint32_t p = s.pass_off; p < s.pass_off + s.npos; p++)
      if (mask >> p & 1) it.result->positions.push_back(sample_in_pass(c++, it, s.token_off + (p - s.pass_off)));
  }
}

BpfKvCache& BpfBackend::checked_cache(KvCache* kv, std::span<const int32_t> tokens) const {
  auto* cache = dynamic_cast<BpfKvCache*>(kv);
  if (!cache || !cache->belongs_to(slots_.get()))
    throw invalid_argument("KV cache was not created by this BPF backend");
  if (tokens.empty()) throw invalid_argument("forward needs at least one token");
  for (int32_t t : tokens)
    if (t < 0 || t >= cfg_.vocab_size)
      throw invalid_argument("token id " + std::to_string(t) + " is outside the vocabulary (size " +
                             std::to_string(cfg_.vocab_size) + ")");
  const int start = cache->positions();
  if (start + static_cast<int64_t>(tokens.size()) > cache->max_context())
    throw invalid_argument("context overflow: " + std::to_string(start) + " cached + " +
                           std::to_string(tokens.size()) + " new tokens exceed the session's " +
                           std::to_string(cache->max_context()) + " positions");
  return *cache;
}

ForwardResult BpfBackend::forward(KvCache& kv, std::span<const int32_t> tokens, const ForwardWants& wants) {
  ForwardResult out;
  BatchItem item{&kv, tokens, wants, &out};
  forward_batch(std::span<BatchItem>(&item, 1));
  return out;
}

// Every item is checked before anything runs, so a bad item throws with all
// caches untouched; a failure inside a pass rolls every cache back to where
// it was (the K/V entries written past it are overwritten when those
// positions are fed again).
void BpfBackend::forward_batch(std::span<BatchItem> items) {
  std::vector<Sequence> seqs;
  seqs.reserve(items.size());
  for (size_t i = 0; i < items.size(); i++) {
    if (!items[i].result) throw invalid_argument("batch item " + std::to_string(i) + " has no result to fill");
    BpfKvCache& kv = checked_cache(items[i].kv, items[i].tokens);
    for (const Sequence& s : seqs)
      if (s.kv == &kv) {
        // The same cache twice: the later item must see the earlier one's
        // K/V, so this batch runs item after item.
        for (auto& it : items) *it.result = forward(*it.kv, it.tokens, it.wants);
        return;
      }
    seqs.push_back({&items[i], &kv, 0});
  }
  if (seqs.empty()) return;
  std::vector<uint32_t> lengths;
  for (const Sequence& s : seqs) lengths.push_back(static_cast<uint32_t>(s.item->tokens.size()));
  const std::vector<Pass> passes = pack_passes(lengths, QN_PMAX);
  std::lock_guard lock(mu_);
  const EngineOwner::Hold own = hold_engine();
  for (Sequence& s : seqs) {
    s.start = static_cast<uint32_t>(s.kv->positions());
    s.item->result->positions.clear();
  }
  try {
    for (const Pass& pass : passes) run_pass(pass, seqs);
  } catch (...) {
    for (Sequence& s : seqs) {
      s.kv->set_positions(static_cast<int>(s.start));
      s.item->result->positions.clear();
    }
    throw;
  }
  for (Sequence& s : seqs) s.kv->set_positions(static_cast<int>(s.start + s.item->tokens.size()));
}

// The feed's head beyond one submission goes through a user-driven forward
// first; the rest, and every chosen token, through the kernel's chain under
// the engine's lock (it uses the activation maps and sample_buf).
std::optional<KernelGenerateResult> BpfBackend::generate_in_kernel(KvCache& kv, const KernelGenerateRequest& req,
                                                                   const std::function<bool(int32_t, int)>& on_token) {
  if (!kdriver_ || !KernelDriver::fits(req)) return std::nullopt;
  BpfKvCache& cache = checked_cache(&kv, req.feed);
  for (int32_t t : req.stop_ids)
    if (t < 0 || t >= cfg_.vocab_size) throw invalid_argument("stop id " + std::to_string(t) + " is outside the vocabulary");
  KernelGenerateRequest rest = req;
  if (req.feed.size() > QN_DRIVE_PROMPT_MAX) {
    const size_t head = req.feed.size() - QN_DRIVE_PROMPT_MAX;
    forward(kv, req.feed.first(head), ForwardWants{});
    rest.feed = req.feed.subspan(head);
  }
  std::lock_guard lock(mu_);
  const EngineOwner::Hold own = hold_engine();
  logits_pass_ = 0;  // the chain's passes overwrite logits_buf
  return kdriver_->generate(cache, rest, on_token);
}

std::unique_ptr<KvCache> BpfBackend::create_kv(int max_context) {
  if (max_context <= 0) throw invalid_argument("max_context must be positive");
  if (static_cast<uint32_t>(max_context) > plan_.layout.shape.max_ctx)
    throw resource_exhausted("max_context " + std::to_string(max_context) + " exceeds the engine's limit of " +
                             std::to_string(plan_.layout.shape.max_ctx) + " positions");
  return std::make_unique<BpfKvCache>(slots_, max_context);
}

BackendInfo BpfBackend::info() const {
  BackendInfo i;
  i.name = "bpf";
  i.weight_path = weight_path_name(opts_.weight_path);
  i.precision = precision_name(opts_.precision);
  i.weight_bytes = plan_.weight_bytes;
  i.bpf_programs = progs_->program_count();
  i.bpf_maps = progs_->map_count();
  i.load_warnings = load_warnings_;
  return i;
}

BpfBackendStats BpfBackend::stats() const {
  BpfBackendStats s;
  s.bpf_calls = progs_->calls();
  s.weight_bytes = plan_.weight_bytes;
  s.load_seconds = load_seconds_;
  s.buffer_bytes = engine::buffer_bytes(plan_.layout);
  for (auto& p : progs_->stats()) s.programs.push_back({p.name, p.verified_insns});
  return s;
}

}  // namespace
}  // namespace engine

std::unique_ptr<Backend> make_bpf_backend(std::shared_ptr<const ModelDir> model, const BpfEngineOptions& options) {
  if (!model) throw invalid_argument("make_bpf_backend needs a model");
  return std::make_unique<engine::BpfBackend>(std::move(model), options);
}

}  // namespace qwen3
