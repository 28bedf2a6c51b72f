// What a test-run may cost and reveal (issue 22): the loop budget, the
// unprivileged verifier (no kernel memory in output packets), the kernel
// memory of maps, and device-map values limited to the test's own interface.
#include <gtest/gtest.h>

#include <string>

#include "verify/loop_budget.h"
#include "verify/object_limits.h"
#include "verify/pipeline.h"
#include "verify/result_json.h"

using namespace qwen3::verify;

namespace {

PipelineOptions test_options() {
  PipelineOptions o;
  o.data_dir = QWEN3_VERIFY_TEST_DATA_DIR;
  o.compile_timeout_ms = 10000;
  return o;
}

const std::string kHeader = "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n";
const std::string kLicense = "char LICENSE[] SEC(\"license\") = \"GPL\";\n";
// The uapi header of the include tree may predate open-coded iterators (bpf_for).
const std::string kIterHeader =
    kHeader + "struct bpf_iter_num { __u64 __opaque[1]; } __attribute__((aligned(8)));\n";

// A frame whose first byte is `first` (the rest zero), long enough to run.
Fixture frame(const std::string& first_hex, const std::string& action, size_t bytes = 60) {
  return {"f" + first_hex, first_hex + std::string(2 * (bytes - 1), '0'), action, ""};
}

// The issue's reproducer: bpf_loop(d[0], outer) whose callback runs
// bpf_loop(1 << 23, inner): 200 * 8M iterations for a first byte of 0xc8
// (2.3 s on the dev machine, uninterruptible; years with a 32-bit count).
const std::string kNestedLoops = kHeader + R"(
static long inner(__u64 i, void *c) { return 0; }

static long outer(__u64 i, void *c)
{
	bpf_loop(1 << 23, inner, 0, 0);
	return 0;
}

SEC("xdp")
int nested(struct xdp_md *ctx)
{
	unsigned char *d = (void *)(long)ctx->data;
	if ((void *)(d + 1) > (void *)(long)ctx->data_end)
		return XDP_PASS;
	bpf_loop(d[0], outer, 0, 0);
	return XDP_PASS;
}
)" + kLicense;

TEST(VerifyLoopBudget, NestedBpfLoopIsRefusedBeforeItRuns) {
  Pipeline p(test_options());
  auto r = p.verify({kNestedLoops, {frame("c8", "XDP_PASS")}});
  EXPECT_EQ(r.decision, Decision::fail) << r.summary;
  EXPECT_EQ(r.first_failed_stage, Stage::verify) << r.summary;
  EXPECT_EQ(r.error_class, "verifier_limit") << r.summary;
  EXPECT_EQ(r.error_id, "BPFV-VER-LOOP-BUDGET");
  EXPECT_EQ(r.verifier_line, 18) << r.summary;  // the outer bpf_loop
  EXPECT_NE(r.summary.find("line 18: loop budget"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("8388608"), std::string::npos) << r.summary;
  EXPECT_GE(r.loop_iteration_bound, uint64_t{255} << 23);
  EXPECT_TRUE(r.fixtures.empty()) << "no fixture may run";
}

TEST(VerifyLoopBudget, BoundedLoopsRunAndReportTheirCost) {
  // A count from the packet, masked: 255 callback runs at most, nested in a bpf_for of 100.
  const std::string source = kIterHeader + R"(
static long add(__u64 i, void *c) { *(__u64 *)c += i; return 0; }

SEC("xdp")
int bounded(struct xdp_md *ctx)
{
	unsigned char *d = (void *)(long)ctx->data;
	__u64 sum = 0;
	int i;
	if ((void *)(d + 1) > (void *)(long)ctx->data_end)
		return XDP_PASS;
	bpf_for(i, 0, 100)
		bpf_loop(d[0] & 0xff, add, &sum, 0);
	return sum == 100 * (199 * 200 / 2) ? XDP_DROP : XDP_PASS;
}
)" + kLicense;
  Pipeline p(test_options());
  auto r = p.verify({source, {frame("c8", "XDP_DROP"), frame("00", "XDP_PASS")}});
  ASSERT_EQ(r.decision, Decision::pass) << r.summary << "\n" << r.verifier_log_excerpt;
  EXPECT_EQ(r.loop_iteration_bound, 100u + 100u * 255u);
  ASSERT_EQ(r.fixtures.size(), 2u);
  EXPECT_GT(r.fixtures[0].cpu_ns, 0);
  EXPECT_GT(r.fixtures[0].run_ns, 0u);
  const auto j = to_json(r);
  EXPECT_EQ(j["loop_iteration_bound"], 25600);
  EXPECT_TRUE(j["fixtures"][0].contains("run_ns"));
  EXPECT_TRUE(j["fixtures"][0].contains("cpu_ns"));
}

