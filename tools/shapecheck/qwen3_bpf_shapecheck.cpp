// qwen3-bpf-shapecheck CONFIG [--precision q8|q24|q4|both|all] [--kv-bits 8|16|both]
//                      [--weights map|arena|both] [--no-driver] [--threads N]
//                      [--max-context N] [--kv-budget-mib N] [--json]
// Loads the forward-pass programs at the shape of CONFIG (a config.json, or a
// model directory holding one) through the daemon's load path up to and
// including the verifier, without weights (engine/shape_check.h), and prints
// per precision, K/V format and weight path: pass with the verifier's
// instruction counts, or the limit that stops it; then the memory the model
// would need against this host's limit. Exit 1 when any combination fails.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli_parse.h"
#include "common/error.h"
#include "engine/memory_budget.h"
#include "engine/model_plan.h"
#include "engine/shape_check.h"
#include "model/config_parser.h"

namespace {

qwen3::ModelConfig read_config(const std::string& path) {
  std::string file = std::filesystem::is_directory(path) ? path + "/config.json" : path;
  std::ifstream f(file);
  if (!f) throw qwen3::not_found("cannot read " + file);
  std::ostringstream ss;
  ss << f.rdbuf();
  return qwen3::parse_model_config(ss.str(), file);
}

template <typename T>
std::vector<T> choices(const std::string& v, std::vector<T> both, T (*one)(const std::string&)) {
  return v == "both" ? both : std::vector<T>{one(v)};
}

int kv_bits_of(const std::string& s) {
  if (s != "8" && s != "16") throw qwen3::invalid_argument("--kv-bits is 8, 16 or both");
  return std::stoi(s);
}

// The daemon's memory check for these options on this host: "" when the model fits, else its refusal.
std::string memory_refusal(const qwen3::ModelConfig& c, const qwen3::BpfEngineOptions& o,
                           const qwen3::engine::MemoryLimit& limit) {
  try {
    qwen3::engine::ModelPlan plan = qwen3::engine::make_model_plan(
        c, o.precision, o.weight_path == qwen3::WeightPath::arena, static_cast<uint32_t>(o.threads),
        qwen3::engine::engine_max_context(c, o.max_context), static_cast<uint32_t>(o.kv_bits));
    plan.layout.drive = o.kernel_driver;
    qwen3::engine::check_memory_fit(qwen3::memory_need(c, plan, o, limit), limit);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

nlohmann::json run_one(const qwen3::ModelConfig& c, const qwen3::BpfEngineOptions& o,
                       const qwen3::engine::MemoryLimit& limit, bool json) {
  const qwen3::ProgramCheck r = qwen3::verify_programs(c, o);
  const std::string refusal = r.program == "plan" ? r.limit : memory_refusal(c, o, limit);
  nlohmann::json j = {{"precision", qwen3::precision_name(o.precision)},
                      {"kv_bits", o.kv_bits},
                      {"weight_path", qwen3::weight_path_name(o.weight_path)},
                      {"kernel_driver", o.kernel_driver},
                      {"ok", r.ok},
                      {"seconds", r.seconds},
                      {"weight_bytes", r.weight_bytes},
                      {"buffer_bytes", r.buffer_bytes},
                      {"kv_bytes_per_position", r.kv_bytes_per_position}};
  if (!r.ok) j["program"] = r.program, j["limit"] = r.limit, j["error"] = r.error;
  j["memory_fits"] = refusal.empty();
  if (!refusal.empty()) j["memory_refusal"] = refusal;
  for (auto& p : r.programs) j["programs"][p.name] = p.verified_insns;
  if (json) return j;
  std::printf("%-4s kv%-2d %-5s %s  weights %s, buffers %s, KV %s/position  (%.1f s)\n",
              qwen3::precision_name(o.precision), o.kv_bits, qwen3::weight_path_name(o.weight_path),
              r.ok ? "PASS" : "FAIL", qwen3::engine::format_bytes(r.weight_bytes).c_str(),
              qwen3::engine::format_bytes(r.buffer_bytes).c_str(),
              qwen3::engine::format_bytes(r.kv_bytes_per_position).c_str(), r.seconds);
  if (r.ok)
    for (auto& p : r.programs) std::printf("    %-20s %8u instructions processed\n", p.name.c_str(), p.verified_insns);
  else
    std::printf("    %s: %s\n", r.program.c_str(), r.limit.c_str());
  if (r.program != "plan")
    std::printf("    memory: %s\n", refusal.empty() ? "fits this host" : refusal.c_str());
  return j;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config, precision = "both", kv = "both", weights = "map";
  qwen3::BpfEngineOptions base;
  base.kernel_driver = true;
  bool no_driver = false, json = false;
  int kv_budget_mib = 1024;
  CLI::App app{"Checks the BPF programs against the verifier at a model's shape, without its weights."};
  qwen3::cli_parse::init(app, "qwen3-bpf-shapecheck");
  app.add_option("CONFIG", config, "a config.json, or a model directory holding one")->required();
  app.add_option("--precision", precision, "q8 | q24 | q4 | both (q8 and q24) | all")->capture_default_str();
  app.add_option("--kv-bits", kv, "8 | 16 | both")->capture_default_str();
  app.add_option("--weights", weights, "map | arena | both")->capture_default_str();
  app.add_flag("--no-driver", no_driver, "leave out the kernel driver's programs (the daemon's driver = user)");
  app.add_option("--threads", base.threads, "worker threads (per-worker maps)")->capture_default_str();
  app.add_option("--max-context", base.max_context, "longest session; 0: the config's")->capture_default_str();
  app.add_option("--kv-budget-mib", kv_budget_mib, "KV budget counted in the memory check (the daemon's kv_budget_mib)")
      ->capture_default_str();
  app.add_flag("--json", json, "one JSON document instead of text");
  if (int rc = qwen3::cli_parse::parse(app, argc, argv); rc >= 0) return rc;
  base.kernel_driver = !no_driver;
  base.kv_budget_bytes = uint64_t(kv_budget_mib) << 20;
  try {
    const qwen3::ModelConfig c = read_config(config);
    const qwen3::engine::MemoryLimit limit = qwen3::engine::host_memory_limit();
    nlohmann::json out = {{"config", config}, {"results", nlohmann::json::array()}};
    bool all_ok = true;
    const std::vector<qwen3::Precision> precisions =
        precision == "all" ? std::vector{qwen3::Precision::q8, qwen3::Precision::q24, qwen3::Precision::q4}
                           : choices<qwen3::Precision>(precision, {qwen3::Precision::q8, qwen3::Precision::q24},
                                                       qwen3::parse_precision);
    for (auto p : precisions)
      for (auto w : choices<qwen3::WeightPath>(weights, {qwen3::WeightPath::map, qwen3::WeightPath::arena},
                                               qwen3::parse_weight_path))
        for (int bits : choices<int>(kv, {8, 16}, kv_bits_of)) {
          qwen3::BpfEngineOptions o = base;
          o.precision = p, o.weight_path = w, o.kv_bits = bits;
          nlohmann::json j = run_one(c, o, limit, json);
          all_ok = all_ok && j["ok"].get<bool>();
          out["results"].push_back(j);
        }
    out["memory_limit"] = {{"bytes", limit.bytes}, {"source", limit.source}};
    if (json) std::printf("%s\n", out.dump(2).c_str());
    else std::printf("memory the engine may use here: %s (%s)\n", qwen3::engine::format_bytes(limit.bytes).c_str(),
                     limit.source.c_str());
    return all_ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "qwen3-bpf-shapecheck: %s\n", e.what());
    return 2;
  }
}
