// Unit tests of fixtures (hex, BPF-Guardian files, map contents), the compiler sandbox on its
// own (policy bypassed: defense in depth), its dependency list and the call allowlist.
#include "verify_test_common.h"

// ---------------------------------------------------------------- fixtures

TEST(VerifyFixtures, HexRoundTripAndErrors) {
  std::string err;
  auto bytes = decode_hex("0x00ff 10:ab", &err);
  ASSERT_TRUE(bytes);
  EXPECT_EQ(encode_hex(*bytes), "00ff10ab");
  EXPECT_FALSE(decode_hex("0g", &err));
  EXPECT_NE(err.find("'g'"), std::string::npos);
  EXPECT_FALSE(decode_hex("abc", &err));
  EXPECT_NE(err.find("odd"), std::string::npos);
}

TEST(VerifyFixtures, ActionsAndJson) {
  EXPECT_EQ(parse_xdp_action("xdp_tx").value(), 3u);
  EXPECT_EQ(parse_xdp_action("DROP").value(), 1u);
  EXPECT_FALSE(parse_xdp_action("XDP_FOO"));
  EXPECT_EQ(xdp_action_name(9), "UNKNOWN(9)");
  auto f = parse_fixtures_json(R"([{"name":"a","packet_hex":"00","expected_action":"XDP_PASS"}])");
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].expected_action, "XDP_PASS");
  EXPECT_THROW(parse_fixtures_json(R"([{"name":"a"}])"), qwen3::Error);
  EXPECT_THROW(parse_fixtures_json("{"), qwen3::Error);
}


TEST(VerifyFixtures, BpfGuardianFormatUnchanged) {
  auto file = parse_fixture_file(R"({
    "schema_version": "1.0", "task_id": "drop_icmp", "test_count": 2,
    "validator": {"type": "packet_bytes", "notes": "unknown fields are ignored"},
    "tests": [
      {"name": "icmp", "description": "ICMP is dropped", "packet_hex": "00", "expected_action": "XDP_DROP", "weight": 2},
      {"name": "tcp", "description": "TCP passes", "packet_hex": "01", "expected_action": "XDP_PASS",
       "expected_output_hex": "01", "extra": [1, 2]}
    ],
    "author": "someone"})");
  EXPECT_EQ(file.task_id, "drop_icmp");
  EXPECT_EQ(file.validator, "packet_bytes");
  ASSERT_EQ(file.fixtures.size(), 2u);
  EXPECT_EQ(file.fixtures[0].name, "icmp");
  EXPECT_EQ(file.fixtures[0].expected_action, "XDP_DROP");
  EXPECT_EQ(file.fixtures[0].expected_packet_hex, "");
  EXPECT_EQ(file.fixtures[1].expected_packet_hex, "01");
  EXPECT_EQ(file.fixtures[1].validator, "packet_bytes");
  for (const char* type : {"packet_action", "map_state"})
    EXPECT_EQ(parse_fixture_file(std::string(R"({"validator":{"type":")") + type + R"("},"tests":[]})").validator, type);
  EXPECT_THROW(parse_fixture_file(R"({"validator":{"type":"magic"},"tests":[]})"), qwen3::Error);
  EXPECT_THROW(parse_fixture_file(R"({"tests":[{"name":"x","packet_hex":"00"}]})"), qwen3::Error);
  // The bare array is still accepted, and {"fixtures": [...]}.
  EXPECT_EQ(parse_fixture_file(R"([{"packet_hex":"00","expected_action":"PASS"}])").fixtures.size(), 1u);
  EXPECT_EQ(parse_fixture_file(R"({"fixtures":[{"packet_hex":"00","expected_action":"PASS"}]})").fixtures.size(), 1u);
}

TEST(VerifyFixtures, InitialAndExpectedMapContents) {
  auto file = parse_fixture_file(R"({"maps": [{"map": "tx_port", "key_u32": 0, "value_ifindex": "lo"},
                                              {"map": "t", "key_hex": "0a000001", "value_u32": 258}],
    "fixtures": [{"packet_hex": "00", "expected_action": "XDP_PASS",
                  "expected_maps": [{"map": "counters", "key_u32": 1, "value_hex": "0200000000000000"}]}]})");
  ASSERT_EQ(file.maps.size(), 2u);
  EXPECT_EQ(file.maps[0].map, "tx_port");
  EXPECT_EQ(file.maps[0].key_hex, "00000000");
  EXPECT_EQ(file.maps[0].value_hex, "01000000");  // the loopback ifindex, little endian
  EXPECT_EQ(file.maps[1].key_hex, "0a000001");
  EXPECT_EQ(file.maps[1].value_hex, "02010000");
  ASSERT_EQ(file.fixtures[0].expected_maps.size(), 1u);
  EXPECT_EQ(file.fixtures[0].expected_maps[0].key_hex, "01000000");
  // Host interfaces other than loopback are not named through fixtures.
  EXPECT_THROW(parse_fixture_file(R"({"maps":[{"map":"m","key_u32":0,"value_ifindex":"eth0"}],"fixtures":[]})"), qwen3::Error);
  EXPECT_THROW(parse_fixture_file(R"({"maps":[{"key_u32":0,"value_u32":1}],"fixtures":[]})"), qwen3::Error);
  EXPECT_THROW(parse_fixture_file(R"({"maps":[{"map":"m","value_u32":1}],"fixtures":[]})"), qwen3::Error);
}

