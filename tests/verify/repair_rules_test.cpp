// The repair engine's rewrite rules as pure functions (repair_rules.h): each
// takes a minimal program and the verdict the verifier gave it, and must
// propose the edit that fixes it. No compiler or verifier runs here (the
// engine re-checks every candidate; verify_repair_test runs it end to end).
#include <gtest/gtest.h>

#include <algorithm>

#include "verify/repair_candidates.h"
#include "verify/repair_rules.h"
#include "verify/repair_text.h"

using namespace qwen3::verify;

namespace {

VerifyResult rejected(int line, const std::string& message, VerifierClass cls = VerifierClass::other) {
  VerifyResult r;
  r.decision = Decision::fail;
  r.first_failed_stage = Stage::verify;
  r.verifier_class = cls;
  r.verifier_line = line;
  r.verifier_message = message;
  return r;
}

// The candidate of `kind` whose source contains every one of `parts`.
const Candidate* find(const std::vector<Candidate>& cs, const std::string& kind, const std::vector<std::string>& parts) {
  for (const auto& c : cs) {
    if (c.kind != kind) continue;
    if (std::all_of(parts.begin(), parts.end(), [&](const std::string& p) { return c.source.find(p) != std::string::npos; }))
      return &c;
  }
  return nullptr;
}

const std::string kHead =
    "#include <linux/bpf.h>\n"           // 1
    "#include <bpf/bpf_helpers.h>\n"     // 2
    "\n";                                // 3

}  // namespace

TEST(RepairRules, PointerAsmIsRemoved) {
  const std::string src = kHead +
                          "SEC(\"xdp\")\n"                                                        // 4
                          "int f(struct xdp_md *ctx)\n"                                            // 5
                          "{\n"                                                                    // 6
                          "    void *data = (void *)(long)ctx->data;\n"                           // 7
                          "    __u64 cookie = (__u64)(long)data;\n"                                // 8
                          "    asm volatile(\"%[c] <<= 32; %[c] >>= 32\" : [c] \"+r\"(cookie));\n"  // 9
                          "    return cookie ? XDP_PASS : XDP_DROP;\n"                             // 10
                          "}\n";
  std::vector<Candidate> out;
  pointer_asm_candidates(Source(src), rejected(9, "R1 pointer arithmetic with <<= operator prohibited"), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].source.find("asm"), std::string::npos);
  EXPECT_NE(out[0].source.find("__u64 cookie = (__u64)(long)data;\n    return cookie"), std::string::npos) << out[0].source;
  // Another rejection leaves the asm alone.
  out.clear();
  pointer_asm_candidates(Source(src), rejected(9, "R1 invalid mem access 'scalar'"), out);
  EXPECT_TRUE(out.empty());
}

TEST(RepairRules, StalePacketPointerIsDerivedAgainAfterAdjustHead) {
  const std::string src = kHead +
                          "SEC(\"xdp\")\n"                                            // 4
                          "int f(struct xdp_md *ctx)\n"                                // 5
                          "{\n"                                                        // 6
                          "    void *data = (void *)(long)ctx->data;\n"               // 7
                          "    void *data_end = (void *)(long)ctx->data_end;\n"       // 8
                          "    struct iphdr *iph = data + 14;\n"                       // 9
                          "    if ((void *)(iph + 1) > data_end)\n"                    // 10
                          "        return XDP_PASS;\n"                                 // 11
                          "    if (bpf_xdp_adjust_head(ctx, 14) < 0) {\n"              // 12
                          "        return XDP_ABORTED;\n"                              // 13
                          "    }\n"                                                    // 14
                          "    return iph->protocol == 17 ? XDP_DROP : XDP_PASS;\n"    // 15
                          "}\n";
  std::vector<Candidate> out;
  stale_packet_candidates(Source(src), rejected(15, "R7 !read_ok", VerifierClass::uninitialized), out);
  const Candidate* c = find(out, "stale_packet_pointer",
                            {"    }\n    data = (void *)(long)ctx->data;\n    data_end = (void *)(long)ctx->data_end;\n"
                             "    iph = data;\n    if ((void *)(iph + 1) > data_end)\n        return XDP_PASS;\n"
                             "    return iph->protocol"});
  ASSERT_NE(c, nullptr) << (out.empty() ? "" : out.back().source);
  EXPECT_EQ(c->line, 14);
  // The original derivation is offered too (adjust_tail keeps the start where it was).
  EXPECT_NE(find(out, "stale_packet_pointer", {"    iph = data + 14;\n    if ((void *)(iph + 1) > data_end)"}), nullptr);
}

