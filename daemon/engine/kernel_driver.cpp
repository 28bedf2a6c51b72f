#include "engine/kernel_driver.h"

#include <bpf/libbpf.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "common/error.h"
#include "engine/attention_args.h"
#include "engine/bpf_kv_cache.h"
#include "engine/bpf_programs.h"
#include "engine/sampling_kernel.h"

namespace qwen3::engine {
namespace {

int on_record(void* ctx, void* data, size_t size) {
  if (size < sizeof(qn_drive_record)) return 0;
  qn_drive_record r;
  std::memcpy(&r, data, sizeof r);
  static_cast<std::vector<qn_drive_record>*>(ctx)->push_back(r);
  return 0;
}

// How long the chain may go without a record before the driver gives up on
// it (a token at the 0.6B shape takes well under a second).
constexpr auto kStall = std::chrono::seconds(60);

}  // namespace

KernelDriver::KernelDriver(BpfPrograms& progs, const ModelPlan& plan,
                           const std::function<qn_args(const MatrixPlan&)>& mat_args)
    : progs_(progs) {
  if (!progs_.drive()) throw Error("KernelDriver needs the programs loaded with the kernel driver");
  fill_plan(plan, mat_args);
  rb_ = ring_buffer__new(progs_.drive_out_fd(), on_record, &records_, nullptr);
  if (!rb_) throw Error(std::string("cannot open the kernel driver's ring buffer: ") + strerror(errno));
}

KernelDriver::~KernelDriver() {
  if (rb_) ring_buffer__free(rb_);
}

// The links in run_pass's order: embed; per layer QKV, attention, O, GATEUP,
// DOWN; the vocabulary's shares, the merge, the sample. A matrix operator has
// qn_drive_*_shares shares of bounded work; a chain runs a share in its CPU
// slot's scratch (ops_drive.h), so the rows' split does not change the
// arithmetic. Attention has one share per worker slot (its head ranges).
void KernelDriver::fill_plan(const ModelPlan& plan, const std::function<qn_args(const MatrixPlan&)>& mat_args) {
  const qn_shape& sh = progs_.layout().shape;
  const uint32_t T = sh.threads, L = sh.n_layers;
  qn_drive_link* out = progs_.drive_plan();
  uint32_t n = 0;
  auto put = [&](const qn_args& a, uint32_t family, uint32_t kind, uint32_t shares = 1, uint32_t share = 0) {
    out[n].a = a;
    out[n].family = family;
    out[n].kind = kind;
    out[n].group_first = n - share;
    out[n].group_end = n - share + shares;
    n++;
  };
  uint32_t layer = 0;  // recorded in the matrix links too (describe_link)
  auto mm = [&](uint32_t op, const MatrixPlan& mp, uint32_t norm_off, uint32_t shares) {
    const bool pairs = op == QN_OP_GATEUP;
    const uint32_t rows = pairs ? mp.rows / 2 : mp.rows;
    for (uint32_t k = 0; k < shares; k++) {
      qn_args a = mat_args(mp);
      a.op = op;
      a.norm_off = norm_off;
      a.layer = layer;
      const RowRange rr = worker_rows(rows, pairs, mp.precision, k, shares);
      a.row_begin = rr.begin;
      a.row_end = rr.end;
      const uint32_t family = op == QN_OP_O || op == QN_OP_DOWN ? QN_FAM_PROJ
                              : mp.precision == Precision::q4     ? QN_FAM_MM4
                              : mp.precision == Precision::q8a8   ? QN_FAM_VOCAB
                                                                  : QN_FAM_MM;
      put(a, family, QN_LINK_MM, shares, k);
    }
  };
  put(mat_args(plan.embed()), QN_FAM_CTL, QN_LINK_EMBED);
  for (uint32_t l = 0; l < L; l++) {
    layer = l;
    const NormOffsets& nrm = plan.norms[l];
    mm(QN_OP_QKV, plan.layer_matrix(int(l), MatrixKind::qkv), nrm.input, qn_drive_qkv_shares(&sh));
    for (uint32_t t = 0; t < T; t++) {
      qn_args a{};
      a.thread = t;
      a.layer = l;
      a.norm_off = nrm.q;
      a.norm2_off = nrm.k;
      a.head_begin = uint32_t(uint64_t(sh.n_kv_heads) * t / T);
      a.head_end = uint32_t(uint64_t(sh.n_kv_heads) * (t + 1) / T);
      put(a, QN_FAM_ATT, QN_LINK_ATT, T, t);
    }
    mm(QN_OP_O, plan.layer_matrix(int(l), MatrixKind::o), 0, qn_drive_o_shares(&sh));
    mm(QN_OP_GATEUP, plan.layer_matrix(int(l), MatrixKind::gate_up), nrm.post, qn_drive_gateup_shares(&sh));
    mm(QN_OP_DOWN, plan.layer_matrix(int(l), MatrixKind::down), 0, qn_drive_down_shares(&sh));
  }
  if (n != qn_drive_vocab_link(&sh)) throw Error("kernel driver plan: vocabulary link misplaced");
  mm(QN_OP_VOCAB, plan.lm_head(), plan.final_norm, qn_drive_vocab_shares(&sh));
  qn_args m{};
  m.op = QN_OP_TOPK_MERGE;
  put(m, QN_FAM_CTL, QN_LINK_MERGE);
  qn_args s{};
  s.op = QN_OP_SAMPLE;
  put(s, QN_FAM_CTL, QN_LINK_SAMPLE);
  if (n != qn_drive_plan_links(&sh)) throw Error("kernel driver plan: wrong number of links");
}

// The longest link, and the longest any link ran twice, in the generation
// that started at gen_ns (entries of older generations count as 0).
void KernelDriver::note_link_times(uint64_t gen_ns, KernelGenerateResult& res) const {
  const uint32_t links = qn_drive_plan_links(&progs_.layout().shape);
  const qn_drive_link_time* times = progs_.drive_link_time();
  uint32_t longest = 0, repeat = 0;
  uint64_t longest_ns = 0, repeat_ns = 0;
  for (uint32_t i = 0; i < links; i++) {
    if (times[i].gen_ns != gen_ns) continue;
    if (times[i].longest_ns > longest_ns) {
      longest_ns = times[i].longest_ns;
      longest = i;
    }
    if (times[i].second_ns > repeat_ns) {
      repeat_ns = times[i].second_ns;
      repeat = i;
    }
  }
  res.max_link_ms = double(longest_ns) / 1e6;
  res.max_link_op = describe_link(longest);
  res.repeat_link_ms = double(repeat_ns) / 1e6;
  res.repeat_link_op = describe_link(repeat);
}

// A plan link in words, for the longest-link figure.
std::string KernelDriver::describe_link(uint32_t link) const {
  const qn_shape& sh = progs_.layout().shape;
  if (link >= qn_drive_plan_links(&sh)) return "link " + std::to_string(link);
  const qn_drive_link& l = progs_.drive_plan()[link];
  if (l.kind == QN_LINK_EMBED) return "embed";
  if (l.kind == QN_LINK_MERGE) return "top-k merge";
  if (l.kind == QN_LINK_SAMPLE) return "sample";
  const std::string share = " share " + std::to_string(link - l.group_first + 1) + " of " +
                            std::to_string(l.group_end - l.group_first);
  const std::string layer = " of layer " + std::to_string(l.a.layer);
  if (l.kind == QN_LINK_ATT) return "attention" + layer + share;
  static const char* const names[] = {"?", "qkv", "gate/up", "o", "down", "vocab"};
  const std::string rows = ", rows " + std::to_string(l.a.row_begin) + ".." + std::to_string(l.a.row_end);
  return std::string(l.a.op <= QN_OP_VOCAB ? names[l.a.op] : "?") + (l.a.op == QN_OP_VOCAB ? "" : layer) + share +
         rows;
}

bool KernelDriver::fits(const KernelGenerateRequest& req) {
  return req.stop_ids.size() <= QN_DRIVE_STOP_MAX && !req.feed.empty() && req.max_tokens >= 1;
}

// The submission: the Sampler's candidates (wants) as a mode, the params in
// the kernel's fixed point, the stops.
qn_drive_submit KernelDriver::submission(const BpfKvCache& kv, const KernelGenerateRequest& req) const {
  qn_drive_submit sub{};
  sub.tag = tag_;
  sub.kv_slot = kv.slot();
  sub.kv_positions = static_cast<uint32_t>(kv.max_context());
  sub.pos = static_cast<uint32_t>(kv.positions());
  sub.feed_len = static_cast<uint32_t>(req.feed.size());
  sub.max_tokens = static_cast<uint32_t>(req.max_tokens);
  const bool penalty = req.params.penalty;
  const bool greedy = req.params.greedy;
  const bool whole = req.wants.full_logits || req.wants.top_k > QN_TOPK_MAX;
  sub.vocab_top_k = static_cast<uint32_t>(std::clamp(req.wants.top_k, 0, QN_TOPK_MAX));
  if (greedy && !penalty && !whole) sub.mode = QN_DRIVE_ARGMAX;
  else if (whole) sub.mode = QN_DRIVE_WHOLE;
  else sub.mode = QN_DRIVE_LIST;
  sub.list_k = sub.vocab_top_k;
  sub.n_stop = static_cast<uint32_t>(req.stop_ids.size());
  for (size_t i = 0; i < req.stop_ids.size(); i++) sub.stop_ids[i] = req.stop_ids[i];
  sub.draw0 = req.draw0;
  sub.params = sample_hdr(req.params, 0);
  return sub;
}

KernelGenerateResult KernelDriver::generate(BpfKvCache& kv, const KernelGenerateRequest& req,
                                            const std::function<bool(int32_t, int)>& on_token) {
  if (!fits(req) || req.feed.size() > QN_DRIVE_PROMPT_MAX)
    throw invalid_argument("kernel driver: the request does not fit a submission");
  tag_++;
  const uint32_t vocab = progs_.layout().shape.vocab;
  std::copy(req.feed.begin(), req.feed.end(), progs_.drive_prompt());
  if (req.params.penalty) {  // the history's ids, as Sampler::sample gets them
    auto* seen = reinterpret_cast<uint32_t*>(progs_.sample_buf() + qn_sample_seen_off(vocab));
    std::memset(seen, 0, size_t(qn_sample_seen_words(vocab)) * 4);
    for (int32_t id : req.history)
      if (id >= 0 && static_cast<uint32_t>(id) < vocab) seen[uint32_t(id) >> 5] |= 1u << (id & 31);
  }
  qn_drive_submit sub = submission(kv, req);
  const int start = kv.positions();
  records_.clear();
  ring_buffer__consume(rb_);  // nothing of an earlier generation is left
  records_.clear();
  progs_.drive_start(sub);
  if (sub.status != 0)
    throw Error("kernel driver: qn_drive_start refused the submission (check at bpf_ops line " +
                std::to_string(sub.status) + ")");
  // A second chain on another CPU claims shares as it gets that CPU (one
  // more bpf() call, from a thread pinned there). The first chain's CPU is
  // the one qn_drive_start ran on, not this thread's now: the kworker it
  // woke may have pushed this thread to the other CPU, and a joiner pinned
  // from there put both chains on one CPU (decode at half speed).
  std::thread joiner;
  const int here = static_cast<int>(sub.cpu);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (progs_.layout().shape.threads > 1 && cpus > 1 && here >= 0)
    joiner = std::thread([this, other = int((here + 1) % cpus)] {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(other, &set);
      if (sched_setaffinity(0, sizeof set, &set) == 0) progs_.drive_join(1);
    });
  struct Join {
    std::thread& t;
    ~Join() {
      if (t.joinable()) t.join();
    }
  } join{joiner};
  volatile qn_drive_state* st = progs_.drive_state();
  KernelGenerateResult res;
  std::optional<uint32_t> finish;
  int32_t err_status = 0;
  bool cancel_sent = false;
  auto last = std::chrono::steady_clock::now();
  size_t seen = 0;
  while (!finish) {
    ring_buffer__poll(rb_, 100);
    if (records_.size() == seen) {
      if (!st->running && ring_buffer__consume(rb_) == 0 && records_.size() == seen) {
        finish = QN_FINISH_ERROR;  // ended without its last record (the ring buffer was full)
        err_status = -1;
        break;
      }
      if (std::chrono::steady_clock::now() - last > kStall) {
        st->cancel = 1;
        throw Error("kernel driver: no token for 60 s (link " + std::to_string(st->link) + ")");
      }
      continue;
    }
    last = std::chrono::steady_clock::now();
    for (; seen < records_.size(); seen++) {
      const qn_drive_record& r = records_[seen];
      if (r.tag != sub.tag) continue;
      if (r.token >= 0 && !cancel_sent) {  // tokens past a cancel are dropped, as the user driver drops them
        res.tokens.push_back(r.token);
        if (!cancel_sent && !on_token(r.token, static_cast<int>(r.index))) {
          st->cancel = 1;  // every link checks it: the chain ends within one link
          cancel_sent = true;
        }
      }
      if (r.finish != QN_FINISH_NONE) {
        finish = r.finish;
        err_status = r.status;
        break;
      }
    }
  }
  // Every chain's last link returns before the maps are used again.
  for (int spin = 0; (st->running || st->active) && spin < 10000000; spin++) std::this_thread::yield();
  if (st->running || st->active) throw Error("kernel driver: a chain did not come to rest");
  res.links = st->links_run;
  note_link_times(st->t_start_ns, res);
  res.kernel_ms = double(st->t_end_ns - st->t_start_ns) / 1e6;
  res.busy_ms = double(st->busy_ns) / 1e6;
  for (uint64_t n : st->slot_links) res.chain_links.push_back(n);
  // Every fed token's K/V is complete up to the last chosen token's (which is
  // not fed); cancelled before any token: as before.
  const int g = static_cast<int>(res.tokens.size());
  kv.set_positions(g == 0 ? start : start + static_cast<int>(req.feed.size()) + g - 1);
  if (*finish == QN_FINISH_ERROR)
    throw Error("kernel driver: the chain stopped at plan link " + std::to_string(st->err_link) +
                " (check at bpf_ops line " + std::to_string(err_status) + ")");
  res.finish = *finish == QN_FINISH_STOP       ? KernelFinish::stop
               : *finish == QN_FINISH_LENGTH   ? KernelFinish::length
                                               : KernelFinish::cancelled;
  if (cancel_sent) res.finish = KernelFinish::cancelled;
  return res;
}

}  // namespace qwen3::engine