// ---------------------------------------------------------------- sandbox (policy bypassed)

namespace qwen3::verify {
void PrintTo(SandboxMode m, std::ostream* os) {
  *os << (m == SandboxMode::namespaces ? "namespaces" : m == SandboxMode::landlock ? "landlock" : "automatic");
}
}  // namespace qwen3::verify

// Every sandbox test runs in both confinement modes.
class VerifySandbox : public ::testing::TestWithParam<SandboxMode> {};
INSTANTIATE_TEST_SUITE_P(Modes, VerifySandbox, ::testing::Values(SandboxMode::namespaces, SandboxMode::landlock),
                         [](const auto& info) {
                           return std::string(info.param == SandboxMode::namespaces ? "namespaces" : "landlock");
                         });

TEST_P(VerifySandbox, CompilesAnAllowedProgram) {
  auto out = compile_in_sandbox(kGoodProgram, sandbox_config(GetParam()));
  ASSERT_EQ(out.status, CompileStatus::ok) << out.message << "\n" << out.diagnostics;
  EXPECT_EQ(out.object.substr(0, 4), "\x7f" "ELF");
  EXPECT_EQ(out.sandbox.rfind(GetParam() == SandboxMode::namespaces ? "namespaces" : "landlock", 0), 0u) << out.sandbox;
}

TEST_P(VerifySandbox, HostFilesAreInvisibleEvenWithoutThePolicy) {
  SecretFile secret;
  const std::vector<std::string> attacks = {
      "#include \"" + secret.path + "\"",
      "#include \"/etc/shadow\"",
      "#include \"../../../../../../" + secret.path + "\"",
      "#include </proc/self/environ>",
      "asm(\".incbin \\\"" + secret.path + "\\\"\");",
      "static const char e[] = {\n#embed \"" + secret.path + "\"\n};",
  };
  for (const auto& attack : attacks) {
    SCOPED_TRACE(attack);
    auto out = compile_in_sandbox(program_with(attack), sandbox_config(GetParam()));
    EXPECT_EQ(out.status, CompileStatus::compile_error) << out.message;
    EXPECT_TRUE(out.object.empty());
    EXPECT_EQ(out.diagnostics.find(secret.marker), std::string::npos);
    EXPECT_EQ(out.diagnostics.find("root:"), std::string::npos);
    EXPECT_FALSE(out.parsed.empty());
  }
}

TEST_P(VerifySandbox, HasIncludeProbesOfHostFiles) {
  SecretFile secret;
  auto out = compile_in_sandbox(
      program_with("#if __has_include(\"" + secret.path + "\") || __has_include(\"/etc/passwd\")\n#error visible\n#endif\n"
                   "#if !__has_include(<linux/bpf.h>)\n#error allowed header missing\n#endif"),
      sandbox_config(GetParam()));
  if (GetParam() == SandboxMode::namespaces) {
    // Outside the chroot nothing exists: the program compiles.
    EXPECT_EQ(out.status, CompileStatus::ok) << out.diagnostics;
  } else {
    // Landlock denies opening the file but not looking it up: "Permission
    // denied" instead of "not found" tells that it exists (a documented limit
    // of this mode, and one reason the policy bans __has_include); its
    // contents never show (HostFilesAreInvisibleEvenWithoutThePolicy).
    EXPECT_EQ(out.status, CompileStatus::compile_error);
    EXPECT_NE(out.diagnostics.find("Permission denied"), std::string::npos) << out.diagnostics;
    EXPECT_EQ(out.diagnostics.find(secret.marker), std::string::npos);
  }
}

TEST_P(VerifySandbox, DiagnosticsCarryLinesAndNoSandboxPaths) {
  auto out = compile_in_sandbox(program_with("int broken(void) { return nope; }"), sandbox_config(GetParam()));
  ASSERT_EQ(out.status, CompileStatus::compile_error);
  ASSERT_FALSE(out.parsed.empty());
  EXPECT_EQ(out.parsed[0].line, 3);
  EXPECT_NE(out.parsed[0].text.find("nope"), std::string::npos);
  EXPECT_EQ(out.diagnostics.find("/src/"), std::string::npos);
  EXPECT_EQ(out.diagnostics.find("/inc/"), std::string::npos);
  EXPECT_EQ(out.diagnostics.find("qwen3-verify-"), std::string::npos);
}

