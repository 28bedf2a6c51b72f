// Issue 28: the completion guard, the lost-proof trace on real verifier logs,
// the short and bpfix-shaped diagnostics, and the repair engine on real
// programs with fixtures, one test per repair class (they load programs:
// root/CAP_BPF and the compiler sandbox, as the other verify tests).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "verify/completion_guard.h"
#include "verify/diagnostic_v2.h"
#include "verify/fixtures.h"
#include "verify/generate.h"
#include "verify/pipeline.h"
#include "verify/repair.h"
#include "verify/unified_diff.h"

using namespace qwen3::verify;

namespace {

PipelineOptions test_options() {
  PipelineOptions o;
  o.data_dir = QWEN3_VERIFY_TEST_DATA_DIR;
  o.compile_timeout_ms = 10000;
  return o;
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string corpus(const std::string& name) { return read(std::string(QWEN3_VERIFY_CORPUS_DIR) + "/" + name); }

std::vector<Fixture> corpus_fixtures(const std::string& name) {
  const auto j = nlohmann::json::parse(corpus(name + ".json"));
  return parse_fixture_file(j["fixtures"].dump()).fixtures;
}

const std::string kMacs = "020000000002020000000001";
// An IPv4/UDP frame (42 bytes) and an IPv4/TCP one (54 bytes).
const std::string kUdp = kMacs + "0800" + "45000024000000004011" + std::string(20, '0') + std::string(16, '0');
const std::string kTcp = kMacs + "0800" + "45000028000000004006" + std::string(20, '0') + std::string(40, '0');

int added_lines(const std::string& diff) {
  int n = 0;
  std::istringstream in(diff);
  std::string l;
  while (std::getline(in, l)) n += l.rfind("+", 0) == 0 && l.rfind("+++", 0) != 0;
  return n;
}

// Runs the engine on a failing program and checks the fix: passes everything, minimal diff.
RepairOutcome expect_fixed(const std::string& source, const std::vector<Fixture>& fixtures, const std::string& kind,
                           int max_added = 2) {
  Pipeline p(test_options());
  const VerifyRequest req{source, fixtures, {}};
  const VerifyResult before = p.verify(req);
  EXPECT_EQ(before.decision, Decision::fail) << before.summary;
  RepairOutcome out = repair_program(p, req, before);
  EXPECT_TRUE(out.fixed) << before.summary << "\n" << out.note;
  if (!out.fixed) return out;
  EXPECT_EQ(out.result.decision, Decision::pass) << out.result.summary;
  // Re-checked from scratch: the repaired source passes on its own.
  EXPECT_EQ(p.verify({out.source, fixtures, {}}).decision, Decision::pass);
  EXPECT_FALSE(out.steps.empty());
  if (!out.steps.empty()) {
    EXPECT_EQ(out.steps.front().kind, kind) << out.steps.front().description;
  }
  EXPECT_LE(added_lines(out.diff), max_added) << out.diff;
  EXPECT_NE(out.diff.find("--- a/prog.c"), std::string::npos);
  return out;
}

}  // namespace

// ---------------------------------------------------------------- completion guard

TEST(CompletionGuard, StopsAtTheClosingFence) {
  const std::string text = "Here it is:\n```c\nint x;\n```\nAnd some more talk\n```c\nint y;\n```\n";
  std::string note;
  EXPECT_EQ(tidy_completion(text, &note), "Here it is:\n```c\nint x;\n```\n");
  EXPECT_NE(note.find("closes the code block"), std::string::npos);
  // Token by token, as a stream: it says stop at the fence and ignores the rest.
  CompletionGuard g;
  bool stopped = false;
  size_t fed = 0;
  for (; fed < text.size() && !stopped; fed += 3) stopped = g.feed(text.substr(fed, 3));
  EXPECT_TRUE(stopped);
  EXPECT_LT(fed, text.size());
  EXPECT_EQ(g.stop(), GuardStop::fence_closed);
  EXPECT_EQ(g.text(), "Here it is:\n```c\nint x;\n```\n");
}

TEST(CompletionGuard, CutsARunawayIncludeLine) {
  // What issue 28 saw: about 250 copies of one include line.
  std::string text = "```c\n#include <linux/bpf.h>\n";
  for (int i = 0; i < 250; ++i) text += "#include <bpf/bpf_tracing.h>\n";
  std::string note;
  const std::string kept = tidy_completion(text, &note);
  EXPECT_EQ(kept, "```c\n#include <linux/bpf.h>\n#include <bpf/bpf_tracing.h>\n");
  EXPECT_NE(note.find("bpf_tracing.h"), std::string::npos);
  // Alternating includes repeat as a block.
  std::string two = "```c\n";
  for (int i = 0; i < 40; ++i) two += "#include <a.h>\n#include <b.h>\n";
  EXPECT_EQ(tidy_completion(two), "```c\n#include <a.h>\n#include <b.h>\n");
}

TEST(CompletionGuard, CutsARepeatedBlockButKeepsCodesOwnRepetition) {
  std::string loop = "```c\nint f(void)\n{\n";
  for (int i = 0; i < 20; ++i) loop += "\tx = x + 1;\n\ty = y + 1;\n";
  EXPECT_EQ(tidy_completion(loop), "```c\nint f(void)\n{\n\tx = x + 1;\n\ty = y + 1;\n");
  // Closing braces in a row, a blank line or two, the same return in two branches: untouched.
  const std::string code =
      "```c\nint f(int a)\n{\n\tif (a) {\n\t\tif (a > 1) {\n\t\t\treturn 1;\n\t\t}\n\t}\n\n\n\treturn 1;\n}\n```\n";
  CompletionGuard g;
  g.feed(code);
  g.finish();
  EXPECT_EQ(g.stop(), GuardStop::fence_closed);
  EXPECT_EQ(g.text(), code);
}

// ---------------------------------------------------------------- lost proofs, short diagnostic

TEST(VerifyProof, ShortBoundsCheckNamesTheCheckAndTheBytesNeeded) {
  Pipeline p(test_options());
  const VerifyResult r = p.verify({corpus("verifier_bounds_check_too_short.c"), {}});
  ASSERT_EQ(r.verifier_class, VerifierClass::packet_bounds) << r.summary;
  EXPECT_EQ(r.verifier_line, 17);
  EXPECT_EQ(r.proof_line, 13) << r.proof_note;  // if ((void *)(eth + 1) > data_end)
  EXPECT_NE(r.proof_source_line.find("eth + 1"), std::string::npos);
  EXPECT_NE(r.proof_note.find("proves 14 byte"), std::string::npos) << r.proof_note;
  EXPECT_NE(r.required_proof.find("data + 24 <= data_end before line 17"), std::string::npos) << r.required_proof;
  EXPECT_LT(r.short_diagnostic.size(), 1200u);
  EXPECT_NE(r.short_diagnostic.find("line 13"), std::string::npos) << r.short_diagnostic;
  EXPECT_NE(r.short_diagnostic.find("data + 24 <= data_end"), std::string::npos) << r.short_diagnostic;
}

TEST(VerifyProof, MissingCheckAndNullAndUninitialisedKey) {
  Pipeline p(test_options());
  const VerifyResult none = p.verify({corpus("verifier_no_bounds_check.c"), {}});
  EXPECT_EQ(none.proof_line, 9) << none.proof_note;  // void *data = (void *)(long)ctx->data;
  EXPECT_NE(none.proof_note.find("never compared with data_end"), std::string::npos) << none.proof_note;
  // clang reads h_proto a byte at a time: the first load, at offset 12, is the one rejected.
  EXPECT_NE(none.required_proof.find("data + 13 <= data_end before line 11"), std::string::npos) << none.required_proof;

  const VerifyResult null = p.verify({corpus("verifier_null_hash_read.c"), {}});
  ASSERT_EQ(null.verifier_class, VerifierClass::null_check_missing) << null.summary;
  EXPECT_EQ(null.proof_line, 16) << null.proof_note;  // the bpf_map_lookup_elem
  EXPECT_NE(null.required_proof.find("bpf_map_lookup_elem at line 16 must be compared with NULL"), std::string::npos)
      << null.required_proof;

  const VerifyResult key = p.verify({corpus("verifier_uninit_map_key.c"), {}});
  ASSERT_EQ(key.verifier_class, VerifierClass::uninitialized) << key.summary;
  EXPECT_EQ(key.proof_line, 22) << key.proof_note;  // the last write into the key before the lookup
  EXPECT_NE(key.required_proof.find("all 16 bytes"), std::string::npos) << key.required_proof;
}

TEST(VerifyProof, DiagnosticV2HasBpfixKeysFieldForField) {
  Pipeline p(test_options());
  const VerifyResult r = p.verify({corpus("verifier_bounds_check_too_short.c"), {}});
  const auto d = diagnostic_v2(r);
  // bpfix docs/evaluation/diagnostic.schema.json: the required keys, no others.
  const std::vector<std::string> keys = {"diagnostic_version", "error_id", "failure_class", "confidence",
                                         "diagnostic_kind", "help_safety", "span_confidence", "message",
                                         "required_proof", "source_span", "related_spans", "evidence", "help",
                                         "metadata"};
  EXPECT_EQ(d.size(), keys.size()) << d.dump(1);
  for (const auto& k : keys) EXPECT_TRUE(d.contains(k)) << k;
  EXPECT_EQ(d["diagnostic_version"], "bpfix.diagnostic/v2");
  EXPECT_EQ(d["failure_class"], "source_bug");
  EXPECT_EQ(d["help_safety"], "repair_hint");
  EXPECT_EQ(d["source_span"]["line_start"], 17);
  ASSERT_EQ(d["related_spans"].size(), 1u);
  EXPECT_EQ(d["related_spans"][0]["line_start"], 13);
  EXPECT_TRUE(diagnostic_v2(p.verify({corpus("pass_all.c"), {}})).empty());
}

// ---------------------------------------------------------------- repair engine, one test per class

TEST(VerifyRepair, PacketBoundsCheckBeforeTheAccess) {
  const auto out = expect_fixed(corpus("verifier_bounds_check_too_short.c"),
                                {{"udp", kUdp, "XDP_DROP", ""}, {"tcp", kTcp, "XDP_PASS", ""}}, "packet_bounds_check");
  EXPECT_NE(out.source.find("> data_end)"), std::string::npos) << out.diff;
}

TEST(VerifyRepair, NullCheckAfterTheLookup) {
  const auto out = expect_fixed(corpus("verifier_null_hash_read.c"), {{"any", kTcp, "XDP_PASS", ""}}, "null_check");
  EXPECT_NE(out.source.find("if (!verdict)"), std::string::npos) << out.diff;
}

TEST(VerifyRepair, ZeroInitialisedKey) {
  const auto out = expect_fixed(corpus("verifier_uninit_map_key.c"), {{"any", kTcp, "XDP_PASS", ""}}, "zero_init", 1);
  EXPECT_NE(out.diff.find("key = {}"), std::string::npos) << out.diff;
}

TEST(VerifyRepair, DiagnosticCarriesTheEnginesFirstEditsAsFixits) {
  Pipeline p(test_options());
  const VerifyRequest req{corpus("verifier_uninit_map_key.c"), {{"any", kTcp, "XDP_PASS", ""}}, {}};
  const VerifyResult before = p.verify(req);
  ASSERT_EQ(before.first_failed_stage, Stage::verify) << before.summary;
  ASSERT_FALSE(before.fixits.empty());
  EXPECT_LE(before.fixits.size(), 3u);
  EXPECT_EQ(before.fixits[0].kind, "zero_init");
  EXPECT_EQ(before.fixits[0].diff.rfind("--- a/prog.c\n+++ b/prog.c\n@@ ", 0), 0u) << before.fixits[0].diff;
  // The first fix-it is the edit the engine keeps when it passes.
  const RepairOutcome out = repair_program(p, req, before);
  ASSERT_TRUE(out.fixed) << out.note;
  EXPECT_EQ(out.diff, before.fixits[0].diff);
  // In the bpfix-shaped diagnostic: help entries after next_action, "fixit KIND line N ...\n" + the diff.
  const auto d = diagnostic_v2(before);
  ASSERT_EQ(d["help"].size(), 1 + before.fixits.size());
  const std::string help = d["help"][1];
  EXPECT_EQ(help.rfind("fixit zero_init line ", 0), 0u) << help;
  EXPECT_EQ(help.substr(help.find('\n') + 1), before.fixits[0].diff);
  // A pass has none.
  EXPECT_TRUE(out.result.fixits.empty());
}

TEST(VerifyRepair, MissingIncludeAndClangsSuggestion) {
  // tests/lib/xdp/drop_arp.c without its <bpf/bpf_endian.h>.
  std::string missing_endian = read(std::string(QWEN3_TEST_XDP_DIR) + "/drop_arp.c");
  const std::string endian = "#include <bpf/bpf_endian.h>\n";
  ASSERT_NE(missing_endian.find(endian), std::string::npos) << missing_endian;
  missing_endian.erase(missing_endian.find(endian), endian.size());
  const std::vector<Fixture> fx =
      parse_fixture_file(read(std::string(QWEN3_TEST_XDP_DIR) + "/drop_arp.fixtures.json")).fixtures;
  ASSERT_EQ(fx.size(), 2u);
  auto out = expect_fixed(missing_endian, fx, "include", 1);
  EXPECT_NE(out.diff.find("+#include <bpf/bpf_endian.h>"), std::string::npos) << out.diff;
  std::string typo = read(std::string(QWEN3_TEST_XDP_DIR) + "/drop_arp.c");
  typo.replace(typo.find("return eth->h_proto"), 19, "return eth->h_protoo");
  out = expect_fixed(typo, fx, "compiler_fixit", 1);
  EXPECT_NE(out.diff.find("+\treturn eth->h_proto =="), std::string::npos) << out.diff;
}

TEST(VerifyRepair, ClampedVariableIndex) {
  const std::string source = R"(#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct counters { __u64 c[16]; };
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct counters);
} stats SEC(".maps");