TEST(RepairRules, StalePacketPointerAfterASubprogramThatMovesThePacket) {
  const std::string src = kHead +
                          "static __noinline int trim(struct xdp_md *ctx)\n"               // 4
                          "{\n"                                                            // 5
                          "    return bpf_xdp_adjust_tail(ctx, -4);\n"                     // 6
                          "}\n"                                                            // 7
                          "SEC(\"xdp\")\n"                                                 // 8
                          "int f(struct xdp_md *ctx)\n"                                    // 9
                          "{\n"                                                            // 10
                          "    void *data = (void *)(long)ctx->data;\n"                   // 11
                          "    void *data_end = (void *)(long)ctx->data_end;\n"           // 12
                          "    struct ethhdr *eth = data;\n"                               // 13
                          "    if ((void *)(eth + 1) > data_end)\n"                        // 14
                          "        return XDP_PASS;\n"                                     // 15
                          "    if (trim(ctx))\n"                                           // 16
                          "        return XDP_PASS;\n"                                     // 17
                          "    return eth->h_proto == 8 ? XDP_DROP : XDP_PASS;\n"          // 18
                          "}\n";
  std::vector<Candidate> out;
  stale_packet_candidates(Source(src), rejected(18, "R7 !read_ok", VerifierClass::uninitialized), out);
  const Candidate* c = find(out, "stale_packet_pointer",
                            {"        return XDP_PASS;\n    data = (void *)(long)ctx->data;\n"
                             "    data_end = (void *)(long)ctx->data_end;\n    eth = data;\n"});
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->line, 17);
}

TEST(RepairRules, MapTypeTheHelperTakes) {
  const std::string src = kHead +
                          "struct {\n"                                                       // 4
                          "    __uint(type, BPF_MAP_TYPE_ARRAY);\n"                           // 5
                          "    __uint(max_entries, 4);\n"                                     // 6
                          "    __type(key, __u32);\n"                                         // 7
                          "    __type(value, __u32);\n"                                       // 8
                          "} xsks SEC(\".maps\");\n"                                          // 9
                          "SEC(\"xdp\")\n"                                                    // 10
                          "int f(struct xdp_md *ctx)\n"                                       // 11
                          "{\n"                                                               // 12
                          "    return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);\n"  // 13
                          "}\n";
  std::vector<Candidate> out;
  map_type_candidates(Source(src), rejected(13, "cannot pass map_type 2 into func bpf_redirect_map#51"), out);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].line, 5);
  EXPECT_NE(out[0].source.find("    __uint(type, BPF_MAP_TYPE_XSKMAP);\n"), std::string::npos);
  EXPECT_NE(find(out, "map_type", {"BPF_MAP_TYPE_DEVMAP);"}), nullptr);
}

TEST(RepairRules, HelperBufferLengthSplitAndGrowth) {
  const std::string load = kHead +
                           "SEC(\"xdp\")\n"                                               // 4
                           "int f(struct xdp_md *ctx)\n"                                  // 5
                           "{\n"                                                          // 6
                           "    __u8 head[12];\n"                                         // 7
                           "    __u8 tail[6];\n"                                          // 8
                           "    int err;\n"                                               // 9
                           "    err = bpf_xdp_load_bytes(ctx, 2, head, 18);\n"            // 10
                           "    if (err)\n"                                               // 11
                           "        return XDP_ABORTED;\n"                                // 12
                           "    return head[0] == tail[5] ? XDP_DROP : XDP_PASS;\n"       // 13
                           "}\n";
  std::vector<Candidate> out;
  helper_buffer_candidates(Source(load), rejected(10, "invalid write to stack R3 off=-12 size=18"), out);
  EXPECT_NE(find(out, "helper_buffer",
                 {"    err = bpf_xdp_load_bytes(ctx, 2, head, sizeof(head));\n    if (!err)\n"
                  "        err = bpf_xdp_load_bytes(ctx, 2 + sizeof(head), tail, sizeof(tail));\n    if (err)\n"}),
            nullptr);
  EXPECT_NE(find(out, "helper_buffer", {"bpf_xdp_load_bytes(ctx, 2, head, sizeof(head));\n    if (err)"}), nullptr);

  const std::string slice = kHead +
                            "SEC(\"xdp\")\n"                                              // 4
                            "int f(struct xdp_md *ctx)\n"                                 // 5
                            "{\n"                                                         // 6
                            "    struct bpf_dynptr ptr;\n"                                // 7
                            "    __u64 scratch = 0;\n"                                    // 8
                            "    void *b = bpf_dynptr_slice(&ptr, 0, &scratch, 9);\n"     // 9
                            "    return b ? XDP_DROP : XDP_PASS;\n"                       // 10
                            "}\n";
  out.clear();
  helper_buffer_candidates(Source(slice), rejected(9, "invalid read from stack R3 off -24+8 size 9"), out);
  EXPECT_NE(find(out, "helper_buffer", {"    __u8 scratch[9] = {};\n", "bpf_dynptr_slice(&ptr, 0, scratch, sizeof(scratch));"}),
            nullptr);
  EXPECT_NE(find(out, "helper_buffer", {"    __u64 scratch = 0;\n", "bpf_dynptr_slice(&ptr, 0, &scratch, sizeof(scratch));"}),
            nullptr);
}

