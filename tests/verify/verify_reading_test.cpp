// The policy reads the source the way clang reads it (byte order marks, line
// ends, splices with trailing blanks), and the compiler's output quotes nothing
// of the sandbox: no text of files outside the program and its headers, no
// addresses from crash dumps (issue 22).
#include <gtest/gtest.h>

#include <string>

#include "verify/include_tree.h"
#include "verify/policy.h"
#include "verify/sandbox_compiler.h"

using namespace qwen3::verify;

namespace {

const std::string kProgram =
    "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n"
    "SEC(\"xdp\") int p(struct xdp_md *ctx) { return XDP_PASS; }\n"
    "char LICENSE[] SEC(\"license\") = \"GPL\";\n";

bool refuses_include_on_line(const std::string& source, int line) {
  for (const auto& d : check_policy(source, {}))
    if (d.line == line && d.text.find("#include") != std::string::npos) return true;
  return false;
}

TEST(VerifyPolicyReading, Utf8ByteOrderMarkDoesNotHideAnInclude) {
  EXPECT_TRUE(refuses_include_on_line("\xEF\xBB\xBF#include \"/etc/passwd\"\n" + kProgram, 1));
  EXPECT_TRUE(check_policy("\xEF\xBB\xBF" + kProgram, {}).empty()) << "a BOM alone is fine (clang skips it)";
}

TEST(VerifyPolicyReading, ALoneCarriageReturnEndsALine) {
  // clang starts a new line at a lone CR, so the #include is a directive.
  EXPECT_TRUE(refuses_include_on_line("int x;\r#include \"/etc/passwd\"\r" + kProgram, 2));
  std::string crlf;
  for (char c : kProgram) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  EXPECT_TRUE(check_policy(crlf, {}).empty());
}

TEST(VerifyPolicyReading, SplicesWithTrailingBlanksAreSplices) {
  // clang splices "\\ <blanks> newline": the string runs on to the next line, so
  // "/*" is inside it and the #include on line 3 is code, not a comment.
  const std::string source = "char *s = \"\\  \n/*\";\n#include \"/etc/passwd\"\n// */\n" + kProgram;
  EXPECT_TRUE(refuses_include_on_line(source, 3));
  EXPECT_TRUE(check_policy("#inc\\ \t\nlude <linux/if_ether.h>\n" + kProgram, {}).empty());
}

TEST(VerifyPolicyReading, OtherEncodingsAreRefused) {
  for (const std::string& bom : {std::string("\xFF\xFE"), std::string("\xFE\xFF"), std::string("+/v")}) {
    auto v = check_policy(bom + kProgram, {});
    ASSERT_FALSE(v.empty());
    EXPECT_NE(v[0].text.find("byte order mark"), std::string::npos) << v[0].text;
  }
}

TEST(VerifyCompilerOutput, CrashDumpsLoseTheirAddresses) {
  const std::string crash =
      "PLEASE submit a bug report to https://github.com/llvm/llvm-project/issues/ and include the crash backtrace.\n"
      "Stack dump:\n"
      "0.\tProgram arguments: /usr/lib/llvm-19/bin/clang -cc1 ...\n"
      " #0 0x00007f3a2b1c0d2e llvm::sys::PrintStackTrace(llvm::raw_ostream&, int)\n"
      "0  libLLVM.so.19.1      0x00007f3a2b1c0d2e llvm::sys::PrintStackTrace(llvm::raw_ostream&, int) + 46\n"
      "1  libLLVM.so.19.1 0x00007f3a2b1be8f0 llvm::sys::RunSignalHandlers() + 80\n"
      "clang: error: unable to execute command: Segmentation fault at 0x00005612ab3400c8\n"
      "prog.c:3:9: error: integer literal 0x1234567890 is too large\n";
  const std::string out = scrub_compiler_output(crash);
  EXPECT_EQ(out.find("0x00007f3a2b1c0d2e"), std::string::npos) << out;
  EXPECT_EQ(out.find("0x00007f3a2b1be8f0"), std::string::npos) << out;
  EXPECT_EQ(out.find("0x00005612ab3400c8"), std::string::npos) << out;
  EXPECT_NE(out.find("Segmentation fault"), std::string::npos) << out;
  EXPECT_NE(out.find("0x1234567890"), std::string::npos) << "the program's own text stays: " << out;
}

// With the policy bypassed (defense in depth), an include of a file that
// exists in the sandbox (libc.so, a linker script) fails to compile: the errors
// name the file but quote none of its text.
TEST(VerifyCompilerOutput, FilesOutsideTheProgramAreNotQuoted) {
  for (SandboxMode mode : {SandboxMode::namespaces, SandboxMode::landlock}) {
    SandboxConfig c;
    c.mode = mode;
    c.include_dir = prepare_include_tree(QWEN3_VERIFY_TEST_DATA_DIR);
    c.timeout_ms = 10000;
    auto out = compile_in_sandbox("#include \"/usr/lib/x86_64-linux-gnu/libc.so\"\n" + kProgram, c);
    ASSERT_NE(out.status, CompileStatus::ok);
    for (const char* text : {"GNU ld script", "OUTPUT_FORMAT", "GROUP", "static library"}) {
      EXPECT_EQ(out.diagnostics.find(text), std::string::npos) << out.diagnostics;
      for (const auto& d : out.parsed) EXPECT_EQ(d.text.find(text), std::string::npos) << d.text;
    }
  }
}

}  // namespace