SEC("xdp")
int count_by_byte(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 zero = 0;
	if (data + 15 > data_end)
		return XDP_PASS;
	__u8 idx = *(__u8 *)(data + 14);
	struct counters *v = bpf_map_lookup_elem(&stats, &zero);
	if (!v)
		return XDP_PASS;
	v->c[idx] += 1;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
)";
  expect_fixed(source, {{"tcp", kTcp, "XDP_PASS", ""}}, "index_clamp");
}

TEST(VerifyRepair, ByteOrderBugFoundByTheFixtures) {
  const auto out = expect_fixed(corpus("wrong_verdict_byte_order.c"), corpus_fixtures("wrong_verdict_byte_order"),
                                "byte_order", 1);
  EXPECT_NE(out.diff.find("+\tif (tcp->dest == bpf_htons(23))"), std::string::npos) << out.diff;
}

TEST(VerifyRepair, WrongReturnActionAndComparison) {
  const std::string drops_tcp = R"(#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int drop_udp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	if (ip->protocol != IPPROTO_UDP)
		return XDP_DROP;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
)";
  const std::vector<Fixture> fx = {{"udp", kUdp, "XDP_DROP", ""}, {"tcp", kTcp, "XDP_PASS", ""}};
  const auto out = expect_fixed(drops_tcp, fx, "comparison", 1);
  EXPECT_NE(out.diff.find("+\tif (ip->protocol == IPPROTO_UDP)"), std::string::npos) << out.diff;
}

