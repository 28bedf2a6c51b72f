// The forward-pass BPF object, loaded once: sizes and shape set before load
// (byte layouts: bpf_ops/layout.h), verifier failures turned into qwen3::Error
// (program name + log tail), every buffer map mmapped so user space reads
// logits and writes weights in place, and one call path (BPF_PROG_TEST_RUN)
// that counts bpf() calls. Both objects (weights in maps or in an arena) load
// through one path; the skeleton and every mapping are owned by members, so a
// throw anywhere in the constructor releases all of them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "drive_abi.h"
#include "op_args.h"

struct bpf_object;
struct bpf_map;

namespace qwen3::engine {

// Sizes of everything the programs touch; computed by the engine from the model.
struct ProgramLayout {
  qn_shape shape{};
  uint32_t hid_pad = 0, qkv_pad = 0, qd_pad = 0, inter_pad = 0, in_pad = 0;
  uint32_t rope_positions = 1;
  bool arena = false;
  uint64_t weight_bytes = 0;    // arena: bytes to map; map: entries * QN_WENTRY_BYTES
  uint32_t weight_entries = 1;  // map path
  bool drive = false;           // load the kernel driver's programs (bpf_ops/ops_drive.h)
};

// A load the kernel refused: the program (or "maps" when a map could not be
// created) and the limit it hit with the verifier's line (verifier_log.h).
class ProgramLoadError : public Error {
 public:
  ProgramLoadError(const std::string& message, std::string program, std::string limit)
      : Error(message), program_(std::move(program)), limit_(std::move(limit)) {}
  const std::string& program() const { return program_; }
  const std::string& limit() const { return limit_; }

 private:
  std::string program_, limit_;
};

struct ProgramStat {
  std::string name;
  uint32_t verified_insns = 0;
};

class BpfPrograms {
 public:
  explicit BpfPrograms(const ProgramLayout& layout);
  ~BpfPrograms();
  BpfPrograms(const BpfPrograms&) = delete;
  BpfPrograms& operator=(const BpfPrograms&) = delete;

  // Run one program; throws qwen3::Error when the program reports a failed check.
  // Matmul ops with a normed input (QKV, GATEUP, VOCAB) and the projections
  // (O, DOWN) are separate programs, each verified on its own; q8 passes of
  // several positions run the packed prefill variants (bpf_ops/ops_matmul.h).
  void matmul(qn_args& args);
  void attention(qn_args& args) { run(prog_attention_, "qn_attention", args); }
  void embed(qn_args& args) { run(prog_embed_, "qn_embed", args); }
  // RoPE table rows [row_begin, row_end) (bpf_ops/ops_rope.h).
  void rope_table(qn_args& args) { run(prog_rope_, "qn_rope_table", args); }
  // Merges the workers' top-k lists of the npos logit positions (after a VOCAB pass).
  void topk_merge(qn_args& args) { run(prog_topk_merge_, "qn_topk_merge", args); }
  // The sampling probabilities of the candidates in sample_buf (bpf_ops/ops_sample.h);
  // the caller serialises its use of the buffer.
  void sample();

  // The kernel driver (bpf_ops/ops_drive.h; loaded when layout().drive): the
  // wqs' callbacks set (once, after load), a generation started (one bpf()
  // call; sub.status says why not), its plan, state, feed and ring buffer.
  bool drive() const { return prog_drive_start_ >= 0; }
  void drive_arm();
  void drive_start(qn_drive_submit& sub);
  // A second chain joins the running generation on the calling thread's CPU
  // (CPU slot `slot`); false when none was running.
  bool drive_join(uint32_t slot);
  qn_drive_link* drive_plan() const { return drive_plan_; }
  qn_drive_state* drive_state() const { return drive_state_; }
  const qn_drive_link_time* drive_link_time() const { return drive_link_time_; }
  int32_t* drive_prompt() const { return drive_prompt_; }
  int drive_out_fd() const;
  // Kernel-started generations (bpf_ops/ops_kdoor_bell.h): the doorbell's
  // callback set (once), the doorbell rung; a map of the object by name, its
  // fd or its values mmapped (kept for the object's life).
  void kdoor_arm();
  void kdoor_ring();
  int map_fd(const char* name) const;
  void* map_mmap(const char* name);

  uint64_t calls() const { return calls_.load(std::memory_order_relaxed); }
  const ProgramLayout& layout() const { return layout_; }
  std::vector<ProgramStat> stats() const;
  int program_count() const;  // loaded (q24 skips the packed prefill programs)
  int map_count() const;

