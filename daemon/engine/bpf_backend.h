// The in-kernel backend: every model operation runs in verified BPF programs
// (bpf_ops/), weights converted once at load and kept resident in BPF maps or
// a BPF arena, KV caches in per-session BPF maps.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/precision.h"

namespace qwen3 {

class ModelDir;

enum class WeightPath { map, arena };

// Parse "map"/"arena" and "q24"/"q8"/"q4"; throw qwen3::Error(invalid_argument) otherwise.
WeightPath parse_weight_path(const std::string& s);
Precision parse_precision(const std::string& s);
const char* weight_path_name(WeightPath p);
const char* precision_name(Precision p);

struct BpfEngineOptions {
  WeightPath weight_path = WeightPath::map;
  Precision precision = Precision::q24;
  int threads = 2;
  bool verbose = false;        // report each program's verified instruction count on stderr
  int max_context = 0;         // longest session; 0: config max_position_embeddings (capped at 40960)
  bool kernel_driver = false;  // load the kernel driver (Backend::generate_in_kernel; docs/kernel-driver.md)
  int kv_bits = 8;             // K/V cache element width: 8 (compact, 56 KiB/position at 0.6B) or 16 (docs/kv-cache.md)
  // The memory check before the weight maps are created (engine/shape_check.h,
  // docs/shapes.md): the sessions' KV budget to count (the daemon's kv_budget_mib),
  // and the limit; 0: the host's (MemAvailable and the memory cgroup's room).
  uint64_t kv_budget_bytes = 0;
  uint64_t memory_limit_bytes = 0;
  // Load progress: fraction in [0, 1] and what is happening.
  std::function<void(double, const std::string&)> progress;
};

struct BpfProgramInfo {
  std::string name;
  uint32_t verified_insns = 0;
};

// Figures the benchmark and the daemon's status report read.
struct BpfBackendStats {
  uint64_t bpf_calls = 0;        // BPF_PROG_TEST_RUN calls since load (every bpf() call that runs a program)
  size_t weight_bytes = 0;       // resident converted weights
  size_t buffer_bytes = 0;       // activation/scratch maps
  double load_seconds = 0;
  std::vector<BpfProgramInfo> programs;
};

// A debugging view of the kernel's activations after each step of a pass:
// stage is one of "embedding", "qkv", "attention", "attn_residual", "act",
// "residual"; rows = positions of the pass, values dequantized from Q16.
struct BpfTracePoint {
  const char* stage;
  int layer;
  int first_position;
  int rows, cols;
  const float* data;
};

class BpfBackendApi : public Backend {
 public:
  virtual BpfBackendStats stats() const = 0;
  // Called synchronously during forward(); empty to switch off (the default).
  virtual void set_debug_trace(std::function<void(const BpfTracePoint&)> fn) = 0;
};

// Throws qwen3::Error with the program name, the limit it hit and the verifier
// log tail when a program fails verification, for shapes the engine cannot
// run, and (resource_exhausted, with the figures) before any map exists when
// the weights, buffers and kv_budget_bytes exceed the memory limit.
std::unique_ptr<Backend> make_bpf_backend(std::shared_ptr<const ModelDir> model, const BpfEngineOptions& options);

}  // namespace qwen3
