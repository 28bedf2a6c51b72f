// Unit tests of verifier log reading and of Pipeline::verify end to end (counts, diagnosis,
// inherited map fds, errors).
#include "verify_test_common.h"

// ---------------------------------------------------------------- verifier log reading

TEST(VerifyLog, ClassifiesMessages) {
  EXPECT_EQ(classify_verifier_error("R2 !read_ok", ""), VerifierClass::uninitialized);
  EXPECT_EQ(classify_verifier_error("R0 invalid mem access 'map_value_or_null'", ""), VerifierClass::null_check_missing);
  EXPECT_EQ(classify_verifier_error("invalid access to packet, off=12 size=1, R1(id=0,off=12,r=0)", ""),
            VerifierClass::packet_bounds);
  EXPECT_EQ(classify_verifier_error("invalid bpf_context access off=64 size=4", ""), VerifierClass::invalid_context_access);
  EXPECT_EQ(classify_verifier_error("infinite loop detected at insn 3", ""), VerifierClass::unbounded_loop);
  EXPECT_EQ(classify_verifier_error("R2 type=scalar expected=fp", "(85) call bpf_map_lookup_elem#1"),
            VerifierClass::invalid_helper_argument);
  EXPECT_EQ(classify_verifier_error("At program exit the register R0 has unknown scalar value", "(95) exit"),
            VerifierClass::other);
}

TEST(VerifyLog, FindsInstructionLineAndMessage) {
  const std::string log =
      "0: R1=ctx() R10=fp0\n"
      "; void *data = (void *)(long)ctx->data; @ prog.c:5\n"
      "0: (61) r1 = *(u32 *)(r1 +0)          ; R1=pkt(r=0)\n"
      "; if (eth->h_proto == 0x0008) return XDP_PASS; @ prog.c:8\n"
      "1: (71) r2 = *(u8 *)(r1 +12)\n"
      "invalid access to packet, off=12 size=1, R1(id=0,off=12,r=0)\n"
      "R1 offset is outside of the packet\n"
      "processed 2 insns (limit 1000000) max_states_per_insn 0 total_states 0 peak_states 0 mark_read 0\n";
  auto a = analyze_verifier_log(log, "/src/prog.c");
  EXPECT_EQ(a.insn, 1);
  EXPECT_EQ(a.insn_text, "(71) r2 = *(u8 *)(r1 +12)");
  EXPECT_EQ(a.line, 8);
  EXPECT_EQ(a.processed_insns, 2u);
  EXPECT_EQ(a.verifier_class, VerifierClass::packet_bounds);
  EXPECT_NE(a.message.find("outside of the packet"), std::string::npos);
}

TEST(VerifyLog, NegativeOffsetThroughAPacketPointerIsABoundsProblem) {
  const std::string at_load =
      "12: (bf) r3 = r1                      ; R1=pkt(id=1,off=14,r=0,smin=-128,smax=63)\n"
      "; return *q == 0 ? XDP_DROP : XDP_PASS; @ prog.c:23\n"
      "15: (71) r1 = *(u8 *)(r1 +0)\n"
      "R1 min value is negative, either use unsigned index or do a if (index >=0) check.\n"
      "processed 16 insns (limit 1000000)\n";
  EXPECT_EQ(analyze_verifier_log(at_load, "/src/prog.c").verifier_class, VerifierClass::packet_bounds);
  // The same message for a helper's length argument stays a helper-argument problem.
  const std::string at_call =
      "7: (bf) r3 = r1                      ; R3=scalar(smin=-1)\n"
      "8: (85) call bpf_xdp_load_bytes#189\n"
      "R4 min value is negative, either use unsigned or 'var &= const'\n"
      "processed 9 insns (limit 1000000)\n";
  EXPECT_EQ(analyze_verifier_log(at_call, "/src/prog.c").verifier_class, VerifierClass::invalid_helper_argument);
}

TEST(VerifyLog, LongAnnotationLines) {
  const std::string log = "; int x = " + std::string(20000, '1') + "; @ prog.c:7\n"
                          "3: (71) r2 = *(u8 *)(r1 +12)\n"
                          "invalid access to packet, off=12 size=1, R1(id=0,off=12,r=0)\n"
                          "processed 4 insns (limit 1000000)\n";
  auto a = analyze_verifier_log(log, "/src/prog.c");
  EXPECT_EQ(a.line, 7);
  EXPECT_EQ(a.verifier_class, VerifierClass::packet_bounds);
}

// ---------------------------------------------------------------- pipeline

TEST(VerifyPipeline, PassWithoutFixturesSaysBehaviourWasNotChecked) {
  Pipeline p(test_options());
  auto r = p.verify({kGoodProgram, {}});
  EXPECT_EQ(r.decision, Decision::pass) << r.summary;
  EXPECT_FALSE(r.behaviour_checked);
  EXPECT_NE(r.summary.find("NOT checked"), std::string::npos);
}