TEST(VerifyRepair, NothingKeptThatDoesNotPassEverything) {
  // Passes everything but the wrong verdict for one fixture that no single edit fixes: nothing is kept.
  Pipeline p(test_options());
  const std::string source = corpus("pass_all.c");
  const std::vector<Fixture> fx = {{"udp", kUdp, "XDP_DROP", ""}, {"tcp", kTcp, "XDP_PASS", ""}};
  const VerifyRequest req{source, fx, {}};
  const VerifyResult before = p.verify(req);
  ASSERT_EQ(before.first_failed_stage, Stage::behaviour) << before.summary;
  const RepairOutcome out = repair_program(p, req, before);
  EXPECT_TRUE(out.attempted);
  EXPECT_FALSE(out.fixed);
  EXPECT_TRUE(out.source.empty());
  EXPECT_TRUE(out.diff.empty());
  EXPECT_FALSE(out.note.empty());
}

TEST(VerifyRepair, UnifiedDiffIsMinimal) {
  EXPECT_EQ(unified_diff("a\nb\nc\n", "a\nb\nc\n", "x.c"), "");
  EXPECT_EQ(unified_diff("a\nb\nc\n", "a\nB\nc\n", "x.c"), "--- a/x.c\n+++ b/x.c\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n");
  EXPECT_EQ(unified_diff("a\nc\n", "a\nb\nc\n", "x.c"), "--- a/x.c\n+++ b/x.c\n@@ -1,2 +1,3 @@\n a\n+b\n c\n");
}

