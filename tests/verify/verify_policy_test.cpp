// Unit tests of the policy (stage 1): includes, directives, raw strings, inline asm, libc
// headers, and the lexer against clang's own.
#include "verify_test_common.h"

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
