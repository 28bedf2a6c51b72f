// Unit tests of the generate-verify-repair loop with scripted models: source extraction,
// repair messages, clean failures.
#include "verify_test_common.h"

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
  if (attempts[0].source.empty()) {
    EXPECT_NE(attempts[0].result.summary.find("no C source"), std::string::npos);
  }
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
