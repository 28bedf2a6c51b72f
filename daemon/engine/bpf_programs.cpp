#include "engine/bpf_programs.h"

#include "kclient_abi.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "common/error.h"
#include "engine/arena_probe.h"
#include "engine/verifier_log.h"

// The generated skeletons name kernel integer types in their .rodata struct.
typedef uint32_t u32;
typedef uint64_t u64;
#include "forward_arena.skel.h"
#include "forward_map.skel.h"

namespace qwen3::engine {
namespace {

size_t page_round(size_t v) {
  size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (v + page - 1) / page * page;
}

// libbpf reports verifier logs through its print callback; while a load is in
// progress we keep what it says so a failure can quote the log's tail.
std::mutex g_log_mutex;
std::string* g_log_sink = nullptr;

int capture_print(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  if (!g_log_sink) return 0;
  va_list copy;
  va_copy(copy, args);
  int n = vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  if (n <= 0) return 0;
  std::string buf(static_cast<size_t>(n) + 1, '\0');
  vsnprintf(buf.data(), buf.size(), fmt, args);
  buf.resize(static_cast<size_t>(n));
  g_log_sink->append(buf);
  return 0;
}

// What differs between the two objects, so the loader has one path.
template <typename Skel>
struct SkelTraits;
template <>
struct SkelTraits<forward_map> {
  static constexpr const char* name = "forward_map";
  static constexpr bool arena = false;
  static forward_map* open() { return forward_map__open(); }
  static int load(forward_map* s) { return forward_map__load(s); }
  static void destroy(void* s) { forward_map__destroy(static_cast<forward_map*>(s)); }
  static bpf_map* weights(forward_map* s) { return s->maps.weights_map; }
};
template <>
struct SkelTraits<forward_arena> {
  static constexpr const char* name = "forward_arena";
  static constexpr bool arena = true;
  static forward_arena* open() { return forward_arena__open(); }
  static int load(forward_arena* s) { return forward_arena__load(s); }
  static void destroy(void* s) { forward_arena__destroy(static_cast<forward_arena*>(s)); }
  static bpf_map* weights(forward_arena* s) { return s->maps.weights_arena; }
};

// Every map's value size and entries (bpf_ops/layout.h) and the .rodata shape.
template <typename Skel>
void configure(Skel* s, const ProgramLayout& l) {
  const qn_shape& sh = l.shape;
  s->rodata->SHAPE = sh;
  s->rodata->HID_PAD = l.hid_pad;
  s->rodata->QKV_PAD = l.qkv_pad;
  s->rodata->QD_PAD = l.qd_pad;
  s->rodata->INTER_PAD = l.inter_pad;
  s->rodata->IN_PAD = l.in_pad;
  s->rodata->ROPE_POSITIONS = l.rope_positions;
  s->rodata->ATT_GROUP = sh.n_heads / sh.n_kv_heads;
  auto set = [](bpf_map* m, uint64_t value, uint32_t entries, const char* what) {
    if (value > UINT32_MAX || bpf_map__set_value_size(m, static_cast<uint32_t>(value)) ||
        bpf_map__set_max_entries(m, entries))
      throw Error(std::string("cannot size BPF map ") + what);
  };
  set(s->maps.resid_buf, qn_act_bytes(l.hid_pad), 1, "resid_buf");
  set(s->maps.qkv_buf, qn_act_bytes(l.qkv_pad), 1, "qkv_buf");
  set(s->maps.attn_buf, qn_act_bytes(l.qd_pad), 1, "attn_buf");
  set(s->maps.mlp_buf, qn_act_bytes(l.inter_pad), 1, "mlp_buf");
  set(s->maps.xq_buf, xq_value_bytes(l), sh.threads, "xq_buf");
  set(s->maps.att_buf, att_value_bytes(l), sh.threads, "att_buf");
  set(s->maps.acc_buf, bpf_map__value_size(s->maps.acc_buf), sh.threads, "acc_buf");
  set(s->maps.logits_buf, qn_logits_bytes(sh.vocab), 1, "logits_buf");
  set(s->maps.topk_buf, qn_round8(sizeof(qn_topk_slot)), qn_topk_entries(sh.threads), "topk_buf");
  set(s->maps.norms_buf, qn_norms_bytes(sh.norms_len), 1, "norms_buf");
  set(s->maps.rope_buf, qn_rope_bytes(l.rope_positions, sh.head_dim), 1, "rope_buf");
  set(s->maps.sample_buf, qn_sample_bytes(sh.vocab), 1, "sample_buf");
  if constexpr (SkelTraits<Skel>::arena) {
    uint64_t pages = page_round(l.weight_bytes) / static_cast<size_t>(sysconf(_SC_PAGESIZE));
    if (pages == 0) pages = 1;
    if (pages > (1u << 20)) throw resource_exhausted("weights exceed the 4 GiB arena limit");
    if (bpf_map__set_max_entries(s->maps.weights_arena, static_cast<uint32_t>(pages)))
      throw Error("cannot size the weights arena");
  } else {
    if (bpf_map__set_max_entries(s->maps.weights_map, l.weight_entries))
      throw Error("cannot size the weights map");
  }
  // The packed prefill programs exist for q8 and q4 models (whose down and
  // vocabulary matrices are q8); q24 skips their verification.
  const bool packed = sh.precision != QN_PREC_Q24;
  bpf_program__set_autoload(s->progs.qn_matmul_pre, packed);
  bpf_program__set_autoload(s->progs.qn_matmul_proj_pre, packed);
  // The kernel driver's programs only when asked for: they verify the
  // operators a second time (as wq callbacks), about as long again.
  const uint32_t links = qn_drive_plan_links(&sh);
  s->rodata->DRIVE_LINKS = links;
  s->rodata->DRIVE_VOCAB = qn_drive_vocab_link(&sh);
  set(s->maps.drive_plan, sizeof(qn_drive_link), l.drive ? links : 1, "drive_plan");
  set(s->maps.drive_link_time, sizeof(qn_drive_link_time), l.drive ? links : 1, "drive_link_time");
  for (bpf_program* p : {s->progs.qn_drive_start, s->progs.qn_drive_join, s->progs.qn_drive_arm_ctl, s->progs.qn_drive_arm_mm,
                         s->progs.qn_drive_arm_proj, s->progs.qn_drive_arm_att, s->progs.qn_drive_arm_mm4, s->progs.qn_drive_arm_vocab,
                         s->progs.qn_kdoor_arm, s->progs.qn_kdoor_ring})
    bpf_program__set_autoload(p, l.drive);
  set(s->maps.kd_text, sizeof(qk_kd_text), l.drive ? sh.vocab : 1, "kd_text");  // kernel-started generations' text
}

// The outer KV map's template: libbpf takes an existing map as the inner map
// definition, which carries the model's value size (one block of records, layout.h).
class KvTemplate {
 public:
  explicit KvTemplate(const qn_shape& sh) {
    LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_INNER_MAP);
    fd_ = bpf_map_create(BPF_MAP_TYPE_ARRAY, "qwen3_kv_tmpl", 4, sh.kv_entry_bytes, 1, &opts);
    if (fd_ < 0) throw Error(std::string("cannot create the KV template map: ") + strerror(errno));
  }
  ~KvTemplate() { close(fd_); }
  KvTemplate(const KvTemplate&) = delete;
  KvTemplate& operator=(const KvTemplate&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

// QWEN3_BPF_VERIFIER_DUMP=<dir>: full (level 2) verifier logs per program,
// for working on a program the verifier rejects; the buffers live for one load.
class VerifierDump {
 public:
  // QWEN3_BPF_VERIFIER_DUMP_PROGRAM=<name> logs that program alone, in the
  // largest buffer the kernel takes (1 GiB - 1; the log keeps its last part).
  explicit VerifierDump(bpf_object* obj) : obj_(obj), dir_(getenv("QWEN3_BPF_VERIFIER_DUMP")) {
    if (!dir_) return;
    const char* only = getenv("QWEN3_BPF_VERIFIER_DUMP_PROGRAM");
    bpf_program* p;
    bpf_object__for_each_program(p, obj_) {
      if (!bpf_program__autoload(p)) continue;
      if (only && strcmp(bpf_program__name(p), only) != 0) continue;
      bufs_.emplace_back(only ? (size_t(1) << 30) - 1 : size_t(1) << 29);
      bpf_program__set_log_level(p, 2);
      bpf_program__set_log_buf(p, bufs_.back().data(), bufs_.back().size());
    }
  }
  // Writes <dir>/<program>.log for every program (after the load, failed or not).
  void write() const {
    if (!dir_) return;
    bpf_program* p;
    bpf_object__for_each_program(p, obj_) {
      size_t n = 0;
      const char* log = bpf_program__log_buf(p, &n);
      if (!log) continue;
      std::string path = std::string(dir_) + "/" + bpf_program__name(p) + ".log";
      if (FILE* f = fopen(path.c_str(), "w")) {
        fwrite(log, 1, strnlen(log, n), f);
        fclose(f);
      }
    }
  }

 private:
  bpf_object* obj_;
  const char* dir_;
  std::vector<std::vector<char>> bufs_;
};

}  // namespace

size_t xq_value_bytes(const ProgramLayout& l) { return qn_xq_bytes(l.in_pad); }

size_t att_value_bytes(const ProgramLayout& l) {
  const qn_shape& s = l.shape;
  return qn_att_bytes(s.n_heads / s.n_kv_heads, s.max_ctx, s.head_dim);
}

uint64_t buffer_bytes(const ProgramLayout& l) {
  const qn_shape& s = l.shape;
  uint64_t b = qn_act_bytes(l.hid_pad) + qn_act_bytes(l.qkv_pad) + qn_act_bytes(l.qd_pad) + qn_act_bytes(l.inter_pad) +
               qn_logits_bytes(s.vocab) + uint64_t(s.threads) * (xq_value_bytes(l) + att_value_bytes(l)) +
               uint64_t(qn_topk_entries(s.threads)) * qn_round8(sizeof(qn_topk_slot)) +
               qn_rope_bytes(l.rope_positions, s.head_dim) + qn_norms_bytes(s.norms_len) + qn_sample_bytes(s.vocab);
  if (l.drive)
    b += uint64_t(qn_drive_plan_links(&s)) * (sizeof(qn_drive_link) + sizeof(qn_drive_link_time)) +
         uint64_t(s.vocab) * sizeof(qk_kd_text);
  return b;
}

uint64_t weight_map_bytes(const ProgramLayout& l) {
  if (!l.arena) return uint64_t(l.weight_entries) * QN_WENTRY_BYTES;
  return page_round(l.weight_bytes);
}

BpfPrograms::BpfPrograms(const ProgramLayout& layout)
    : layout_(layout), q8_(layout.shape.precision != QN_PREC_Q24) {
  const uint32_t threads = layout.shape.threads;
  if (threads == 0 || threads > QN_THREADS_LIMIT)
    throw invalid_argument("BPF programs need 1 to " + std::to_string(QN_THREADS_LIMIT) + " worker threads");
  if (layout.arena && !arena_refusal().empty())
    throw failed_precondition("weight_path = arena: this kernel refuses BPF arena maps (" + arena_refusal() +
                              "); use weight_path = map");
  std::string log;
  {
    std::unique_lock lock(g_log_mutex);
    g_log_sink = &log;
    libbpf_print_fn_t old = libbpf_set_print(capture_print);
    struct Restore {
      libbpf_print_fn_t old;
      ~Restore() {
        libbpf_set_print(old);
        g_log_sink = nullptr;
      }
    } restore{old};
    if (layout.arena) load<forward_arena>(layout, log);
    else load<forward_map>(layout, log);
  }

  auto find = [&](const char* name) {
    bpf_map* m = bpf_object__find_map_by_name(obj_, name);
    if (!m) throw Error(std::string("BPF object has no map ") + name);
    return m;
  };
  auto map32 = [&](const char* name, uint32_t entries) {
    bpf_map* m = find(name);
    return static_cast<int32_t*>(map_buffer(m, bpf_map__value_size(m), entries));
  };
  resid_ = map32("resid_buf", 1);
  qkv_ = map32("qkv_buf", 1);
  attn_ = map32("attn_buf", 1);
  mlp_ = map32("mlp_buf", 1);
  xq_ = map32("xq_buf", threads);
  xq_stride_ = xq_value_bytes(layout) / 4;
  logits_ = map32("logits_buf", 1);
  norms_ = map32("norms_buf", 1);
  rope_ = map32("rope_buf", 1);
  topk_ = reinterpret_cast<uint8_t*>(map32("topk_buf", qn_topk_entries(threads)));
  topk_stride_ = qn_round8(sizeof(qn_topk_slot));
  sample_ = reinterpret_cast<uint8_t*>(map32("sample_buf", 1));
  if (layout.drive) {
    bpf_map* plan = find("drive_plan");
    drive_plan_ = static_cast<qn_drive_link*>(map_buffer(plan, sizeof(qn_drive_link), bpf_map__max_entries(plan)));
    bpf_map* times = find("drive_link_time");
    drive_link_time_ = static_cast<qn_drive_link_time*>(
        map_buffer(times, sizeof(qn_drive_link_time), bpf_map__max_entries(times)));
    drive_state_ = static_cast<qn_drive_state*>(map_buffer(find("drive_state"), sizeof(qn_drive_state), 1));
    drive_prompt_ = map32("drive_prompt", 1);
    drive_out_ = find("drive_out");
    drive_arm();
  }
}

// Opens, sizes, verifies and loads one of the two objects; the skeleton is
// owned by skel_ from the moment it exists.
template <typename Skel>
void BpfPrograms::load(const ProgramLayout& layout, std::string& log) {
  using T = SkelTraits<Skel>;
  Skel* s = T::open();
  if (!s) throw Error(std::string("cannot open the ") + T::name + " BPF object");
  skel_ = Skeleton(s, &T::destroy);
  configure(s, layout);
  KvTemplate kv_template(layout.shape);
  if (bpf_map__set_inner_map_fd(s->maps.kv_outer, kv_template.fd()))
    throw Error("cannot set the KV template of the outer KV map");
  VerifierDump dump(s->obj);
  const int err = T::load(s);
  dump.write();
  if (err) {
    std::string prog = failed_program(log);
    if (prog == "unknown program" && log.find("failed to create") != std::string::npos) prog = "maps";
    const std::string limit = verifier_limit(log);
    int lines = 25;  // QWEN3_BPF_LOG_LINES widens the quoted tail when debugging a program
    if (const char* e = getenv("QWEN3_BPF_LOG_LINES")) lines = std::max(1, atoi(e));
    throw ProgramLoadError(std::string("loading BPF object ") + T::name + " failed (" + strerror(-err) +
                               "); program " + prog + " stopped at " + limit + "\nverifier log tail:\n" +
                               tail_lines(log, lines),
                           prog, limit);
  }
  obj_ = s->obj;
  kv_outer_ = s->maps.kv_outer;
  prog_matmul_ = bpf_program__fd(s->progs.qn_matmul);
  prog_matmul_proj_ = bpf_program__fd(s->progs.qn_matmul_proj);
  if (q8_) {
    prog_matmul_pre_ = bpf_program__fd(s->progs.qn_matmul_pre);
    prog_matmul_proj_pre_ = bpf_program__fd(s->progs.qn_matmul_proj_pre);
  }
  prog_attention_ = bpf_program__fd(s->progs.qn_attention);
  prog_embed_ = bpf_program__fd(s->progs.qn_embed);
  prog_rope_ = bpf_program__fd(s->progs.qn_rope_table);
  prog_topk_merge_ = bpf_program__fd(s->progs.qn_topk_merge);
  prog_sample_ = bpf_program__fd(s->progs.qn_sample);
  if (layout.drive) {
    prog_drive_start_ = bpf_program__fd(s->progs.qn_drive_start);
    prog_drive_join_ = bpf_program__fd(s->progs.qn_drive_join);
    prog_drive_arm_[QN_FAM_CTL] = bpf_program__fd(s->progs.qn_drive_arm_ctl);
    prog_drive_arm_[QN_FAM_MM] = bpf_program__fd(s->progs.qn_drive_arm_mm);
    prog_drive_arm_[QN_FAM_PROJ] = bpf_program__fd(s->progs.qn_drive_arm_proj);
    prog_drive_arm_[QN_FAM_ATT] = bpf_program__fd(s->progs.qn_drive_arm_att);
    prog_drive_arm_[QN_FAM_MM4] = bpf_program__fd(s->progs.qn_drive_arm_mm4);
    prog_drive_arm_[QN_FAM_VOCAB] = bpf_program__fd(s->progs.qn_drive_arm_vocab);
    prog_kdoor_arm_ = bpf_program__fd(s->progs.qn_kdoor_arm);
    prog_kdoor_ring_ = bpf_program__fd(s->progs.qn_kdoor_ring);
  }
  bpf_map* weights = T::weights(s);
  if constexpr (T::arena) {
    size_t sz = 0;  // libbpf maps the arena at load; the skeleton owns that mapping
    weights_ = static_cast<uint8_t*>(bpf_map__initial_value(weights, &sz));
    if (!weights_) throw Error("libbpf did not map the weights arena");
    weights_size_ = sz;
  } else {
    weights_ = static_cast<uint8_t*>(map_buffer(weights, QN_WENTRY_BYTES, layout.weight_entries));
    weights_size_ = size_t(QN_WENTRY_BYTES) * layout.weight_entries;
  }
}

BpfPrograms::~BpfPrograms() = default;

BpfPrograms::Mapping::~Mapping() {
  if (addr_) munmap(addr_, size_);
}

void* BpfPrograms::map_buffer(bpf_map* map, size_t value_size, uint32_t entries) {
  size_t size = page_round(qn_round8(value_size) * entries);
  mappings_.reserve(mappings_.size() + 1);  // so the push below cannot throw with the mapping in hand
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(map), 0);
  if (p == MAP_FAILED)
    throw resource_exhausted(std::string("cannot mmap BPF map ") + bpf_map__name(map) + " (" +
                             std::to_string(size) + " bytes): " + strerror(errno));
  mappings_.emplace_back(p, size);
  return p;
}

int32_t* BpfPrograms::xq(uint32_t thread) const { return xq_ + thread * xq_stride_; }

qn_topk_slot* BpfPrograms::topk(uint32_t thread, uint32_t c) const {
  return reinterpret_cast<qn_topk_slot*>(topk_ + qn_topk_key(thread, c) * topk_stride_);
}

int BpfPrograms::kv_outer_fd() const { return bpf_map__fd(kv_outer_); }

int BpfPrograms::map_count() const {
  int n = 0;
  bpf_map* m;
  bpf_object__for_each_map(m, obj_) n++;
  return n;
}

int BpfPrograms::program_count() const { return static_cast<int>(stats().size()); }

std::vector<ProgramStat> BpfPrograms::stats() const {
  std::vector<ProgramStat> out;
  for (auto [fd, name] : {std::pair{prog_matmul_, "qn_matmul"}, std::pair{prog_matmul_proj_, "qn_matmul_proj"},
                          std::pair{prog_matmul_pre_, "qn_matmul_pre"},
                          std::pair{prog_matmul_proj_pre_, "qn_matmul_proj_pre"},
                          std::pair{prog_attention_, "qn_attention"},
                          std::pair{prog_embed_, "qn_embed"}, std::pair{prog_rope_, "qn_rope_table"},
                          std::pair{prog_topk_merge_, "qn_topk_merge"}, std::pair{prog_sample_, "qn_sample"},
                          std::pair{prog_drive_start_, "qn_drive_start"},
                          std::pair{prog_drive_join_, "qn_drive_join"},
                          std::pair{prog_drive_arm_[QN_FAM_CTL], "qn_drive_arm_ctl"},
                          std::pair{prog_drive_arm_[QN_FAM_MM], "qn_drive_arm_mm"},
                          std::pair{prog_drive_arm_[QN_FAM_PROJ], "qn_drive_arm_proj"},
                          std::pair{prog_drive_arm_[QN_FAM_ATT], "qn_drive_arm_att"},
                          std::pair{prog_drive_arm_[QN_FAM_MM4], "qn_drive_arm_mm4"},
                          std::pair{prog_drive_arm_[QN_FAM_VOCAB], "qn_drive_arm_vocab"}}) {
    if (fd < 0) continue;  // not loaded (q24: no packed prefill programs)
    bpf_prog_info info{};
    uint32_t len = sizeof info;
    ProgramStat st{name, 0};
    if (bpf_prog_get_info_by_fd(fd, &info, &len) == 0) st.verified_insns = info.verified_insns;
    out.push_back(st);
  }
  return out;
}

void BpfPrograms::matmul(qn_args& args) {
  const bool proj = args.op == QN_OP_O || args.op == QN_OP_DOWN;
  const uint32_t positions = args.op == QN_OP_VOCAB ? uint32_t(__builtin_popcount(args.pos_mask)) : args.npos;
  if (q8_ && positions > 1) {
    if (proj) run(prog_matmul_proj_pre_, "qn_matmul_proj_pre", args);
    else run(prog_matmul_pre_, "qn_matmul_pre", args);
  } else if (proj) {
    run(prog_matmul_proj_, "qn_matmul_proj", args);
  } else {
    run(prog_matmul_, "qn_matmul", args);
  }
}

void BpfPrograms::sample() {
  qn_args a{};
  a.op = QN_OP_SAMPLE;
  run(prog_sample_, "qn_sample", a);
}

void BpfPrograms::drive_arm() {
  static const char* const names[QN_FAM_COUNT] = {"qn_drive_arm_ctl", "qn_drive_arm_mm", "qn_drive_arm_proj",
                                                   "qn_drive_arm_att", "qn_drive_arm_mm4", "qn_drive_arm_vocab"};
  for (int f = 0; f < QN_FAM_COUNT; f++) {
    qn_args a{};
    run(prog_drive_arm_[f], names[f], a);
  }
}

void BpfPrograms::drive_start(qn_drive_submit& sub) {
  if (!drive()) throw Error("the kernel driver's programs are not loaded (engine option kernel_driver)");
  sub.status = 0;
  run_ctx(prog_drive_start_, "qn_drive_start", &sub, sizeof sub);
}

bool BpfPrograms::drive_join(uint32_t slot) {
  qn_args a{};
  a.thread = slot;
  LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = &a, .ctx_size_in = sizeof a);
  calls_.fetch_add(1, std::memory_order_relaxed);
  if (bpf_prog_test_run_opts(prog_drive_join_, &opts) != 0) return false;
  return a.status == 0;
}

