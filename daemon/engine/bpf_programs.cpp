#include "engine/bpf_programs.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstdarg>
#include <cstring>
#include <memory>
#include <mutex>

#include "common/error.h"

// The generated skeletons name kernel integer types in their .rodata struct.
typedef uint32_t u32;
typedef uint64_t u64;
#include "forward_arena.skel.h"
#include "forward_map.skel.h"

namespace qwen3::engine {
namespace {

size_t round8(size_t v) { return (v + 7) & ~size_t(7); }
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

std::string tail_lines(const std::string& text, int lines) {
  size_t pos = text.size();
  for (int i = 0; i <= lines && pos > 0; i++) {
    size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    pos = nl;
  }
  return text.substr(pos + 1);
}

std::string failed_program(const std::string& log) {
  // libbpf: "prog 'qn_matmul': failed to load: -13"
  size_t at = log.find("': failed to load");
  if (at == std::string::npos) return "unknown program";
  size_t start = log.rfind("prog '", at);
  if (start == std::string::npos) return "unknown program";
  return log.substr(start + 6, at - start - 6);
}

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
  auto set = [](bpf_map* m, size_t value, uint32_t entries, const char* what) {
    if (bpf_map__set_value_size(m, static_cast<uint32_t>(value)) ||
        bpf_map__set_max_entries(m, entries))
      throw Error(std::string("cannot size BPF map ") + what);
  };
  set(s->maps.resid_buf, round8(QN_PMAX * size_t(l.hid_pad) * 4), 1, "resid_buf");
  set(s->maps.qkv_buf, round8(QN_PMAX * size_t(l.qkv_pad) * 4), 1, "qkv_buf");
  set(s->maps.attn_buf, round8(QN_PMAX * size_t(l.qd_pad) * 4), 1, "attn_buf");
  set(s->maps.mlp_buf, round8(QN_PMAX * size_t(l.inter_pad) * 4), 1, "mlp_buf");
  set(s->maps.xq_buf, xq_value_bytes(l), QN_THREADS_MAX, "xq_buf");
  set(s->maps.att_buf, att_value_bytes(l), QN_THREADS_MAX, "att_buf");
  set(s->maps.logits_buf, round8(QN_PMAX * size_t(sh.vocab) * 4), 1, "logits_buf");
  set(s->maps.topk_buf, round8(sizeof(qn_topk_slot)), QN_THREADS_MAX * QN_PMAX, "topk_buf");
  set(s->maps.norms_buf, round8(size_t(sh.norms_len) * 4), 1, "norms_buf");
  set(s->maps.rope_buf, round8(size_t(l.rope_positions) * sh.head_dim * 4), 1, "rope_buf");
}

// The packed prefill programs exist for q8 only; q24 skips their verification.
template <typename Skel>
void set_prefill_autoload(Skel* s, const ProgramLayout& l) {
  const bool q8 = l.shape.precision == QN_PREC_Q8;
  bpf_program__set_autoload(s->progs.qn_matmul_pre, q8);
  bpf_program__set_autoload(s->progs.qn_matmul_proj_pre, q8);
}

// The outer KV map's template: libbpf takes an existing map as the inner map
// definition, which carries the model's per-position value size.
int make_kv_template(const qn_shape& sh) {
  LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_INNER_MAP);
  int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "qwen3_kv_tmpl", 4, sh.kv_pos_bytes, 1, &opts);
  if (fd < 0) throw Error(std::string("cannot create the KV template map: ") + strerror(errno));
  return fd;
}

