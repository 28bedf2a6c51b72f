// Unit tests of the pipeline's parts: policy rules, hex/fixtures, the
// compiler sandbox on its own (policy bypassed: defense in depth), verifier
// log reading, and the generate-verify-repair loop with a scripted model.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <linux/bpf.h>

#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <random>
#include <sstream>

#include "common/error.h"
#include <bpf/bpf.h>

#include "verify/bpf_loader.h"
#include "verify/fixtures.h"
#include "verify/generate.h"
#include "verify/include_tree.h"
#include "verify/pipeline.h"
#include "verify/policy.h"
#include "verify/result_json.h"
#include "verify/sandbox_compiler.h"
#include "verify/verifier_log.h"

using namespace qwen3::verify;

namespace {

const char* kGoodProgram = R"(#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int drop_arp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_DROP;
	if (eth->h_proto == bpf_htons(ETH_P_ARP))
		return XDP_DROP;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
)";

// The same program without the bounds check: the verifier rejects line 12.
const char* kBrokenProgram = R"(#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

SEC("xdp")
int drop_arp(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if (eth->h_proto == bpf_htons(ETH_P_ARP))
		return XDP_DROP;
	return data_end ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
)";

std::vector<Fixture> arp_fixtures() {
  const std::string macs = "020000000002020000000001";
  return {{"arp", macs + "0806" + std::string(56, '0'), "XDP_DROP", ""},
          {"ipv4", macs + "0800" + "4500001c000000004011" + std::string(36, '0'), "XDP_PASS", ""}};
}

PipelineOptions test_options() {
  PipelineOptions o;
  o.data_dir = QWEN3_VERIFY_TEST_DATA_DIR;
  o.compile_timeout_ms = 10000;
  return o;
}

SandboxConfig sandbox_config(SandboxMode mode = SandboxMode::namespaces) {
  SandboxConfig c;
  c.mode = mode;
  c.include_dir = prepare_include_tree(QWEN3_VERIFY_TEST_DATA_DIR);
  c.timeout_ms = 10000;
  return c;
}

struct SecretFile {
  std::string path, marker;
  SecretFile() {
    std::random_device rd;
    std::ostringstream m;
    m << "SANDBOX-SECRET-" << std::hex << rd() << rd();
    marker = m.str();
    char tmpl[] = "/tmp/qwen3-sandbox-secret-XXXXXX";
    int fd = mkstemp(tmpl);
    path = tmpl;
    std::string content = "int x = 1; // " + marker + "\n";
    EXPECT_EQ(write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    fchmod(fd, 0644);  // world-readable: only the sandbox can hide it
    close(fd);
  }
  ~SecretFile() { unlink(path.c_str()); }
};

std::string program_with(const std::string& extra) {
  return "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n" + extra +
         "\nSEC(\"xdp\") int p(struct xdp_md *ctx) { return XDP_PASS; }\nchar LICENSE[] SEC(\"license\") = \"GPL\";\n";
}

}  // namespace

// ---------------------------------------------------------------- policy

TEST(VerifyPolicy, AcceptsAllowedHeadersOnly) {
  EXPECT_TRUE(is_allowed_header("linux/bpf.h"));
  EXPECT_TRUE(is_allowed_header("linux/netfilter/nf_tables.h"));
  EXPECT_TRUE(is_allowed_header("bpf/bpf_helpers.h"));
  EXPECT_TRUE(is_allowed_header("vmlinux.h"));
  EXPECT_FALSE(is_allowed_header("stdio.h"));
  EXPECT_FALSE(is_allowed_header("/etc/shadow"));
  EXPECT_FALSE(is_allowed_header("linux/../../etc/shadow"));
  EXPECT_FALSE(is_allowed_header("bpf/sub/dir.h"));
  EXPECT_FALSE(is_allowed_header("asm/types.h"));
}

TEST(VerifyPolicy, GoodProgramHasNoViolations) {
  EXPECT_TRUE(check_policy(kGoodProgram, {}).empty());
}

TEST(VerifyPolicy, ReportsTheLineOfEachViolation) {
  auto v = check_policy(program_with("#include <stdlib.h>\n#pragma GCC poison x"), {});
  ASSERT_EQ(v.size(), 2u);
  EXPECT_EQ(v[0].line, 3);
  EXPECT_EQ(v[1].line, 4);
}

