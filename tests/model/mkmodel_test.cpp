// The generator: presets, determinism, tied/untied heads, planted outliers,
// tokenizer files, and clear failures.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>

#include "model/model_dir.h"
#include "safetensors_edit.h"

namespace qwen3 {
namespace {

namespace fs = std::filesystem;
using test::ScratchDir;

struct RunResult {
  int exit_code;
  std::string output;
};

RunResult run_mkmodel(const std::string& args) {
  std::string cmd = test::env_or_fail("QWEN3_MKMODEL") + " " + args + " 2>&1";
  RunResult r{-1, ""};
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string tokenizer_dir() { return test::env_or_fail("QWEN3_TEST_TOKENIZER_DIR"); }

TEST(MkModelTest, SameSeedSameBytesOtherSeedOtherBytes) {
  ScratchDir s("mkmodel");
  for (const char* name : {"a", "b", "c"}) {
    std::string seed = std::string(name) == "c" ? "6" : "5";
    auto r = run_mkmodel((s.path() / name).string() + " --preset tiny --seed " + seed + " --tokenizer-dir " +
                         tokenizer_dir());
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }
  std::string a = test::slurp(s.path() / "a" / "model.safetensors");
  EXPECT_TRUE(a == test::slurp(s.path() / "b" / "model.safetensors"));
  EXPECT_FALSE(a == test::slurp(s.path() / "c" / "model.safetensors"));
  EXPECT_EQ(test::slurp(s.path() / "a" / "config.json"), test::slurp(s.path() / "b" / "config.json"));
  // The shared test model is the same generator output for seed 1.
  ASSERT_EQ(run_mkmodel((s.path() / "d").string() + " --preset tiny --seed 1 --tokenizer-dir " + tokenizer_dir())
                .exit_code,
            0);
  EXPECT_TRUE(test::slurp(s.path() / "d" / "model.safetensors") ==
              test::slurp(fs::path(test::env_or_fail("QWEN3_TEST_MODELS_DIR")) / "tiny" / "model.safetensors"));
}

TEST(MkModelTest, WritesHfLayoutWithTokenizer) {
  fs::path dir = fs::path(test::env_or_fail("QWEN3_TEST_MODELS_DIR")) / "small-outliers";
  for (const char* f : {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
                        "tokenizer_config.json"})
    EXPECT_TRUE(fs::is_regular_file(dir / f)) << f;
  EXPECT_TRUE(test::slurp(dir / "tokenizer.json") == test::slurp(fs::path(tokenizer_dir()) / "tokenizer.json"));
  auto cfg = nlohmann::json::parse(test::slurp(dir / "config.json"));
  EXPECT_EQ(cfg["architectures"][0], "Qwen3ForCausalLM");
  EXPECT_EQ(cfg["model_type"], "qwen3");
  EXPECT_EQ(cfg["torch_dtype"], "bfloat16");
  EXPECT_EQ(cfg["eos_token_id"], 151645);
  auto gen = nlohmann::json::parse(test::slurp(dir / "generation_config.json"));
  EXPECT_EQ(gen["eos_token_id"], nlohmann::json({151645, 151643}));

  auto m = ModelDir::open(dir.string());
  EXPECT_EQ(m->config().hidden_size, 256);
  EXPECT_EQ(m->config().num_hidden_layers, 4);
  EXPECT_EQ(m->config().num_attention_heads, 8);
  EXPECT_EQ(m->config().num_key_value_heads, 4);
  EXPECT_EQ(m->config().head_dim, 64);
  EXPECT_EQ(m->config().intermediate_size, 768);
  EXPECT_EQ(m->config().vocab_size, 151936);
  EXPECT_FALSE(m->has_tensor("lm_head.weight"));

  // Outlier channels carry the same large embedding entry for every token.
  auto channels = cfg["qwen3_bpf_generated"]["outlier_channels"].get<std::vector<int>>();
  ASSERT_EQ(channels.size(), 3u);
  const TensorView& e = m->embed_tokens();
  for (int ch : channels) {
    float first = e.at(ch);
    EXPECT_GE(std::fabs(first), 100.0f);
    for (int64_t row : {1, 777, 151935}) EXPECT_EQ(e.at(row * 256 + ch), first);
  }
  // Norm weights of the outlier channels are small, the others sized by calibration.
  const TensorView& n = m->layer_tensor(2, "input_layernorm.weight");
  for (int ch : channels) EXPECT_LT(n.at(ch), 0.1f);
}

TEST(MkModelTest, UntiedWritesLmHead) {
  ScratchDir s("mkmodel");
  auto r = run_mkmodel(s.str() + "/u --preset tiny --untied --seed 3 --tokenizer-dir " + tokenizer_dir());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto m = ModelDir::open(s.str() + "/u");
  EXPECT_FALSE(m->config().tie_word_embeddings);
  ASSERT_TRUE(m->has_tensor("lm_head.weight"));
  EXPECT_EQ(m->lm_head().name, "lm_head.weight");
  EXPECT_NE(m->lm_head().at(5), m->embed_tokens().at(5));
}

TEST(MkModelTest, RejectsBadArgumentsClearly) {
  ScratchDir s("mkmodel");
  auto r = run_mkmodel(s.str() + "/x --preset huge --tokenizer-dir " + tokenizer_dir());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("unknown preset 'huge'"), std::string::npos) << r.output;
  r = run_mkmodel(s.str() + "/x --preset tiny --tokenizer-dir " + s.str() + "/nowhere");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("tokenizer.json"), std::string::npos) << r.output;
  EXPECT_FALSE(fs::exists(s.path() / "x" / "config.json"));  // no half-written model looks complete
  r = run_mkmodel(s.str() + "/x");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("usage"), std::string::npos);
  r = run_mkmodel(s.str() + "/x --preset tiny --seed -3");
  EXPECT_NE(r.exit_code, 0);
  r = run_mkmodel(s.str() + "/x --preset tiny --frobnicate");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--frobnicate"), std::string::npos);
}

}  // namespace
}  // namespace qwen3
