// Bigger Qwen3 shapes without their weights (engine/shape_check.h): the BPF
// programs through the daemon's load path and the verifier at the Qwen3-4B and
// 8B shapes (tests/engine/shapes/*.json), the limits that refuse a shape, and
// the memory check that refuses a model before its weight maps exist.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/error.h"
#include "engine/bpf_programs.h"
#include "engine/memory_budget.h"
#include "engine/model_plan.h"
#include "engine/shape_check.h"
#include "engine/verifier_log.h"
#include "model/config_parser.h"
#include "test_backends.h"

namespace qwen3 {
namespace {

ModelConfig shape(const std::string& name) {
  const std::string path = std::string(QWEN3_SHAPES_DIR) + "/" + name + ".json";
  std::ifstream f(path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_model_config(ss.str(), path);
}

BpfEngineOptions daemon_options(Precision p, int kv_bits) {
  BpfEngineOptions o;
  o.precision = p;
  o.kv_bits = kv_bits;
  o.threads = 2;
  o.kernel_driver = true;  // driver = auto (the default) loads the kernel driver's programs
  return o;
}

// Every program of the daemon's load verifies, under the 1M limit, at the shape.
void expect_verifies(const std::string& name, Precision p, int kv_bits) {
  const ProgramCheck r = verify_programs(shape(name), daemon_options(p, kv_bits));
  ASSERT_TRUE(r.ok) << name << ": " << r.program << ": " << r.limit;
  bool ctl = false, att = false;
  for (auto& st : r.programs) {
    std::printf("%s %s kv%d %-20s %u\n", name.c_str(), precision_name(p), kv_bits, st.name.c_str(), st.verified_insns);
    EXPECT_GT(st.verified_insns, 0u) << st.name;
    EXPECT_LT(st.verified_insns, 1000000u) << st.name;
    ctl = ctl || st.name == "qn_drive_arm_ctl";
    att = att || st.name == "qn_attention";
  }
  EXPECT_TRUE(ctl && att) << "the kernel driver's and the attention program were verified";
  std::printf("%s: %.1f s\n", name.c_str(), r.seconds);
}

TEST(ShapeCheck, Qwen3_4bVerifiesInQ24WithCompactKv) { expect_verifies("qwen3-4b", Precision::q24, 8); }
TEST(ShapeCheck, Qwen3_8bVerifiesInQ8WithInt16Kv) { expect_verifies("qwen3-8b", Precision::q8, 16); }
// q24's row kernel walked its groups one by one until session 16: the 8B
// shape's kernel driver (qn_drive_arm_mm) stopped at the 1M limit.
TEST(ShapeCheck, Qwen3_8bVerifiesInQ24WithCompactKv) { expect_verifies("qwen3-8b", Precision::q24, 8); }

// The arena holds at most 4 GiB: the 4B shape needs 4,114 MiB even in q8.
TEST(ShapeCheck, ArenaRefusesWeightsOver4GiB) {
  BpfEngineOptions o = daemon_options(Precision::q8, 8);
  o.weight_path = WeightPath::arena;
  const ProgramCheck r = verify_programs(shape("qwen3-4b"), o);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.program, "plan");
  EXPECT_NE(r.limit.find("exceed the 4 GiB BPF arena"), std::string::npos) << r.limit;
  EXPECT_NE(r.limit.find("weight_path = map"), std::string::npos) << r.limit;
}

// The 8B shape in q24 against a 16 GiB limit: refused with every figure.
TEST(MemoryFit, RefusesTheModelWithItsFigures) {
  const ModelConfig c = shape("qwen3-8b");
  BpfEngineOptions o = daemon_options(Precision::q24, 8);
  o.kv_budget_bytes = uint64_t(1024) << 20;
  const engine::ModelPlan plan = engine::make_model_plan(c, o.precision, false, 2, engine::engine_max_context(c, 0), 8);
  const engine::MemoryLimit limit{uint64_t(16) << 30, "a test limit"};
  const engine::MemoryNeed need = memory_need(c, plan, o, limit);
  EXPECT_EQ(need.weights, engine::weight_map_bytes(plan.layout));
  EXPECT_GT(need.weights, uint64_t(30) << 30);  // 8.2 G parameters of 4 bytes
  try {
    engine::check_memory_fit(need, limit);
    FAIL() << "a 30 GiB model fitted 16 GiB";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::resource_exhausted);
    for (const std::string& part : {engine::format_bytes(need.weights), std::string("KV budget 1.00 GiB"),
                                    std::string("limit is 16.00 GiB, from a test limit"),
                                    engine::format_bytes(need.weights + need.buffers + need.kv_budget - limit.bytes) +
                                        " short",
                                    std::string("precision = q8"), std::string("weights in q24")})
      EXPECT_NE(m.find(part), std::string::npos) << "missing '" << part << "' in: " << m;
  }
}

// The same check in the backend, before any map exists: a real model, a 2 MiB limit.
TEST(MemoryFit, BackendRefusesBeforeCreatingMaps) {
  BpfEngineOptions o = daemon_options(Precision::q8, 8);
  o.kernel_driver = false;
  o.kv_budget_bytes = uint64_t(64) << 20;
  o.memory_limit_bytes = uint64_t(2) << 20;
  try {
    make_bpf_backend(test_support::open_model("tiny"), o);
    FAIL() << "the tiny model loaded under a 2 MiB limit";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::resource_exhausted) << m;
    EXPECT_NE(m.find("limit is 2.0 MiB, from the engine option memory_limit_bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("KV budget 64.0 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("kv_budget_mib"), std::string::npos) << m;
  }
  o.memory_limit_bytes = uint64_t(4) << 30;  // the same model under a limit it fits
  EXPECT_NO_THROW(make_bpf_backend(test_support::open_model("tiny"), o));
}

// A cgroup v1 hierarchy as the kernel shows it: the tighter limit is the parent's.
TEST(MemoryFit, HostLimitReadsTheCgroupHierarchy) {
  const std::string root = ::testing::TempDir() + "/shape_check_cgroup";
  std::filesystem::remove_all(root);
  auto put = [&](const std::string& rel, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root + rel).parent_path());
    std::ofstream(root + rel) << text;
  };
  put("/proc/meminfo", "MemTotal: 16777216 kB\nMemFree: 1000 kB\nMemAvailable: 8388608 kB\n");
  put("/proc/self/cgroup", "5:devices:/\n4:memory:/svc/daemon\n0::/\n");
  put("/proc/self/mountinfo", "34 30 0:31 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n");
  const std::string cg = "/sys/fs/cgroup/memory";
  put(cg + "/memory.limit_in_bytes", "9223372036854771712\n");
  put(cg + "/svc/memory.limit_in_bytes", std::to_string(uint64_t(3) << 30) + "\n");
  put(cg + "/svc/memory.usage_in_bytes", std::to_string(uint64_t(1) << 30) + "\n");
  put(cg + "/svc/memory.stat", "cache 5\ntotal_inactive_file " + std::to_string(uint64_t(256) << 20) + "\n");
  put(cg + "/svc/daemon/memory.limit_in_bytes", std::to_string(uint64_t(4) << 30) + "\n");
  put(cg + "/svc/daemon/memory.usage_in_bytes", std::to_string(uint64_t(1) << 30) + "\n");
  engine::MemoryLimit l = engine::host_memory_limit(root);
  EXPECT_EQ(l.bytes, (uint64_t(3) << 30) - (uint64_t(1) << 30) + (uint64_t(256) << 20));
  EXPECT_NE(l.source.find(root + cg + "/svc/memory.limit_in_bytes"), std::string::npos) << l.source;
  // no cgroup limit: MemAvailable (8 GiB) less 1/32 of MemTotal (512 MiB)
  put(cg + "/svc/memory.limit_in_bytes", "9223372036854771712\n");
  put(cg + "/svc/daemon/memory.limit_in_bytes", "9223372036854771712\n");
  l = engine::host_memory_limit(root);
  EXPECT_EQ(l.bytes, (uint64_t(8) << 30) - (uint64_t(512) << 20));
  EXPECT_NE(l.source.find("MemAvailable 8.00 GiB"), std::string::npos) << l.source;
  std::filesystem::remove_all(root);
}