TEST(VerifyPolicy, CommentsAndStringsDoNotTrigger) {
  // Forbidden words inside comments and ordinary strings are harmless.
  auto v = check_policy(program_with("// asm(\".incbin\") #include \"/etc/shadow\"\nconst char s[] = \"asm section\";"), {});
  EXPECT_TRUE(v.empty()) << v[0].text;
}

TEST(VerifyPolicy, CountsXdpSections) {
  EXPECT_FALSE(check_policy("int x;", {}).empty());
  auto two = check_policy(program_with("SEC(\"xdp/second\") int q(struct xdp_md *c) { return 2; }"), {});
  ASSERT_EQ(two.size(), 1u);
  EXPECT_NE(two[0].text.find("exactly one"), std::string::npos);
}

TEST(VerifyPolicy, UnrollCountsMayBeMacroNames) {
  // Cilium's form (a public-set program was refused for it); the count is an integer constant.
  for (const char* p : {"#pragma unroll(MAX_IPV4_OPTS)", "#pragma unroll MAX_OPTS", "#pragma unroll(4)",
                        "#pragma GCC unroll N_ITER", "#pragma unroll"})
    EXPECT_TRUE(check_policy(program_with(p), {}).empty()) << p;
  for (const char* p : {"#pragma unroll(__has_include(\"/etc/passwd\"))", "#pragma unroll(A + B)",
                        "#pragma unroll(N) extra"})
    EXPECT_FALSE(check_policy(program_with(p), {}).empty()) << p;
}

TEST(VerifyPolicy, SizeLimit) {
  PolicyLimits limits;
  limits.max_source_bytes = 100;
  auto v = check_policy(std::string(kGoodProgram), limits);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_NE(v[0].text.find("limit is 100"), std::string::npos);
}

TEST(VerifyPolicy, VeryLongLinesAreHandled) {
  auto v = check_policy(program_with("#pragma clang loop " + std::string(15000, 'x')), {});
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].line, 3);
  auto w = check_policy(program_with("#include <linux/" + std::string(15000, 'a') + ".h>"), {});
  ASSERT_EQ(w.size(), 1u);
}


// ---------------------------------------------------------------- issue 13: raw strings, asm, libc headers

TEST(VerifyPolicy, RefusesRawStringLiteralsInEveryEncoding) {
  for (const char* prefix : {"R", "LR", "uR", "UR", "u8R"}) {
    SCOPED_TRACE(prefix);
    auto v = check_policy(program_with(std::string("static const void *s = ") + prefix + "\"x( \" /* )x\";"), {});
    ASSERT_FALSE(v.empty());
    EXPECT_NE(v[0].text.find("raw string"), std::string::npos) << v[0].text;
    EXPECT_EQ(v[0].line, 3);
  }
  // Not raw strings: an identifier ending in R, an R inside a literal or a comment.
  EXPECT_TRUE(check_policy(program_with("#define XR 1\nstatic const char *a = \"R\\\"(\"; // R\"(\nint BAR = XR;"), {}).empty());
  auto v = check_policy(program_with("static const char *s = FOOR\"x\";"), {});
  for (const auto& d : v) EXPECT_EQ(d.text.find("raw string"), std::string::npos) << d.text;
}

TEST(VerifyPolicy, RawStringsCannotHideIncludesAsmOrKsyms) {
  // What a lexer without raw strings sees as a comment, clang sees as code.
  for (const char* hidden : {"#include \"/etc/passwd\"", "asm(\".incbin \\\"/etc/passwd\\\"\");",
                             "static const char e[] = {\n#embed \"/etc/passwd\"\n};", "extern int secret __ksym;"}) {
    SCOPED_TRACE(hidden);
    auto v = check_policy(program_with(std::string("static const char *a = R\"x(\" /* )x\";\n") + hidden +
                                       "\nstatic const char *b = R\"x(\" */ )x\";"),
                          {});
    ASSERT_FALSE(v.empty());
    EXPECT_NE(v[0].text.find("raw string"), std::string::npos);
  }
}