// ---------------------------------------------------------------- the loop: engine first, model for the rest

TEST(VerifyRepair, LoopTriesTheEngineBeforeTheModel) {
  Pipeline p(test_options());
  int calls = 0;
  // The model's answer: the short bounds check, then a runaway include line (no closing fence).
  GenerateFn model = [&](const std::vector<qwen3::ChatMessage>&) {
    ++calls;
    std::string s = "```c\n" + corpus("verifier_bounds_check_too_short.c");
    for (int i = 0; i < 100; ++i) s += "#include <bpf/bpf_tracing.h>\n";
    return s;
  };
  const auto attempts = generate_verified("drop UDP", {{"udp", kUdp, "XDP_DROP", ""}, {"tcp", kTcp, "XDP_PASS", ""}}, 3,
                                          model, p);
  ASSERT_EQ(attempts.size(), 1u);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(attempts[0].result.first_failed_stage, Stage::verify);  // the model's own verdict is kept
  EXPECT_EQ(attempts[0].fixed_by, "engine");
  EXPECT_TRUE(attempts[0].repair.fixed);
  const std::string& c = attempts[0].completion;
  EXPECT_NE(c.find("bpf_tracing.h"), std::string::npos);
  EXPECT_EQ(c.find("bpf_tracing.h"), c.rfind("bpf_tracing.h")) << c;  // once, not 100 times
  EXPECT_FALSE(attempts[0].guard_note.empty());
}

