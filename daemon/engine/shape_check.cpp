#include "engine/shape_check.h"

#include <chrono>

#include "common/error.h"
#include "engine/bpf_programs.h"
#include "engine/model_plan.h"

namespace qwen3 {

namespace {

uint64_t kv_per_position(const engine::ProgramLayout& l) {
  return uint64_t(l.shape.n_layers) * l.shape.n_kv_heads * l.shape.kv_rec_bytes;
}

}  // namespace

engine::ModelPlan plan_for(const ModelConfig& c, const BpfEngineOptions& o, Precision p) {
  engine::ModelPlan plan =
      engine::make_model_plan(c, p, o.weight_path == WeightPath::arena, static_cast<uint32_t>(o.threads),
                              engine::engine_max_context(c, o.max_context), static_cast<uint32_t>(o.kv_bits));
  plan.layout.drive = o.kernel_driver;
  return plan;
}

ProgramCheck verify_programs(const ModelConfig& config, const BpfEngineOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  ProgramCheck r;
  engine::ModelPlan plan;
  try {
    plan = plan_for(config, options, options.precision);
  } catch (const Error& e) {
    r.error = e.what();
    r.program = "plan";
    r.limit = e.what();
    return r;
  }
  r.weight_bytes = engine::weight_map_bytes(plan.layout);
  r.buffer_bytes = engine::buffer_bytes(plan.layout);
  r.kv_bytes_per_position = kv_per_position(plan.layout);
  engine::ProgramLayout layout = plan.layout;
  if (!layout.arena) layout.weight_entries = 1;  // the verifier sees the value size, not the entry count
  try {
    engine::BpfPrograms progs(layout);
    for (auto& st : progs.stats()) r.programs.push_back({st.name, st.verified_insns});
    r.ok = true;
  } catch (const engine::ProgramLoadError& e) {
    r.error = e.what();
    r.program = e.program();
    r.limit = e.limit();
  } catch (const Error& e) {
    r.error = e.what();
    r.program = "maps";
    r.limit = e.what();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

engine::MemoryLimit memory_limit_for(const BpfEngineOptions& options) {
  if (options.memory_limit_bytes > 0)
    return {options.memory_limit_bytes, "the engine option memory_limit_bytes"};
  return engine::host_memory_limit();
}

engine::MemoryNeed memory_need(const ModelConfig& config, const engine::ModelPlan& plan,
                               const BpfEngineOptions& options, const engine::MemoryLimit& limit) {
  using engine::format_bytes;
  engine::MemoryNeed n;
  n.weights = engine::weight_map_bytes(plan.layout);
  n.buffers = engine::buffer_bytes(plan.layout);
  n.kv_budget = options.kv_budget_bytes;
  n.weights_what = std::string("weights in ") + precision_name(options.precision) + " (weight_path " +
                   weight_path_name(options.weight_path) + ")";
  const uint64_t per_pos = kv_per_position(plan.layout);
  n.kv_what = "kv_budget_mib; " + std::to_string(options.kv_bits) + "-bit K/V: " + format_bytes(per_pos) +
              " per cached position";
  const uint64_t total = n.weights + n.buffers + n.kv_budget;
  const uint64_t short_by = total > limit.bytes ? total - limit.bytes : 0;
  if (options.precision == Precision::q24) {
    const uint64_t w8 = engine::weight_map_bytes(plan_for(config, options, Precision::q8).layout);
    n.remedies.push_back("precision = q8 (weights " + format_bytes(w8) + ", " + format_bytes(n.weights - w8) +
                         " less)");
  }
  if (n.kv_budget > short_by) {
    const uint64_t mib = (n.kv_budget - short_by) >> 20;
    n.remedies.push_back("kv_budget_mib = " + std::to_string(mib) + " or less (" +
                         std::to_string(per_pos ? (mib << 20) / per_pos : 0) + " cached positions in all)");
  } else if (n.kv_budget > 0) {
    n.remedies.push_back("a smaller kv_budget_mib (it cannot cover the shortfall alone)");
  }
  n.remedies.push_back("more memory for the daemon (the cgroup's limit, or the host's)");
  return n;
}

}  // namespace qwen3