TEST(VerifyPolicy, InlineAsmIsAllowedWithoutFileDirectives) {
  EXPECT_TRUE(check_policy(program_with("static int f(int x) { asm volatile(\"%[x] &= 0xff\" : [x] \"+r\"(x)); return x; }"),
                           {}).empty());
  EXPECT_TRUE(check_policy(program_with("static void g(void) { __asm__ __volatile__(\"\" ::: \"memory\"); }"), {}).empty());
  EXPECT_TRUE(check_policy(program_with("static void h(void) { asm(\".byte 0x95\\n\" \".long 0\"); }"), {}).empty());
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"asm(\".incbin \\\"/etc/passwd\\\"\");", ".incbin"},
      {"asm(\".inc\" \"lude \\\"x.s\\\"\");", ".include"},            // split literals are joined
      {"asm(\"\\056incbin \\\"x\\\"\");", ".incbin"},                 // octal escape for '.'
      {"asm(\"\\x2e\" \"file \\\"x\\\"\");", ".file"},                // hex escape
      {"asm(\"r0 = 1\\n .section .text.evil\");", ".section"},
      {"asm(\".macro m\\n.endm\");", ".macro"},
      {"#define T \".incbin \\\"x\\\"\"\nasm(T);", "must be written"},  // template from a macro
      {"#define A asm\nA(\"r0 = 0\");", "must be written"},                // asm keyword aliased
  };
  for (const auto& [code, why] : refused) {
    SCOPED_TRACE(code);
    auto v = check_policy(program_with(code), {});
    ASSERT_FALSE(v.empty());
    bool found = false;
    for (const auto& d : v) found |= d.text.find(why) != std::string::npos;
    EXPECT_TRUE(found) << v[0].text;
  }
}

TEST(VerifyPolicy, AllowsTheMinimalLibcHeaders) {
  for (const char* h : {"stdint.h", "stddef.h", "stdbool.h", "limits.h", "sys/socket.h", "sys/types.h"})
    EXPECT_TRUE(is_allowed_header(h)) << h;
  for (const char* h : {"stdio.h", "stdlib.h", "sys/mman.h", "netinet/in.h", "string.h"}) EXPECT_FALSE(is_allowed_header(h)) << h;
}


namespace {
// clang's own raw lexer on `source` (-dump-raw-tokens: no preprocessing, the
// main file only): the identifiers and ordinary string literals it sees, by line.
LexicalView clang_lexical_view(const std::string& source) {
  char path[] = "/tmp/qwen3-lexer-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_EQ(write(fd, source.data(), source.size()), static_cast<ssize_t>(source.size()));
  close(fd);
  std::string cmd = std::string("clang-19 --no-default-config -target bpf -fno-trigraphs -fsyntax-only -Xclang "
                                "-dump-raw-tokens -x c ") + path + " 2>&1";
  std::string out;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    pclose(f);
  }
  unlink(path);
  LexicalView v;
  static const std::regex tok(R"(^(raw_identifier|string_literal) '(.*)'\t.*Loc=<[^>]*:(\d+):\d+>$)");
  std::stringstream ss(out);
  for (std::string l; std::getline(ss, l);) {
    std::smatch m;
    if (!std::regex_match(l, m, tok)) continue;
    std::string text = m[2];
    for (size_t p; (p = text.find("\\\n")) != std::string::npos;) text.erase(p, 2);  // splices inside a token
    const int line = std::stoi(m[3]);
    if (m[1] == "raw_identifier") v.identifiers.push_back({line, text});
    else if (text.size() >= 2 && text.front() == '"' && text.back() == '"') v.string_literals.push_back({line, text.substr(1, text.size() - 2)});
  }
  return v;
}

// Everything in `want` (a multiset) is in `have`.
std::vector<std::pair<int, std::string>> missing_from(std::vector<std::pair<int, std::string>> want,
                                                      std::vector<std::pair<int, std::string>> have) {
  std::sort(want.begin(), want.end());
  std::sort(have.begin(), have.end());
  std::vector<std::pair<int, std::string>> out;
  std::set_difference(want.begin(), want.end(), have.begin(), have.end(), std::back_inserter(out));
  return out;
}
}  // namespace