TEST_P(VerifySandbox, LongSourceLinesInDiagnostics) {
  // clang echoes the offending line; the parser must cope with 15 KB lines.
  std::string expr = "int long_line(void) { return 0";
  while (expr.size() < 15000) expr += " + 1";
  expr += " + missing_name; }";
  auto out = compile_in_sandbox(program_with(expr), sandbox_config(GetParam()));
  ASSERT_EQ(out.status, CompileStatus::compile_error);
  ASSERT_FALSE(out.parsed.empty());
  EXPECT_EQ(out.parsed[0].line, 3);
  EXPECT_NE(out.parsed[0].text.find("missing_name"), std::string::npos);
}

TEST_P(VerifySandbox, MemoryLimitStopsTheCompiler) {
  // An initializer of 16^6 = 16.7M elements: the AST alone needs far more than 400 MiB.
  SandboxConfig c = sandbox_config(GetParam());
  c.memory_bytes = size_t{400} << 20;
  c.timeout_ms = 30000;
  const std::string source = program_with(
      "#define A0 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,\n"
      "#define A1 A0 A0 A0 A0 A0 A0 A0 A0 A0 A0 A0 A0 A0 A0 A0 A0\n"
      "#define A2 A1 A1 A1 A1 A1 A1 A1 A1 A1 A1 A1 A1 A1 A1 A1 A1\n"
      "#define A3 A2 A2 A2 A2 A2 A2 A2 A2 A2 A2 A2 A2 A2 A2 A2 A2\n"
      "#define A4 A3 A3 A3 A3 A3 A3 A3 A3 A3 A3 A3 A3 A3 A3 A3 A3\n"
      "#define A5 A4 A4 A4 A4 A4 A4 A4 A4 A4 A4 A4 A4 A4 A4 A4 A4\n"
      "#define A6 A5 A5 A5 A5 A5 A5 A5 A5 A5 A5 A5 A5 A5 A5 A5 A5\n"
      "const volatile char big[] = { A6 };\n");
  auto out = compile_in_sandbox(source, c);
  EXPECT_EQ(out.status, CompileStatus::limit_exceeded) << out.message << "\n" << out.diagnostics;
  EXPECT_NE(out.message.find("memory"), std::string::npos) << out.message;
}


namespace {
// clang's resource directory (its own headers): inside the sandbox, outside the include tree.
std::string clang_resource_header() {
  std::string dir;
  if (FILE* f = popen("clang-19 -print-resource-dir 2>/dev/null", "r")) {
    char buf[512];
    if (fgets(buf, sizeof buf, f)) dir = buf;
    pclose(f);
  }
  while (!dir.empty() && (dir.back() == '\n' || dir.back() == '\r')) dir.pop_back();
  return dir + "/include/stdint.h";
}
}  // namespace

TEST_P(VerifySandbox, ReportsEveryFileClangRead) {
  auto out = compile_in_sandbox(kGoodProgram, sandbox_config(GetParam()));
  ASSERT_EQ(out.status, CompileStatus::ok) << out.message;
  auto has = [&](const std::string& f) { return std::find(out.files_read.begin(), out.files_read.end(), f) != out.files_read.end(); };
  EXPECT_TRUE(has("prog.c"));
  EXPECT_TRUE(has("linux/bpf.h"));
  EXPECT_TRUE(has("bpf/bpf_helpers.h"));
  for (const auto& f : out.files_read) EXPECT_NE(f[0], '/') << f;
}

TEST_P(VerifySandbox, FilesOutsideTheIncludeTreeAreRefusedFromClangsOwnList) {
  // The policy is bypassed here: whatever a lexer may miss (raw strings,
  // #embed), clang's dependency list names every file it read, and anything
  // but prog.c and the private include tree refuses the program.
  const std::string header = clang_resource_header();
  ASSERT_EQ(access(header.c_str(), R_OK), 0) << header;
  const std::vector<std::string> attacks = {
      "#include \"" + header + "\"",
      "static const char *a = R\"x(\" /* )x\";\n#include \"" + header + "\"\nstatic const char *b = R\"x(\" */ )x\";",
      "static const char e[] = {\n#embed \"" + header + "\"\n};",
  };
  for (const auto& attack : attacks) {
    SCOPED_TRACE(attack);
    auto out = compile_in_sandbox(program_with(attack), sandbox_config(GetParam()));
    EXPECT_EQ(out.status, CompileStatus::forbidden_input) << out.message << "\n" << out.diagnostics;
    EXPECT_TRUE(out.object.empty());
    EXPECT_EQ(out.forbidden_file, header);
    EXPECT_NE(out.message.find("clang reports that it read"), std::string::npos);
  }
  // The include tree itself is fine, by any spelling.
  auto ok = compile_in_sandbox(program_with("#include <linux/../linux/if_ether.h>"), sandbox_config(GetParam()));
  EXPECT_EQ(ok.status, CompileStatus::ok) << ok.message << ok.diagnostics;
}