TEST(VerifyRepair, AnswerWithoutSourceIsItsOwnStage) {
  Pipeline p(test_options());
  GenerateFn model = [](const std::vector<qwen3::ChatMessage>&) { return std::string("I cannot help with that."); };
  const auto attempts = generate_verified("drop UDP", {}, 2, model, p);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].result.first_failed_stage, Stage::answer);
  EXPECT_TRUE(attempts[0].result.compiler_diagnostics.empty());
  const std::string& hint = attempts[1].messages.back().content;
  // A repair hint that says what to answer with, not the diagnosis echoed back.
  EXPECT_NE(hint.find("```c\n#include <linux/bpf.h>"), std::string::npos) << hint;
  EXPECT_EQ(hint.find("Remove the construct"), std::string::npos) << hint;
}

TEST(VerifyRepair, VariablePacketOffsetForHeadersWithoutOptions) {
  // ip->ihl * 4 moves the packet pointer by a variable: refused for a loader without CAP_PERFMON.
  const std::string source = R"(#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int telnet(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > data_end || ip->protocol != IPPROTO_TCP)
		return XDP_PASS;
	__u32 ip_len = ip->ihl * 4;
	struct tcphdr *tcp = (void *)ip + ip_len;
	if ((void *)(tcp + 1) > data_end)
		return XDP_PASS;
	return tcp->dest == bpf_htons(23) ? XDP_DROP : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
)";
  const auto out = expect_fixed(source, corpus_fixtures("wrong_verdict_byte_order"), "variable_offset", 3);
  EXPECT_NE(out.diff.find("+\t__u32 ip_len = sizeof(*ip);"), std::string::npos) << out.diff;
  EXPECT_NE(out.diff.find("+\tif (ip->ihl != 5)"), std::string::npos) << out.diff;
}

TEST(VerifyRepair, ReservationReleasedBeforeAnEarlyReturn) {
  const std::string source = R"(#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct event { __u32 mark; };
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

SEC("xdp")
int mark(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct event *rec = bpf_ringbuf_reserve(&events, sizeof(*rec), 0);
	if (!rec)
		return XDP_PASS;
	rec->mark = 7;
	if (data + 14 > data_end)
		return XDP_DROP;
	bpf_ringbuf_submit(rec, 0);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
)";
  const auto out = expect_fixed(source, {{"tcp", kTcp, "XDP_PASS", ""}}, "release_reference", 1);
  EXPECT_NE(out.diff.find("+\t\t{ bpf_ringbuf_discard(rec, 0); return XDP_DROP; }"), std::string::npos) << out.diff;
}

// Rules of repair_rules.h end to end (their candidates are unit-tested in repair_rules_test).
const std::string kIpHead = R"(#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int f(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct iphdr *ip = data + sizeof(struct ethhdr);
	if ((void *)(ip + 1) > data_end)
		return XDP_PASS;
)";

TEST(VerifyRepair, InlineAsmOnAPointerIsRemoved) {
  const std::string source = kIpHead + R"(	__u64 cookie = (__u64)(long)ip;
	asm volatile("%[c] <<= 32; %[c] >>= 32" : [c] "+r"(cookie));
	struct iphdr *shadow = (void *)(long)cookie;
	return shadow->protocol == IPPROTO_UDP ? XDP_DROP : XDP_PASS;
}
char LICENSE[] SEC("license") = "GPL";
)";
  const auto out = expect_fixed(source, {{"udp", kUdp, "XDP_DROP", ""}, {"tcp", kTcp, "XDP_PASS", ""}}, "pointer_asm", 0);
  EXPECT_NE(out.diff.find("-\tasm volatile"), std::string::npos) << out.diff;
}