  // mmapped buffers (see bpf_ops/maps.h for their layout).
  int32_t* resid() const { return resid_; }
  int32_t* qkv() const { return qkv_; }
  int32_t* attn() const { return attn_; }
  int32_t* mlp() const { return mlp_; }
  int32_t* xq(uint32_t thread) const;
  int32_t* logits() const { return logits_; }
  qn_topk_slot* topk(uint32_t thread, uint32_t c) const;
  qn_topk_slot* merged_topk(uint32_t c) const { return topk(layout_.shape.threads, c); }
  int32_t* norms() const { return norms_; }
  int32_t* rope() const { return rope_; }
  // sample_buf (layout.h: qn_sample_*): header, candidates, history bitmap, kept set.
  uint8_t* sample_buf() const { return sample_; }
  qn_sample_hdr* sample_hdr() const { return reinterpret_cast<qn_sample_hdr*>(sample_); }
  uint8_t* weights() const { return weights_; }  // map entries back to back, or the arena
  size_t weights_size() const { return weights_size_; }

  int kv_outer_fd() const;
  uint32_t kv_value_size() const { return layout_.shape.kv_entry_bytes; }

 private:
  // One mmap of a BPF map; unmapped when destroyed.
  class Mapping {
   public:
    Mapping(void* addr, size_t size) : addr_(addr), size_(size) {}
    Mapping(Mapping&& o) noexcept : addr_(o.addr_), size_(o.size_) { o.addr_ = nullptr; }
    Mapping(const Mapping&) = delete;
    ~Mapping();

   private:
    void* addr_;
    size_t size_;
  };
  // The skeleton (forward_map or forward_arena): destroyed with its maps and programs.
  using Skeleton = std::unique_ptr<void, void (*)(void*)>;

  template <typename Skel>
  void load(const ProgramLayout& layout, std::string& log);
  void run(int prog_fd, const char* name, qn_args& args);
  void run_ctx(int prog_fd, const char* name, void* ctx, uint32_t size);
  void* map_buffer(bpf_map* map, size_t value_size, uint32_t entries);

  ProgramLayout layout_;
  // Declared before mappings_: members die in reverse order, so every mapping
  // is unmapped before the skeleton closes the maps.
  Skeleton skel_{nullptr, nullptr};
  bpf_object* obj_ = nullptr;
  bpf_map* kv_outer_ = nullptr;
  bool q8_ = false;  // q8 or q4 model: the packed prefill programs exist
  int prog_matmul_pre_ = -1, prog_matmul_proj_pre_ = -1;
  int prog_matmul_ = -1, prog_matmul_proj_ = -1, prog_attention_ = -1, prog_embed_ = -1;
  int prog_rope_ = -1, prog_topk_merge_ = -1, prog_sample_ = -1;
  int prog_kdoor_arm_ = -1, prog_kdoor_ring_ = -1;
  int prog_drive_start_ = -1, prog_drive_join_ = -1, prog_drive_arm_[QN_FAM_COUNT] = {-1, -1, -1, -1, -1, -1};
  qn_drive_link* drive_plan_ = nullptr;
  qn_drive_state* drive_state_ = nullptr;
  qn_drive_link_time* drive_link_time_ = nullptr;
  int32_t* drive_prompt_ = nullptr;
  bpf_map* drive_out_ = nullptr;
  std::vector<Mapping> mappings_;
  int32_t *resid_ = nullptr, *qkv_ = nullptr, *attn_ = nullptr, *mlp_ = nullptr;
  int32_t *xq_ = nullptr, *logits_ = nullptr, *norms_ = nullptr, *rope_ = nullptr;
  uint8_t* topk_ = nullptr;
  uint8_t* sample_ = nullptr;
  uint8_t* weights_ = nullptr;
  size_t weights_size_ = 0;
  size_t xq_stride_ = 0, topk_stride_ = 0;
  std::atomic<uint64_t> calls_{0};
};

// Byte sizes of the buffers for a layout (shared by the loader and tests).
size_t xq_value_bytes(const ProgramLayout& l);
size_t att_value_bytes(const ProgramLayout& l);
// The kernel memory of every buffer map (activations, scratch, logits, RoPE,
// sampling; the kernel driver's plan and token text when l.drive), and of the
// weights map or arena as created (map: whole QN_WENTRY_BYTES entries).
uint64_t buffer_bytes(const ProgramLayout& l);
uint64_t weight_map_bytes(const ProgramLayout& l);

}  // namespace qwen3::engine