TEST(RepairRules, MapKeyTakesTheMapsKeyType) {
  const std::string src = kHead +
                          "struct {\n"                                                        // 4
                          "    __uint(type, BPF_MAP_TYPE_HASH);\n"                             // 5
                          "    __uint(max_entries, 16);\n"                                     // 6
                          "    __type(key, __u64);\n"                                          // 7
                          "    __type(value, __u8);\n"                                         // 8
                          "} seen SEC(\".maps\");\n"                                           // 9
                          "SEC(\"xdp\")\n"                                                     // 10
                          "int f(struct xdp_md *ctx)\n"                                        // 11
                          "{\n"                                                                // 12
                          "    __u32 id = ctx->rx_queue_index;\n"                              // 13
                          "    __u8 *hit = bpf_map_lookup_elem(&seen, &id);\n"                 // 14
                          "    return hit ? XDP_DROP : XDP_PASS;\n"                            // 15
                          "}\n";
  std::vector<Candidate> out;
  helper_buffer_candidates(Source(src), rejected(14, "invalid read from stack R2 off=-4 size=8"), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].line, 13);
  EXPECT_NE(out[0].source.find("    __u64 id = ctx->rx_queue_index;\n"), std::string::npos) << out[0].source;
}

TEST(RepairRules, PacketBytesCopiedToTheStackForAHelper) {
  const std::string src = kHead +
                          "SEC(\"xdp\")\n"                                                                   // 4
                          "int f(struct xdp_md *ctx)\n"                                                      // 5
                          "{\n"                                                                              // 6
                          "    void *data = (void *)(long)ctx->data;\n"                                     // 7
                          "    bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, data, 32);\n"          // 8
                          "    return XDP_PASS;\n"                                                           // 9
                          "}\n";
  std::vector<Candidate> out;
  packet_to_stack_candidates(Source(src), rejected(8, "helper access to the packet is not allowed"), out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_NE(out[0].source.find("    __u8 packet_copy[32];\n    __builtin_memcpy(packet_copy, data, sizeof(packet_copy));\n"
                               "    bpf_perf_event_output(ctx, &events, BPF_F_CURRENT_CPU, packet_copy, sizeof(packet_copy));"),
            std::string::npos)
      << out[0].source;
}

TEST(RepairRules, DynptrInitialisedFromTheContext) {
  const std::string src = kHead +
                          "SEC(\"xdp\")\n"                                                  // 4
                          "int f(struct xdp_md *ctx)\n"                                     // 5
                          "{\n"                                                             // 6
                          "    struct bpf_dynptr ptr;\n"                                    // 7
                          "    void *b = bpf_dynptr_slice(&ptr, 0, 0, 14);\n"               // 8
                          "    return b ? XDP_DROP : XDP_PASS;\n"                           // 9
                          "}\n";
  std::vector<Candidate> out;
  dynptr_init_candidates(Source(src), rejected(8, "Expected an initialized dynptr as arg #0"), out);
  ASSERT_FALSE(out.empty());
  EXPECT_NE(out[0].source.find("extern int bpf_dynptr_from_xdp(struct xdp_md *x, __u64 flags, struct bpf_dynptr "
                               "*ptr__uninit) __ksym;\nSEC(\"xdp\")"),
            std::string::npos);
  EXPECT_NE(out[0].source.find("    if (bpf_dynptr_from_xdp(ctx, 0, &ptr))\n        return XDP_PASS;\n    void *b ="),
            std::string::npos)
      << out[0].source;
}

TEST(RepairRules, ChecksInASubprogramReturnWhatItReturns) {
  const std::string src = kHead +
                          "static __always_inline int tag(void *cursor, void *data_end, __u32 *out)\n"  // 4
                          "{\n"                                                                      // 5
                          "    struct iphdr *ip = cursor;\n"                                          // 6
                          "    if (!out)\n"                                                           // 7
                          "        return -1;\n"                                                      // 8
                          "    *out = ip->daddr;\n"                                                   // 9
                          "    return 1;\n"                                                           // 10
                          "}\n";
  const auto values = return_values(Source(src), 9);
  ASSERT_EQ(values.size(), 2u);
  EXPECT_EQ(values[0], "1");
  EXPECT_EQ(values[1], "-1");
  const auto cs = repair_candidates(src, rejected(9, "invalid access to packet, off=16 size=4", VerifierClass::packet_bounds));
  EXPECT_NE(find(cs, "packet_bounds_check", {"    if ((void *)(ip + 1) > data_end)\n        return -1;\n    *out"}),
            nullptr);
}

TEST(RepairRules, TextHelpers) {
  EXPECT_EQ(call_arguments("x = bpf_csum_diff(0, 0, (__be32 *)&p, f(a, b), 0);", "bpf_csum_diff"),
            (std::vector<std::string>{"0", "0", "(__be32 *)&p", "f(a, b)", "0"}));
  EXPECT_TRUE(call_arguments("x = bpf_csum_diff(0,", "bpf_csum_diff").empty());
  const Source s("if (a) {\n  b;\n}\nif (c)\n  d;\ne;\n");
  EXPECT_EQ(s.block_end(1), 3);
  EXPECT_EQ(s.block_end(4), 5);
  EXPECT_EQ(s.block_end(6), 6);
  EXPECT_EQ(s.remove_lines(2, 3), "if (a) {\nif (c)\n  d;\ne;\n");
  // A discard in an early exit does not release the reservation for the code after it.
  const Source rb("r = bpf_ringbuf_reserve(&rb, 8, 0);\nif (x) {\n  bpf_ringbuf_discard(r, 0);\n  return 1;\n}\n"
                  "y;\nbpf_ringbuf_submit(r, 0);\nz;\n");
  EXPECT_EQ(discard_live_reservations(rb, 6), "bpf_ringbuf_discard(r, 0); ");
  EXPECT_EQ(discard_live_reservations(rb, 8), "");
}

TEST(RepairRules, LoopIsBoundedAndUnrolledInnermostFirst) {
  const std::string src = kHead +
                          "SEC(\"xdp\")\n"                                          // 4
                          "int f(struct xdp_md *ctx)\n"                              // 5
                          "{\n"                                                      // 6
                          "    __u32 n = ctx->ingress_ifindex, acc = 0;\n"           // 7
                          "    for (__u32 i = 0; i < n; i++) {\n"                    // 8
                          "        while (acc & 1) {\n"                              // 9
                          "            acc >>= 1;\n"                                 // 10
                          "        }\n"                                              // 11
                          "        acc += i;\n"                                      // 12
                          "    }\n"                                                  // 13
                          "    return acc ? XDP_PASS : XDP_DROP;\n"                  // 14
                          "}\n";
  std::vector<Candidate> out;
  loop_bound_candidates(Source(src), rejected(10, "infinite loop detected at insn 7", VerifierClass::unbounded_loop), out);
  ASSERT_EQ(out.size(), 6u);  // two loops, three caps each
  EXPECT_EQ(out[0].line, 9);  // the innermost loop around line 10 first
  EXPECT_NE(out[0].source.find("#pragma unroll\n        for (__u32 loop_bound_9 = 0; loop_bound_9 < 8; loop_bound_9++) {\n"
                               "            if (!(acc & 1))\n                break;\n            acc >>= 1;\n        }\n"),
            std::string::npos)
      << out[0].source;
  EXPECT_NE(out[2].source.find("loop_bound_9 < 256;"), std::string::npos);
  // A for loop keeps its initialisation before it and its increment at the end of the body.
  EXPECT_NE(out[3].source.find("    __u32 i = 0;\n#pragma unroll\n    for (__u32 loop_bound_8 = 0; loop_bound_8 < 8; loop_bound_8++) {\n"
                               "        if (!(i < n))\n            break;\n"),
            std::string::npos)
      << out[3].source;
  EXPECT_NE(out[3].source.find("        acc += i;\n        i++;\n    }\n    return"), std::string::npos) << out[3].source;
  // Another class of rejection leaves loops alone.
  out.clear();
  loop_bound_candidates(Source(src), rejected(10, "R1 invalid mem access", VerifierClass::other), out);
  EXPECT_TRUE(out.empty());
}

TEST(RepairRules, DoWhileForeverAndContinueLoops) {
  const std::string src = kHead +
                          "SEC(\"xdp\")\n"                      // 4
                          "int f(struct xdp_md *ctx)\n"          // 5
                          "{\n"                                  // 6
                          "    volatile int k = 0;\n"            // 7
                          "    for (;;) {\n"                     // 8
                          "        if (k) break;\n"              // 9
                          "    }\n"                              // 10
                          "    do {\n"                           // 11
                          "        k++;\n"                       // 12
                          "    } while (k != 3);\n"              // 13
                          "    for (int j = 0; j < k; j++) {\n"  // 14
                          "        if (j & 1) continue;\n"       // 15
                          "    }\n"                              // 16
                          "    return XDP_PASS;\n"               // 17
                          "}\n";
  std::vector<Candidate> out;
  loop_bound_candidates(Source(src), rejected(12, "back-edge from insn 9 to 7", VerifierClass::unbounded_loop), out);
  // The do-while around line 12 first, then the forever loop; the loop with `continue` and an
  // increment is left alone (the continue would skip the increment).
  ASSERT_EQ(out.size(), 6u);
  EXPECT_NE(out[0].source.find("#pragma unroll\n    for (__u32 loop_bound_11 = 0; loop_bound_11 < 8; loop_bound_11++) {\n"
                               "        k++;\n        if (!(k != 3))\n            break;\n    }\n    for (int j"),
            std::string::npos)
      << out[0].source;
  EXPECT_NE(out[3].source.find("#pragma unroll\n    for (__u32 loop_bound_8 = 0; loop_bound_8 < 8; loop_bound_8++) {\n"
                               "        if (k) break;\n    }\n"),
            std::string::npos)
      << out[3].source;
  for (const auto& c : out) EXPECT_EQ(c.source.find("loop_bound_14"), std::string::npos) << c.source;
}

TEST(RepairRules, LargeLocalMovesToAPerCpuArrayMap) {
  const std::string src = kHead +
                          "struct flow { __u8 payload[512]; __u32 len; };\n"        // 4
                          "SEC(\"xdp\")\n"                                          // 5
                          "int f(struct xdp_md *ctx)\n"                              // 6
                          "{\n"                                                      // 7
                          "    __u8 buf[600] = {};\n"                                // 8
                          "    struct flow fl;\n"                                    // 9
                          "    fl.len = sizeof(buf);\n"                              // 10
                          "    bpf_xdp_load_bytes(ctx, 0, &fl, sizeof(fl));\n"       // 11
                          "    return buf[fl.len & 63] ? XDP_PASS : XDP_DROP;\n"     // 12
                          "}\n";
  VerifyResult r;
  r.decision = Decision::fail;
  r.first_failed_stage = Stage::compile;
  r.compiler_diagnostics.push_back({"", 0, 0,
                                    "error: in function f i32 (ptr): Looks like the BPF stack limit is exceeded. Please "
                                    "move large on stack variables into BPF per-cpu array map."});
  std::vector<Candidate> out;
  stack_size_candidates(Source(src), r, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].kind, "stack_to_map");
  EXPECT_EQ(out[0].line, 8);  // the largest first
  const std::string& a = out[0].source;
  EXPECT_NE(a.find("\t__type(value, __u8[600]);\n} buf_percpu SEC(\".maps\");\n\nSEC(\"xdp\")\nint f("), std::string::npos) << a;
  EXPECT_NE(a.find("    __u32 buf_percpu_key = 0;\n    __u8 *buf = bpf_map_lookup_elem(&buf_percpu, &buf_percpu_key);\n"
                   "    if (!buf)\n        return XDP_PASS;\n    __builtin_memset(buf, 0, sizeof(__u8[600]));\n"),
            std::string::npos)
      << a;
  EXPECT_NE(a.find("fl.len = sizeof(__u8[600]);"), std::string::npos) << a;
  const std::string& b = out[1].source;
  EXPECT_NE(b.find("struct flow *fl = bpf_map_lookup_elem(&fl_percpu, &fl_percpu_key);"), std::string::npos) << b;
  EXPECT_NE(b.find("fl->len = sizeof(buf);"), std::string::npos) << b;
  EXPECT_NE(b.find("bpf_xdp_load_bytes(ctx, 0, fl, sizeof(*fl));"), std::string::npos) << b;
  EXPECT_NE(b.find("buf[fl->len & 63]"), std::string::npos) << b;
  // Without a stack-limit error nothing moves.
  out.clear();
  r.compiler_diagnostics[0].text = "error: use of undeclared identifier 'x'";
  stack_size_candidates(Source(src), r, out);
  EXPECT_TRUE(out.empty());
}