// QWEN3_BPF_VERIFIER_DUMP=<dir>: full (level 2) verifier logs per program,
// for working on a program the verifier rejects.
std::vector<std::unique_ptr<std::vector<char>>> g_debug_bufs;
void debug_log(bpf_object* obj) {
  const char* dir = getenv("QWEN3_BPF_VERIFIER_DUMP");
  if (!dir) return;
  bpf_program* p;
  bpf_object__for_each_program(p, obj) {
    g_debug_bufs.push_back(std::make_unique<std::vector<char>>(size_t(1) << 29));
    bpf_program__set_log_level(p, 2);
    bpf_program__set_log_buf(p, g_debug_bufs.back()->data(), g_debug_bufs.back()->size());
  }
}
void debug_dump(bpf_object* obj) {
  const char* dir = getenv("QWEN3_BPF_VERIFIER_DUMP");
  if (!dir) return;
  bpf_program* p;
  bpf_object__for_each_program(p, obj) {
    size_t n = 0;
    const char* log = bpf_program__log_buf(p, &n);
    if (!log) continue;
    std::string path = std::string(dir) + "/" + bpf_program__name(p) + ".log";
    if (FILE* f = fopen(path.c_str(), "w")) {
      fwrite(log, 1, strnlen(log, n), f);
      fclose(f);
    }
  }
}

}  // namespace

size_t xq_value_bytes(const ProgramLayout& l) {
  // inputs [QN_PMAX][in_pad] s32, shifts [QN_PMAX] s32, q8 position pairs [QN_PMAX/2][in_pad] s64
  return round8((QN_PMAX * size_t(l.in_pad) + QN_PMAX) * 4 + QN_PMAX / 2 * size_t(l.in_pad) * 8);
}

size_t att_value_bytes(const ProgramLayout& l) {
  // per query head of a GQA group: scores, acc, query, softmax state (bpf_ops/ops_attention.h)
  const size_t hd = l.shape.head_dim, g = l.shape.n_heads / l.shape.n_kv_heads;
  return round8(g * (size_t(l.shape.max_ctx) * 4 + hd * 8 + hd * 4 + 32) + 2 * hd * 4);
}

