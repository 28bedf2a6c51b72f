// What a model shape asks of the kernel, known from config.json alone (no
// weight read, no weight map filled): whether every BPF program passes the
// verifier at that shape, precision and K/V format, and whether its weights
// and KV budget fit the memory the engine may use (docs/shapes.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/bpf_backend.h"
#include "engine/memory_budget.h"
#include "model/model_config.h"

namespace qwen3 {

namespace engine {
struct ModelPlan;
}

// The outcome of loading the programs for one shape.
struct ProgramCheck {
  bool ok = false;
  std::string error;    // the load's whole message when !ok
  std::string program;  // the program (or "plan", "maps") that failed
  std::string limit;    // the limit that stopped it and the line that says so
  std::vector<BpfProgramInfo> programs;  // when ok: instructions the verifier processed, per program
  uint64_t weight_bytes = 0;             // the weights map or arena the model would need (not created)
  uint64_t buffer_bytes = 0;             // the other maps (created)
  uint64_t kv_bytes_per_position = 0;    // one session's KV cache per position
  double seconds = 0;
};

// The daemon's load path (plan, map sizes, .rodata shape, libbpf load, the
// verifier, the maps mmapped, the kernel driver armed when options ask for it)
// with the weights map at one entry: the verifier does not depend on its
// entry count (every weight lookup's key is computed and null-checked), and an
// arena's pages are only reserved. No memory check, no weights. Never throws
// for a shape the programs cannot run; the ProgramCheck says why.
ProgramCheck verify_programs(const ModelConfig& config, const BpfEngineOptions& options);

// The plan the engine loads for `config` and `options` in `precision`: one
// source for the backend, the verify-only check and the memory figures.
engine::ModelPlan plan_for(const ModelConfig& config, const BpfEngineOptions& options, Precision precision);

// The memory a planned model asks for against `limit`, with the remedies a
// user can apply (precision, kv_budget_mib) and their figures.
engine::MemoryNeed memory_need(const ModelConfig& config, const engine::ModelPlan& plan,
                               const BpfEngineOptions& options, const engine::MemoryLimit& limit);

// The limit options name: memory_limit_bytes, else the host's.
engine::MemoryLimit memory_limit_for(const BpfEngineOptions& options);

}  // namespace qwen3