TEST_P(VerifySandbox, UapiHeadersThatNeedLibcCompile) {
  auto out = compile_in_sandbox(program_with("#include <linux/if.h>\n#include <linux/ethtool.h>\n#include <stdint.h>\n"
                                             "#include <stdbool.h>\nstatic const uint32_t n = IFNAMSIZ + INT_MAX / INT_MAX;"),
                                sandbox_config(GetParam()));
  EXPECT_EQ(out.status, CompileStatus::ok) << out.message << "\n" << out.diagnostics;
  auto has = [&](const std::string& f) { return std::find(out.files_read.begin(), out.files_read.end(), f) != out.files_read.end(); };
  EXPECT_TRUE(has("sys/socket.h"));
  EXPECT_TRUE(has("limits.h"));
}

TEST(VerifyDependencyList, ParsesMakeSyntax) {
  auto d = parse_dependency_list("-: /src/prog.c /inc/a\\ b.h \\\n  /inc/c$$d.h /inc/e.h\n");
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0], "/src/prog.c");
  EXPECT_EQ(d[1], "/inc/a b.h");
  EXPECT_EQ(d[2], "/inc/c$d.h");
  EXPECT_EQ(d[3], "/inc/e.h");
  EXPECT_TRUE(parse_dependency_list("").empty());
}

// ---------------------------------------------------------------- issue 13: what a program may call

TEST(VerifyCalls, PacketHelpersAllowedKernelReadersRefusedByClass) {
  for (int id : {BPF_FUNC_map_lookup_elem, BPF_FUNC_redirect_map, BPF_FUNC_xdp_adjust_head, BPF_FUNC_csum_diff,
                 BPF_FUNC_perf_event_output, BPF_FUNC_ringbuf_output, BPF_FUNC_fib_lookup, BPF_FUNC_loop,
                 BPF_FUNC_xdp_load_bytes, BPF_FUNC_ktime_get_ns, BPF_FUNC_tcp_raw_gen_syncookie_ipv4})
    EXPECT_EQ(helper_refusal(id), "") << id;
  const std::vector<std::pair<int, std::string>> refused = {
      {BPF_FUNC_sk_lookup_tcp, "socket lookup"},     {BPF_FUNC_sk_lookup_udp, "socket lookup"},
      {BPF_FUNC_skc_lookup_tcp, "socket lookup"},    {BPF_FUNC_sk_release, "socket lookup"},
      {BPF_FUNC_skc_to_tcp_sock, "socket cast"},     {BPF_FUNC_skc_to_tcp6_sock, "socket cast"},
      {BPF_FUNC_skc_to_udp6_sock, "socket cast"},    {BPF_FUNC_skc_to_unix_sock, "socket cast"},
      {BPF_FUNC_probe_read_kernel, "kernel memory read"}, {BPF_FUNC_get_current_task_btf, "kernel memory read"},
      {BPF_FUNC_kptr_xchg, "kernel memory read"},    {BPF_FUNC_snprintf, "kernel memory read"},
      {BPF_FUNC_trace_printk, "side effect"},        {BPF_FUNC_get_current_comm, "allowlist"},
      {100000, "allowlist"}};
  for (const auto& [id, why] : refused) EXPECT_NE(helper_refusal(id).find(why), std::string::npos) << id;
  for (const char* k : {"bpf_dynptr_from_xdp", "bpf_dynptr_slice", "bpf_dynptr_slice_rdwr", "bpf_iter_num_new",
                        "bpf_wq_init", "bpf_wq_set_callback_impl", "bpf_wq_start"})
    EXPECT_EQ(kfunc_refusal(k), "") << k;
  EXPECT_NE(kfunc_refusal("bpf_xdp_ct_lookup").find("pointer-returning lookup"), std::string::npos);
  EXPECT_NE(kfunc_refusal("bpf_xdp_get_xfrm_state").find("pointer-returning lookup"), std::string::npos);
  EXPECT_NE(kfunc_refusal("bpf_cast_to_kern_ctx").find("BTF cast"), std::string::npos);
  EXPECT_NE(kfunc_refusal("bpf_rdonly_cast").find("BTF cast"), std::string::npos);
  EXPECT_NE(kfunc_refusal("bpf_obj_new_impl").find("allowlist"), std::string::npos);
}