// The policy's lexer against clang's: every identifier and every string
// literal clang's raw lexer sees in code, the policy sees too, on the same
// line — over the whole corpus and sources built to confuse a lexer
// (comment markers in literals, quotes in comments, splices, digraphs,
// character literals). Raw strings, where the views part, are refused.
TEST(VerifyPolicy, LexerSeesEverythingClangsLexerSees) {
  std::vector<std::pair<std::string, std::string>> sources;
  for (const auto& e : std::filesystem::directory_iterator(QWEN3_VERIFY_CORPUS_DIR))
    if (e.path().extension() == ".c") {
      std::ifstream in(e.path());
      std::stringstream ss;
      ss << in.rdbuf();
      sources.push_back({e.path().filename().string(), ss.str()});
    }
  const std::vector<std::string> tricky = {
      "const char *a = \"/*\"; int hidden1; const char *b = \"*/\";",
      "char q = '\"'; int hidden2; char r = '\"';",
      "// a comment continued \\\nint hidden3_in_comment;\nint after;",
      "/* \" */ int hidden4; /* \" */",
      "const char *e = \"\\\\\"; int hidden5; const char *f = \"\\\"\";",
      "char c = '\\''; int hidden6; char d = '\\'';",
      "const char *g = \"a\\\n/* b\"; int hidden7; // \"*/",
      "%:define DIG 1\nint hidden8 <: 2 :> ;",
      "int x = 1'2; int hidden9; int y = '3';",
      "#if 0\n'unterminated\n#endif\nint hidden10;",
      "const char *u = u8\"x\" L\"y\" u\"z\"; int hidden11;",
      "int hid\\\nden12;",
      "asm volatile(\"r0 = 0 /* c */\" ::: \"memory\"); int hidden13;",
  };
  for (size_t i = 0; i < tricky.size(); ++i) sources.push_back({"tricky" + std::to_string(i), program_with(tricky[i])});
  int compared = 0;
  for (const auto& [name, source] : sources) {
    SCOPED_TRACE(name);
    const LexicalView ours = lexical_view(source);
    if (ours.raw_strings) {
      EXPECT_FALSE(check_policy(source, {}).empty());  // refused: nothing past it is trusted
      continue;
    }
    const LexicalView clangs = clang_lexical_view(source);
    ASSERT_FALSE(clangs.identifiers.empty());
    for (const auto& [line, id] : missing_from(clangs.identifiers, ours.identifiers))
      ADD_FAILURE() << "clang sees identifier " << id << " on line " << line << "; the policy does not";
    for (const auto& [line, lit] : missing_from(clangs.string_literals, ours.string_literals))
      ADD_FAILURE() << "clang sees string literal \"" << lit << "\" on line " << line << "; the policy does not";
    ++compared;
  }
  EXPECT_GT(compared, 90);
  // The comparison itself works: on a raw string the two views part (which is why raw strings are refused).
  const std::string raw = program_with("static const char *a = R\"x(\" /* )x\";\nint hidden_by_raw;\n"
                                       "static const char *b = R\"x(\" */ )x\";");
  const auto parted = missing_from(clang_lexical_view(raw).identifiers, lexical_view(raw).identifiers);
  ASSERT_FALSE(parted.empty());
  EXPECT_NE(std::find(parted.begin(), parted.end(), std::pair<int, std::string>{4, "hidden_by_raw"}), parted.end());
}

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

// ---------------------------------------------------------------- generate-verify-repair

TEST(VerifyGenerate, ExtractsSource) {
  EXPECT_EQ(extract_c_source("Here:\n```c\nint a;\n```\nbye"), "int a;\n");
  EXPECT_EQ(extract_c_source("<think>```c\nwrong\n```</think>```C\nright\n```"), "right\n");
  EXPECT_EQ(extract_c_source("```\n#include <linux/bpf.h>\nint f() { return 1; }\n```"),
            "#include <linux/bpf.h>\nint f() { return 1; }\n");
  EXPECT_EQ(extract_c_source(kGoodProgram), kGoodProgram);
  EXPECT_EQ(extract_c_source("just words, no code"), "");
}

TEST(VerifyGenerate, ExtractsFromALongCompletion) {
  std::string rambling(300000, 'z');
  EXPECT_EQ(extract_c_source(rambling + "\n```c\n" + kGoodProgram + "```\n" + rambling), kGoodProgram);
  EXPECT_EQ(extract_c_source(rambling), "");
  // Ran out of tokens inside the block.
  EXPECT_EQ(extract_c_source("```c\n" + std::string(kGoodProgram)), kGoodProgram);
}