BpfPrograms::BpfPrograms(const ProgramLayout& layout)
    : layout_(layout), q8_(layout.shape.precision == QN_PREC_Q8) {
  std::string log;
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

  auto load_failed = [&](const char* what, int err) {
    std::string prog = failed_program(log);
    int lines = 25;  // QWEN3_BPF_LOG_LINES widens the quoted tail when debugging a program
    if (const char* e = getenv("QWEN3_BPF_LOG_LINES")) lines = std::max(1, atoi(e));
    throw Error(std::string("loading BPF object ") + what + " failed (" + strerror(-err) +
                "); program " + prog + ", verifier log tail:\n" + tail_lines(log, lines));
  };

  bpf_map* weights_map = nullptr;
  int kv_template = -1;
  struct CloseFd {
    int& fd;
    ~CloseFd() {
      if (fd >= 0) close(fd);
    }
  } close_template{kv_template};
  if (layout.arena) {
    forward_arena* s = forward_arena__open();
    if (!s) throw Error("cannot open the forward_arena BPF object");
    destroy_ = [s] { forward_arena__destroy(s); };
    configure(s, layout);
    kv_template = make_kv_template(layout.shape);
    bpf_map__set_inner_map_fd(s->maps.kv_outer, kv_template);
    uint64_t pages = page_round(layout.weight_bytes) / static_cast<size_t>(sysconf(_SC_PAGESIZE));
    if (pages == 0) pages = 1;
    if (pages > (1u << 20)) throw resource_exhausted("weights exceed the 4 GiB arena limit");
    bpf_map__set_max_entries(s->maps.weights_arena, static_cast<uint32_t>(pages));
    set_prefill_autoload(s, layout);
    if (int err = forward_arena__load(s)) load_failed("forward_arena", err);
    obj_ = s->obj;
    kv_outer_ = s->maps.kv_outer;
    weights_map = s->maps.weights_arena;
    prog_matmul_ = bpf_program__fd(s->progs.qn_matmul);
    prog_matmul_proj_ = bpf_program__fd(s->progs.qn_matmul_proj);
    if (q8_) {
      prog_matmul_pre_ = bpf_program__fd(s->progs.qn_matmul_pre);
      prog_matmul_proj_pre_ = bpf_program__fd(s->progs.qn_matmul_proj_pre);
    }
    prog_attention_ = bpf_program__fd(s->progs.qn_attention);
    prog_embed_ = bpf_program__fd(s->progs.qn_embed);
    size_t sz = 0;
    weights_ = static_cast<uint8_t*>(bpf_map__initial_value(weights_map, &sz));
    if (!weights_) throw Error("libbpf did not map the weights arena");
    weights_size_ = sz;
  } else {
    forward_map* s = forward_map__open();
    if (!s) throw Error("cannot open the forward_map BPF object");
    destroy_ = [s] { forward_map__destroy(s); };
    configure(s, layout);
    debug_log(s->obj);
    kv_template = make_kv_template(layout.shape);
    bpf_map__set_inner_map_fd(s->maps.kv_outer, kv_template);
    bpf_map__set_max_entries(s->maps.weights_map, layout.weight_entries);
    set_prefill_autoload(s, layout);
    int load_err = forward_map__load(s);
    debug_dump(s->obj);
    if (load_err) load_failed("forward_map", load_err);
    obj_ = s->obj;
    kv_outer_ = s->maps.kv_outer;
    weights_map = s->maps.weights_map;
    prog_matmul_ = bpf_program__fd(s->progs.qn_matmul);
    prog_matmul_proj_ = bpf_program__fd(s->progs.qn_matmul_proj);
    if (q8_) {
      prog_matmul_pre_ = bpf_program__fd(s->progs.qn_matmul_pre);
      prog_matmul_proj_pre_ = bpf_program__fd(s->progs.qn_matmul_proj_pre);
    }
    prog_attention_ = bpf_program__fd(s->progs.qn_attention);
    prog_embed_ = bpf_program__fd(s->progs.qn_embed);
    weights_ = static_cast<uint8_t*>(
        map_buffer(weights_map, QN_WENTRY_BYTES, layout.weight_entries));
    weights_size_ = size_t(QN_WENTRY_BYTES) * layout.weight_entries;
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
  xq_ = map32("xq_buf", QN_THREADS_MAX);
  xq_stride_ = xq_value_bytes(layout) / 4;
  logits_ = map32("logits_buf", 1);
  norms_ = map32("norms_buf", 1);
  rope_ = map32("rope_buf", 1);
  topk_ = reinterpret_cast<uint8_t*>(map32("topk_buf", QN_THREADS_MAX * QN_PMAX));
  topk_stride_ = round8(sizeof(qn_topk_slot));
}

BpfPrograms::~BpfPrograms() {
  for (auto& m : mappings_) munmap(m.addr, m.size);
  if (destroy_) destroy_();
}

void* BpfPrograms::map_buffer(bpf_map* map, size_t value_size, uint32_t entries) {
  size_t size = page_round(round8(value_size) * entries);
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, bpf_map__fd(map), 0);
  if (p == MAP_FAILED)
    throw resource_exhausted(std::string("cannot mmap BPF map ") + bpf_map__name(map) + " (" +
                             std::to_string(size) + " bytes): " + strerror(errno));
  mappings_.push_back({p, size});
  return p;
}

int32_t* BpfPrograms::xq(uint32_t thread) const { return xq_ + thread * xq_stride_; }

qn_topk_slot* BpfPrograms::topk(uint32_t thread, uint32_t c) const {
  return reinterpret_cast<qn_topk_slot*>(topk_ + (thread * QN_PMAX + c) * topk_stride_);
}

int BpfPrograms::kv_outer_fd() const { return bpf_map__fd(kv_outer_); }

int BpfPrograms::map_count() const {
  int n = 0;
  bpf_map* m;
  bpf_object__for_each_map(m, obj_) n++;
  return n;
}

std::vector<ProgramStat> BpfPrograms::stats() const {
  std::vector<ProgramStat> out;
  for (auto [fd, name] : {std::pair{prog_matmul_, "qn_matmul"}, std::pair{prog_matmul_proj_, "qn_matmul_proj"},
                          std::pair{prog_matmul_pre_, "qn_matmul_pre"},
                          std::pair{prog_matmul_proj_pre_, "qn_matmul_proj_pre"},
                          std::pair{prog_attention_, "qn_attention"},
                          std::pair{prog_embed_, "qn_embed"}}) {
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
