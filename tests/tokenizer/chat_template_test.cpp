// apply_chat_template against renderings of tokenizer_config.json's real Jinja
// template by @huggingface/jinja (oracle/make_oracle.js, chat_cases.json).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "test_paths.h"
#include "tokenizer/tokenizer.h"

namespace qwen3 {
namespace {

using json = nlohmann::json;

TEST(ChatTemplate, MatchesJinjaRenderingOfTokenizerConfig) {
  auto tok = test::qwen3_tokenizer();
  ASSERT_TRUE(tok);
  std::ifstream in(test::oracle_dir() + "/chat.jsonl");
  ASSERT_TRUE(in) << "chat.jsonl missing: the ctest fixture tokenizer_oracle_generate must run first";
  std::string line;
  size_t cases = 0, without_prompt = 0, thinking_off = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    json r = json::parse(line);
    std::vector<ChatMessage> messages;
    for (const auto& m : r["messages"]) {
      messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    }
    const bool gen = r["add_generation_prompt"].get<bool>();
    const bool think = r["enable_thinking"].get<bool>();
    const std::string text = tok->apply_chat_template(messages, gen, think);
    EXPECT_EQ(text, r["text"].get<std::string>())
        << r["name"].get<std::string>() << " add_generation_prompt=" << gen << " enable_thinking=" << think;
    EXPECT_EQ(tok->encode(text), r["ids"].get<std::vector<int32_t>>()) << r["name"].get<std::string>();
    ++cases;
    without_prompt += !gen;
    thinking_off += !think;
  }
  EXPECT_GE(cases, 40u);
  EXPECT_GT(without_prompt, 0u);
  EXPECT_GT(thinking_off, 0u);
}

TEST(ChatTemplate, GenerationPromptAndThinkingSwitch) {
  auto tok = test::qwen3_tokenizer();
  ASSERT_TRUE(tok);
  std::vector<ChatMessage> chat{{"user", "hi"}};
  const std::string on = tok->apply_chat_template(chat, true, true);
  const std::string off = tok->apply_chat_template(chat, true, false);
  const std::string none = tok->apply_chat_template(chat, false, false);
  EXPECT_TRUE(on.ends_with("<|im_start|>assistant\n"));
  EXPECT_TRUE(off.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_TRUE(none.ends_with("<|im_end|>\n"));
  // The rendered prompt tokenizes with the role markers as single special tokens.
  auto ids = tok->encode(off);
  EXPECT_EQ(ids.front(), *tok->token_to_id("<|im_start|>"));
  EXPECT_EQ(std::count(ids.begin(), ids.end(), *tok->token_to_id("<think>")), 1);
}

TEST(ChatTemplate, RejectsEmptyConversationAndUnknownRoles) {
  auto tok = test::qwen3_tokenizer();
  ASSERT_TRUE(tok);
  std::vector<ChatMessage> empty;
  try {
    tok->apply_chat_template(empty);
    ADD_FAILURE() << "empty conversation accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
  }
  std::vector<ChatMessage> bad{{"user", "x"}, {"narrator", "y"}};
  try {
    tok->apply_chat_template(bad);
    ADD_FAILURE() << "unknown role accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("narrator"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace qwen3