TEST(VerifyLoopBudget, NestedIteratorsOverTheBudgetAreRefused) {
  const std::string source = kIterHeader + R"(
SEC("xdp")
int grid(struct xdp_md *ctx)
{
	int i, j, n = 0;
	bpf_for(i, 0, 5000) {
		bpf_for(j, 0, 5000)
			n += j;
	}
	return n ? XDP_PASS : XDP_DROP;
}
)" + kLicense;
  Pipeline p(test_options());
  auto r = p.verify({source, {frame("00", "XDP_PASS")}});
  EXPECT_EQ(r.decision, Decision::fail) << r.summary;
  EXPECT_EQ(r.error_class, "verifier_limit") << r.summary;
  EXPECT_EQ(r.verifier_line, 9) << r.summary;  // the outer bpf_for
  EXPECT_TRUE(r.fixtures.empty());
}

// The bound on hand-written instructions: counts through loads, comparisons and nesting.
bpf_insn mov(int dst, int32_t imm) { return {BPF_ALU64 | BPF_MOV | BPF_K, static_cast<uint8_t>(dst), 0, 0, imm}; }
bpf_insn call(int32_t helper) { return {BPF_JMP | BPF_CALL, 0, 0, 0, helper}; }
bpf_insn exit_insn() { return {BPF_JMP | BPF_EXIT, 0, 0, 0, 0}; }
bpf_insn load(int dst, int src, uint8_t size) { return {static_cast<uint8_t>(BPF_LDX | BPF_MEM | size), static_cast<uint8_t>(dst), static_cast<uint8_t>(src), 0, 0}; }
// r2 = address of the function at `target`, as instructions at `at` and `at + 1`.
void callback_at(std::vector<bpf_insn>& v, int target) {
  const int at = static_cast<int>(v.size());
  v.push_back({BPF_LD | BPF_IMM | BPF_DW, 2, BPF_PSEUDO_FUNC, 0, target - at - 1});
  v.push_back({0, 0, 0, 0, 0});
}

TEST(VerifyLoopBudget, BoundsFollowCountsAndNesting) {
  // main: bpf_loop(1000, cb); cb: bpf_loop(*(u32 *)ctx, leaf); leaf: return 0.
  std::vector<bpf_insn> v = {mov(1, 1000)};
  callback_at(v, 8);
  v.insert(v.end(), {mov(3, 0), mov(4, 0), call(BPF_FUNC_loop), mov(0, 0), exit_insn()});
  v.push_back(load(1, 2, BPF_W));  // 8: cb
  callback_at(v, 14);
  v.insert(v.end(), {call(BPF_FUNC_loop), mov(0, 0), exit_insn()});
  v.insert(v.end(), {mov(0, 0), exit_insn()});  // 14: leaf
  LoopBudgetInput in;
  in.insns = v;
  in.verified_insns = 20;
  LoopBound b = bound_loops(in);
  EXPECT_EQ(b.iterations, 1000u * (1u + kKernelMaxLoops));  // a 32-bit count is capped by the kernel
  EXPECT_EQ(b.insn, 5);
  EXPECT_TRUE(b.in_main);
  EXPECT_NE(b.path.find("in the callback: bpf_loop running its callback up to 8388608 times"), std::string::npos) << b.path;

  // A byte count checked against 16 on the way: at most 16 runs.
  v = {load(1, 1, BPF_B), {BPF_JMP | BPF_JGT | BPF_K, 1, 0, 5, 16}};
  callback_at(v, 9);
  v.insert(v.end(), {mov(3, 0), mov(4, 0), call(BPF_FUNC_loop), mov(0, 0), exit_insn(), mov(0, 0), exit_insn()});
  in.insns = v;
  EXPECT_EQ(bound_loops(in).iterations, 16u);

  // A callback that runs itself has no bound.
  v = {mov(1, 2)};
  callback_at(v, 0);
  v.insert(v.end(), {call(BPF_FUNC_loop), mov(0, 0), exit_insn()});
  in.insns = v;
  EXPECT_EQ(bound_loops(in).iterations, UINT64_MAX);
}