TEST(VerifyPipeline, InitialMapContentsMustMatchThePrograms) {
  Pipeline p(test_options());
  VerifyRequest req{kGoodProgram, arp_fixtures(), {{"no_such_map", "00000000", "01000000"}}};
  auto r = p.verify(req);
  EXPECT_EQ(r.decision, Decision::error) << r.summary;
  EXPECT_EQ(r.first_failed_stage, Stage::behaviour);
  EXPECT_NE(r.summary.find("no map named 'no_such_map'"), std::string::npos) << r.summary;
  EXPECT_EQ(r.error_id, "BPFV-FIX-MAPS");
  req.initial_maps = {{"x", "0g", ""}};
  r = p.verify(req);
  EXPECT_EQ(r.decision, Decision::error);
  EXPECT_NE(r.summary.find("key_hex is malformed"), std::string::npos) << r.summary;
}

TEST(VerifyPipeline, ResultJsonCarriesCountsAndDiagnosis) {
  Pipeline p(test_options());
  auto fixtures = arp_fixtures();
  fixtures.push_back({"runt", "0200000000020200", "XDP_PASS", ""});
  auto pass = to_json(p.verify({kGoodProgram, fixtures}));
  EXPECT_EQ(pass["decision"], "pass");
  EXPECT_EQ(pass["fixtures_not_run"], 1);
  EXPECT_EQ(pass["fixtures"][2]["ran"], false);
  EXPECT_EQ(pass["error_id"], "");
  auto fail = to_json(p.verify({kBrokenProgram, fixtures}));
  EXPECT_EQ(fail["error_id"], "BPFV-VER-PKT-BOUNDS");
  EXPECT_EQ(fail["error_class"], "packet_bounds");
  EXPECT_EQ(fail["span"]["line"], 12);
  EXPECT_EQ(fail["span"]["text"], "\tif (eth->h_proto == bpf_htons(ETH_P_ARP))");
  EXPECT_GT(fail["span"]["column_start"].get<int>(), 0);
  EXPECT_FALSE(fail["next_action"].get<std::string>().empty());
}

TEST(VerifyFixtures, NumericActions) {
  auto f = parse_fixture_file(R"({"tests":[{"name":"a","packet_hex":"00","expected_action":1}]})");
  EXPECT_EQ(f.fixtures[0].expected_action, "XDP_DROP");
}

// Inline asm can load any fd of the loading process as a map ("ld_pseudo r1,
// 1, FD"); the daemon holds the model's and the sessions' maps. The loader child
// keeps none of them: a map of this process, with a secret in it, stays out of reach.
TEST(VerifyPipeline, InheritedMapFdsAreOutOfReach) {
  const int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "secret_map", 4, 16, 1, nullptr);
  ASSERT_GE(fd, 0) << strerror(errno);
  const char secret[17] = "QWEN3-FD-SECRET!";
  const __u32 key = 0;
  ASSERT_EQ(bpf_map_update_elem(fd, &key, secret, BPF_ANY), 0);
  const std::string source = R"(#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int steal(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 *out = data;
	void *map;
	__u32 key = 0;
	if ((void *)(out + 2) > data_end)
		return XDP_PASS;
	asm volatile("ld_pseudo %[m], 1, )" + std::to_string(fd) + R"(" : [m] "=r"(map));
	__u64 *v = bpf_map_lookup_elem(map, &key);
	if (!v)
		return XDP_DROP;
	out[0] = v[0];
	out[1] = v[1];
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
)";
  EXPECT_TRUE(check_policy(source, {}).empty());  // inline asm without directives is allowed
  Pipeline p(test_options());
  const std::string macs = "020000000002020000000001";
  auto r = p.verify({source, {{"ipv4", macs + "0800" + std::string(80, '0'), "XDP_TX", ""}}});
  EXPECT_EQ(r.decision, Decision::fail) << r.summary;
  EXPECT_EQ(r.first_failed_stage, Stage::verify) << r.summary;
  EXPECT_NE(r.verifier_message.find("fd " + std::to_string(fd)), std::string::npos) << r.verifier_message;
  const std::string text = to_json_text(r);
  EXPECT_EQ(text.find("QWEN3-FD-SECRET"), std::string::npos);
  EXPECT_EQ(text.find(encode_hex(std::string(secret, 16))), std::string::npos);
  close(fd);
}

TEST(VerifyPipeline, TooManyFixturesIsAnError) {
  PipelineOptions o = test_options();
  o.max_fixtures = 1;
  Pipeline p(o);
  auto r = p.verify({kGoodProgram, arp_fixtures()});
  EXPECT_EQ(r.decision, Decision::error);
  EXPECT_EQ(r.first_failed_stage, Stage::behaviour);
}

TEST(VerifyPipeline, BrokenSandboxIsAnInfrastructureError) {
  PipelineOptions o = test_options();
  o.clang = "/nonexistent/clang-19";
  Pipeline p(o);
  auto r = p.verify({kGoodProgram, arp_fixtures()});
  EXPECT_EQ(r.decision, Decision::error);
  EXPECT_EQ(r.first_failed_stage, Stage::infrastructure);
  EXPECT_NE(r.summary.find("not found"), std::string::npos);
}