TEST(VerifyRepair, PacketPointerDerivedAgainAfterAdjustHead) {
  // After bpf_xdp_adjust_head(ctx, 14) the IPv4 header starts the packet: the fixtures
  // choose `ip = data` over the original derivation (data + 14 would read the UDP header).
  const std::string source = kIpHead + R"(	if (bpf_xdp_adjust_head(ctx, (int)sizeof(struct ethhdr)))
		return XDP_ABORTED;
	return ip->protocol == IPPROTO_UDP ? XDP_DROP : XDP_PASS;
}
char LICENSE[] SEC("license") = "GPL";
)";
  // Frames long enough that a check at the old offsets passes too: only the right offset drops UDP.
  const std::string pad(64, '0');
  const auto out = expect_fixed(source, {{"udp", kUdp + pad, "XDP_DROP", ""}, {"tcp", kTcp + pad, "XDP_PASS", ""}},
                                "stale_packet_pointer", 5);
  EXPECT_NE(out.diff.find("+\tdata = (void *)(long)ctx->data;\n+\tdata_end = (void *)(long)ctx->data_end;\n+\tip = data;\n"),
            std::string::npos)
      << out.diff;
}

// repair_limits.cpp end to end: a loop the verifier cannot bound, a stack over 512 bytes.
TEST(VerifyRepair, LoopTheVerifierCannotBoundGetsACap) {
  // The VLAN walk never advances its pointer: "infinite loop detected".
  const std::string source = R"(#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct vlan { __be16 tci; __be16 proto; };

SEC("xdp")
int f(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	__be16 proto = eth->h_proto;
	struct vlan *tag = (void *)(eth + 1);
	while (proto == bpf_htons(ETH_P_8021Q)) {
		if ((void *)(tag + 1) > data_end)
			return XDP_PASS;
		proto = tag->proto;
	}
	return proto == bpf_htons(ETH_P_ARP) ? XDP_DROP : XDP_PASS;
}
char LICENSE[] SEC("license") = "GPL";
)";
  const std::string arp = kMacs + "0806" + std::string(56, '0');
  const std::string vlan_udp = kMacs + "8100" + "0001" + kUdp.substr(24);
  Pipeline p(test_options());
  const VerifyResult before = p.verify({source, {}, {}});
  EXPECT_EQ(before.verifier_class, VerifierClass::unbounded_loop) << before.summary;
  const auto out = expect_fixed(
      source, {{"arp", arp, "XDP_DROP", ""}, {"udp", kUdp, "XDP_PASS", ""}, {"vlan udp", vlan_udp, "XDP_PASS", ""}},
      "loop_bound", 4);
  EXPECT_NE(out.diff.find("+#pragma unroll\n+\tfor (__u32 loop_bound_18 = 0; loop_bound_18 < 8; loop_bound_18++) {\n"
                          "+\t\tif (!(proto == bpf_htons(ETH_P_8021Q)))\n+\t\t\tbreak;\n"),
            std::string::npos)
      << out.diff;
}

TEST(VerifyRepair, LargeStackBufferMovesToAPerCpuMap) {
  // 600 bytes on a 512-byte stack: clang refuses ("Looks like the BPF stack limit is exceeded").
  const std::string source = R"(#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

SEC("xdp")
int f(struct xdp_md *ctx)
{
	__u8 frame[600];
	if (bpf_xdp_load_bytes(ctx, 0, frame, 14))
		return XDP_PASS;
	return frame[12] == 0x08 && frame[13] == 0x06 ? XDP_DROP : XDP_PASS;
}
char LICENSE[] SEC("license") = "GPL";
)";
  const std::string arp = kMacs + "0806" + std::string(56, '0');
  Pipeline p(test_options());
  const VerifyResult before = p.verify({source, {}, {}});
  EXPECT_EQ(before.first_failed_stage, Stage::compile) << before.summary;
  const auto out = expect_fixed(source, {{"arp", arp, "XDP_DROP", ""}, {"udp", kUdp, "XDP_PASS", ""}}, "stack_to_map", 12);
  EXPECT_NE(out.source.find("__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);"), std::string::npos) << out.source;
  EXPECT_NE(out.source.find("__u8 *frame = bpf_map_lookup_elem(&frame_percpu, &frame_percpu_key);"), std::string::npos)
      << out.source;
}