TEST(VerifyGenerate, RepairsABrokenFirstAnswer) {
  Pipeline p(test_options());
  int calls = 0;
  std::vector<std::vector<qwen3::ChatMessage>> seen;
  GenerateFn model = [&](const std::vector<qwen3::ChatMessage>& messages) {
    seen.push_back(messages);
    return std::string(++calls == 1 ? "Sure:\n```c\n" + std::string(kBrokenProgram) + "```\n"
                                    : "Fixed:\n```c\n" + std::string(kGoodProgram) + "```\n");
  };
  // The model repairs (the engine, which would fix this itself, is off: VerifyRepair tests it).
  auto attempts = generate_verified("drop ARP, pass everything else", arp_fixtures(), 3, model, p, false);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(attempts[0].result.decision, Decision::fail);
  EXPECT_EQ(attempts[0].result.first_failed_stage, Stage::verify);
  EXPECT_EQ(attempts[0].result.verifier_class, VerifierClass::packet_bounds);
  EXPECT_EQ(attempts[0].result.verifier_line, 12);
  EXPECT_EQ(attempts[1].result.decision, Decision::pass) << attempts[1].result.summary;
  EXPECT_EQ(attempts[1].source, kGoodProgram);
  // The first prompt: system + task with fixtures; the second adds the answer and the diagnostic.
  ASSERT_EQ(seen[0].size(), 2u);
  EXPECT_EQ(seen[0][0].role, "system");
  EXPECT_NE(seen[0][0].content.find("```c"), std::string::npos);
  EXPECT_NE(seen[0][1].content.find("drop ARP"), std::string::npos);
  EXPECT_NE(seen[0][1].content.find("XDP_DROP"), std::string::npos);
  ASSERT_EQ(seen[1].size(), 4u);
  EXPECT_EQ(seen[1][2].role, "assistant");
  EXPECT_EQ(seen[1][2].content, attempts[0].completion);
  EXPECT_EQ(seen[1][3].role, "user");
  EXPECT_NE(seen[1][3].content.find("packet_bounds"), std::string::npos);
  EXPECT_NE(seen[1][3].content.find("line 12"), std::string::npos);
  EXPECT_EQ(attempts[1].messages.size(), 4u);
}

TEST(VerifyGenerate, GarbageFailsCleanlyOnEveryAttempt) {
  Pipeline p(test_options());
  std::mt19937 rng(7);
  GenerateFn model = [&](const std::vector<qwen3::ChatMessage>&) {
    std::string s;
    for (int i = 0; i < 200; ++i) s.push_back(static_cast<char>(' ' + rng() % 90));
    return s;
  };
  auto attempts = generate_verified("pass everything", {}, 2, model, p);
  ASSERT_EQ(attempts.size(), 2u);
  for (const auto& a : attempts) {
    EXPECT_EQ(a.result.decision, Decision::fail);
    EXPECT_NE(a.result.first_failed_stage, Stage::none);
    EXPECT_FALSE(a.result.summary.empty());
  }
  if (attempts[0].source.empty()) EXPECT_NE(attempts[0].result.summary.find("no C source"), std::string::npos);
  EXPECT_NE(attempts[1].messages.back().content.find("did not pass"), std::string::npos);
}

TEST(VerifyGenerate, CompileErrorsAreFedBackWithLines) {
  Pipeline p(test_options());
  int calls = 0;
  GenerateFn model = [&](const std::vector<qwen3::ChatMessage>&) {
    ++calls;
    return "```c\n" + program_with("int f(void) { return undefined_thing; }") + "```";
  };
  auto attempts = generate_verified("anything", {}, 2, model, p);
  ASSERT_EQ(attempts.size(), 2u);
  EXPECT_EQ(attempts[0].result.first_failed_stage, Stage::compile);
  const std::string& repair = attempts[1].messages.back().content;
  EXPECT_NE(repair.find("line 3"), std::string::npos) << repair;
  EXPECT_NE(repair.find("undefined_thing"), std::string::npos);
}

TEST(VerifyGenerate, RejectsBadArguments) {
  Pipeline p(test_options());
  GenerateFn model = [](const std::vector<qwen3::ChatMessage>&) { return std::string(); };
  EXPECT_THROW(generate_verified("x", {}, 0, model, p), qwen3::Error);
  EXPECT_THROW(generate_verified("", {}, 1, model, p), qwen3::Error);
}