// Without CAP_PERFMON the verifier refuses reads of uninitialised stack: the
// 480 bytes would carry kernel text, JIT, heap and stack addresses.
TEST(VerifyKernelMemory, UninitialisedStackCannotReachThePacket) {
  const std::string source = kHeader + R"(
SEC("xdp")
int leak(struct xdp_md *ctx)
{
	char buf[480];
	bpf_xdp_store_bytes(ctx, 0, buf, sizeof buf);
	return XDP_TX;
}
)" + kLicense;
  Pipeline p(test_options());
  auto r = p.verify({source, {frame("00", "XDP_TX", 504)}});
  EXPECT_EQ(r.decision, Decision::fail) << r.summary;
  EXPECT_EQ(r.first_failed_stage, Stage::verify) << r.summary;
  EXPECT_NE(r.verifier_message.find("stack"), std::string::npos) << r.verifier_message;
  EXPECT_TRUE(r.fixtures.empty());
}

TEST(VerifyKernelMemory, PointersCannotBeStoredIntoThePacket) {
  const std::string source = kHeader + R"(
SEC("xdp")
int leak_pointer(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 *out = data;
	if ((void *)(out + 1) > data_end)
		return XDP_PASS;
	*out = (__u64)(long)ctx;
	return XDP_TX;
}
)" + kLicense;
  Pipeline p(test_options());
  auto r = p.verify({source, {frame("00", "XDP_TX")}});
  EXPECT_EQ(r.decision, Decision::fail) << r.summary;
  EXPECT_EQ(r.first_failed_stage, Stage::verify) << r.summary;
  EXPECT_NE(r.verifier_message.find("leaks addr"), std::string::npos) << r.verifier_message;
}

TEST(VerifyMapMemory, CountsWhatTheKernelAllocates) {
  // 60 M entries x 15 hashes: a 2^31-bit array, 256 MiB, not 60 MB.
  EXPECT_EQ(kernel_map_bytes(BPF_MAP_TYPE_BLOOM_FILTER, 0, 1, 60'000'000, 0, 15, 2), (uint64_t{256} << 20) + 1024);
  EXPECT_EQ(kernel_map_bytes(BPF_MAP_TYPE_BLOOM_FILTER, 0, 4, 1000, 0, 0, 2), 1024u + 1024u);  // 7000 bits -> 8192
  // Hash maps: preallocated elements with their 48-byte headers, and the buckets.
  EXPECT_GE(kernel_map_bytes(BPF_MAP_TYPE_HASH, 4, 4, 1'000'000, 0, 0, 2), uint64_t{64'000'000});
  EXPECT_GE(kernel_map_bytes(BPF_MAP_TYPE_PERCPU_ARRAY, 4, 8, 1000, 0, 0, 64), uint64_t{1000 * 8 * 64});

  const std::string source = kHeader + R"(
struct {
	__uint(type, BPF_MAP_TYPE_BLOOM_FILTER);
	__type(value, __u8);
	__uint(max_entries, 60000000);
	__uint(map_extra, 15);
} seen SEC(".maps");

SEC("xdp")
int bloom(struct xdp_md *ctx)
{
	__u8 v = 1;
	return bpf_map_peek_elem(&seen, &v) ? XDP_PASS : XDP_DROP;
}
)" + kLicense;
  Pipeline p(test_options());
  auto r = p.verify({source, {}});
  EXPECT_EQ(r.decision, Decision::fail) << r.summary;
  EXPECT_NE(r.summary.find("268436480 bytes"), std::string::npos) << r.summary;
  EXPECT_NE(r.summary.find("the limit is 67108864"), std::string::npos) << r.summary;
}

// A devmap value is an ifindex the kernel looks up when it is written: host
// indexes would tell which interfaces exist. Only the test's loopback may be named.
TEST(VerifyDeviceMaps, ValuesNameOnlyTheTestsLoopback) {
  const std::string source = kHeader + R"(
struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__type(key, __u32);
	__type(value, __u32);
	__uint(max_entries, 1);
} tx_port SEC(".maps");

SEC("xdp")
int redirect(struct xdp_md *ctx)
{
	return bpf_redirect_map(&tx_port, 0, 0);
}
)" + kLicense;
  Pipeline p(test_options());
  auto r = p.verify({source, {frame("00", "XDP_REDIRECT")}, {{"tx_port", "00000000", "02000000"}}});
  EXPECT_EQ(r.decision, Decision::error) << r.summary;
  EXPECT_EQ(r.first_failed_stage, Stage::behaviour) << r.summary;
  EXPECT_NE(r.summary.find("ifindex 2 is not an interface of the test"), std::string::npos) << r.summary;
  r = p.verify({source, {frame("00", "XDP_REDIRECT")}, {{"tx_port", "00000000", "01000000"}}});
  EXPECT_EQ(r.decision, Decision::pass) << r.summary;
}

}  // namespace