// cgroup v2 (unified): memory.max "max" is no limit; the service's own memory.max binds.
TEST(MemoryFit, HostLimitReadsCgroupV2) {
  const std::string root = ::testing::TempDir() + "/shape_check_cgroup2";
  std::filesystem::remove_all(root);
  auto put = [&](const std::string& rel, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(root + rel).parent_path());
    std::ofstream(root + rel) << text;
  };
  put("/proc/meminfo", "MemTotal: 16777216 kB\nMemAvailable: 8388608 kB\n");
  put("/proc/self/cgroup", "0::/system.slice/qwen3-bpfd.service\n");
  put("/proc/self/mountinfo", "30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n");
  const std::string cg = "/sys/fs/cgroup";
  put(cg + "/system.slice/memory.max", "max\n");
  put(cg + "/system.slice/memory.current", "123\n");
  put(cg + "/system.slice/qwen3-bpfd.service/memory.max", std::to_string(uint64_t(2) << 30) + "\n");
  put(cg + "/system.slice/qwen3-bpfd.service/memory.current", std::to_string(uint64_t(512) << 20) + "\n");
  put(cg + "/system.slice/qwen3-bpfd.service/memory.stat",
      "anon 1\ninactive_file " + std::to_string(uint64_t(128) << 20) + "\nactive_file 7\n");
  const engine::MemoryLimit l = engine::host_memory_limit(root);
  EXPECT_EQ(l.bytes, (uint64_t(2) << 30) - (uint64_t(512) << 20) + (uint64_t(128) << 20));
  EXPECT_NE(l.source.find("/system.slice/qwen3-bpfd.service/memory.max 2.00 GiB"), std::string::npos) << l.source;
  std::filesystem::remove_all(root);
}

// The verifier's words for its limits (kernel 6.x), as a failed load quotes them.
TEST(VerifierLog, NamesTheLimit) {
  const std::string log =
      "libbpf: prog 'qn_drive_arm_ctl': BPF program load failed: Argument list too long\n"
      "libbpf: prog 'qn_drive_arm_ctl': -- BEGIN PROG LOAD LOG --\n"
      "BPF program is too large. Processed 1000001 insn\n"
      "processed 1000001 insns (limit 1000000) max_states_per_insn 24 total_states 40000\n"
      "-- END PROG LOAD LOG --\n"
      "libbpf: prog 'qn_drive_arm_ctl': failed to load: -7\n";
  EXPECT_EQ(engine::failed_program(log), "qn_drive_arm_ctl");
  const std::string l = engine::verifier_limit(log);
  EXPECT_EQ(l.rfind("the verifier's complexity limit", 0), 0u) << l;
  EXPECT_NE(l.find("Processed 1000001 insn"), std::string::npos) << l;
  EXPECT_NE(engine::verifier_limit("invalid access to map value, value_size=64 off=64 size=4\n")
                .find("a map value's bounds"),
            std::string::npos);
}

}  // namespace
}  // namespace qwen3
