// The user-space side of the kernel driver (bpf_ops/ops_drive.h,
// docs/kernel-driver.md): the plan map filled once (the argument block of
// every operator share, as run_pass builds them), one submission per
// generation (one bpf() call), the tokens read from the drive_out ring
// buffer by epoll, cancellation through the mmapped state (no bpf() call).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/model_plan.h"

struct ring_buffer;

namespace qwen3::engine {

class BpfKvCache;

class KernelDriver {
 public:
  // progs must have been loaded with layout().drive. mat_args: a matrix's
  // argument block (the backend's; arena offsets resolved). The weights must
  // be converted (wfrac, act_bits) before this.
  KernelDriver(BpfPrograms& progs, const ModelPlan& plan, const std::function<qn_args(const MatrixPlan&)>& mat_args);
  ~KernelDriver();
  KernelDriver(const KernelDriver&) = delete;
  KernelDriver& operator=(const KernelDriver&) = delete;

  // Whether the request fits the submission (stop ids, feed length); the
  // caller feeds a longer feed's head itself.
  static bool fits(const KernelGenerateRequest& req);
  // Runs the generation; the caller holds the engine's locks (the chain uses
  // the activation maps and sample_buf) and has checked the cache and feed.
  KernelGenerateResult generate(BpfKvCache& kv, const KernelGenerateRequest& req,
                                const std::function<bool(int32_t, int)>& on_token);

 private:
  void fill_plan(const ModelPlan& plan, const std::function<qn_args(const MatrixPlan&)>& mat_args);
  std::string describe_link(uint32_t link) const;
  void note_link_times(uint64_t gen_ns, KernelGenerateResult& res) const;
  qn_drive_submit submission(const BpfKvCache& kv, const KernelGenerateRequest& req) const;

  BpfPrograms& progs_;
  ring_buffer* rb_ = nullptr;
  std::vector<qn_drive_record> records_;  // read by the ring buffer callback
  uint32_t tag_ = 0;
};

}  // namespace qwen3::engine