void BpfPrograms::kdoor_arm() {
  qn_args a{};
  run(prog_kdoor_arm_, "qn_kdoor_arm", a);
}

void BpfPrograms::kdoor_ring() {
  qn_args a{};
  LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = &a, .ctx_size_in = sizeof a);
  calls_.fetch_add(1, std::memory_order_relaxed);
  bpf_prog_test_run_opts(prog_kdoor_ring_, &opts);  // a doorbell already queued is not an error
}

int BpfPrograms::map_fd(const char* name) const {
  bpf_map* m = bpf_object__find_map_by_name(obj_, name);
  if (!m) throw Error(std::string("BPF object has no map ") + name);
  return bpf_map__fd(m);
}

void* BpfPrograms::map_mmap(const char* name) {
  bpf_map* m = bpf_object__find_map_by_name(obj_, name);
  if (!m) throw Error(std::string("BPF object has no map ") + name);
  return map_buffer(m, bpf_map__value_size(m), bpf_map__max_entries(m));
}

int BpfPrograms::drive_out_fd() const { return drive_out_ ? bpf_map__fd(drive_out_) : -1; }

void BpfPrograms::run_ctx(int prog_fd, const char* name, void* ctx, uint32_t size) {
  LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = ctx, .ctx_size_in = size);  // a syscall program's ctx is copied back
  calls_.fetch_add(1, std::memory_order_relaxed);
  int err = bpf_prog_test_run_opts(prog_fd, &opts);
  if (err) throw Error(std::string("running BPF program ") + name + " failed: " + strerror(-err));
}

void BpfPrograms::run(int prog_fd, const char* name, qn_args& args) {
  args.status = 0;
  LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = &args, .ctx_size_in = sizeof args);
  calls_.fetch_add(1, std::memory_order_relaxed);
  int err = bpf_prog_test_run_opts(prog_fd, &opts);
  if (err) throw Error(std::string("running BPF program ") + name + " failed: " + strerror(-err));
  if (args.status != 0)
    throw Error(std::string("BPF program ") + name + " rejected its input (check at bpf_ops line " +
                std::to_string(args.status) + ", op " + std::to_string(args.op) + ", layer " +
                std::to_string(args.layer) + ")");
}

}  // namespace qwen3::engine