TEST(RepairRules, CompileFixitsForEnumeratorsAddressesAndLibbpfMacros) {
  const std::string src = "#include <linux/bpf.h>\n"                                     // 1
                          "enum reason { A = 0, B = 1,\n"                                // 2
                          "    A = 3,\n"                                                 // 3
                          "};\n"                                                         // 4
                          "struct {\n"                                                   // 5
                          "    __uint(type, BPF_MAP_TYPE_HASH);\n"                       // 6
                          "} m SEC(\".maps\");\n"                                        // 7
                          "int f(void) { __u64 v = 1; return bpf_map_update_elem(&m, &v, v, 0); }\n";  // 8
  VerifyResult r;
  r.decision = Decision::fail;
  r.first_failed_stage = Stage::compile;
  r.compiler_diagnostics = {{"", 3, 5, "error: redefinition of enumerator 'A'"},
                            {"", 6, 5, "error: type name requires a specifier or qualifier"},
                            {"", 8, 63,
                             "error: incompatible integer to pointer conversion passing '__u64' (aka 'unsigned long "
                             "long') to parameter of type 'const void *' [-Wint-conversion]"}};
  const auto out = repair_candidates(src, r);
  const Candidate* dup = find(out, "compiler_fixit", {"enum reason { A = 0, B = 1,\n};"});
  ASSERT_NE(dup, nullptr);
  const Candidate* inc = find(out, "include", {"#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n"});
  ASSERT_NE(inc, nullptr);
  const Candidate* addr = find(out, "compiler_fixit", {"bpf_map_update_elem(&m, &v, &v, 0)"});
  ASSERT_NE(addr, nullptr);
}

TEST(RepairRules, VariableTcpHeaderLengthBecomesTheFixedOne) {
  const std::string src = kHead +
                          "SEC(\"xdp\")\n"                                                 // 4
                          "int f(struct xdp_md *ctx)\n"                                     // 5
                          "{\n"                                                             // 6
                          "    struct tcphdr *tcp = (void *)(long)ctx->data + 34;\n"        // 7
                          "    __u32 tcp_len = (__u32)tcp->doff * 4;\n"                     // 8
                          "    char *payload = (void *)tcp + tcp_len;\n"                    // 9
                          "    return XDP_PASS;\n"                                          // 10
                          "}\n";
  const auto out = repair_candidates(src, rejected(9, "R1 pointer arithmetic with it prohibited for !root"));
  const Candidate* c = find(out, "variable_offset", {"    if (tcp->doff != 5)\n        return XDP_PASS;\n    __u32 tcp_len = sizeof(*tcp);\n"});
  ASSERT_NE(c, nullptr);
}

TEST(RepairRules, BoundsCheckCoversTheLargestConstantIndex) {
  const std::string src = kHead +
                          "SEC(\"xdp\")\n"                                                          // 4
                          "int f(struct xdp_md *ctx)\n"                                              // 5
                          "{\n"                                                                      // 6
                          "    void *data_end = (void *)(long)ctx->data_end;\n"                      // 7
                          "    char *payload = (void *)(long)ctx->data + 54;\n"                      // 8
                          "    if (payload[4] == '/' && payload[9] == 'n')\n"                        // 9
                          "        return XDP_DROP;\n"                                               // 10
                          "    return XDP_PASS;\n"                                                   // 11
                          "}\n";
  const auto out = repair_candidates(src, rejected(9, "invalid access to packet, off=58 size=1", VerifierClass::packet_bounds));
  ASSERT_NE(find(out, "packet_bounds_check", {"    if ((void *)(payload + 10) > data_end)\n"}), nullptr);
}
