// Loader tests: the generated tiny model loads; every kind of damage made to a
// copy of it is an Error naming the file and the tensor or key.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/error.h"
#include "model/dtype.h"
#include "model/model_dir.h"
#include "model/tensor_layout.h"
#include "safetensors_edit.h"

namespace qwen3 {
namespace {

using test::SafetensorsImage;
using test::ScratchDir;
namespace fs = std::filesystem;

fs::path tiny_model() { return fs::path(test::env_or_fail("QWEN3_TEST_MODELS_DIR")) / "tiny"; }

// Opens `dir`, expecting an Error whose message contains every fragment.
void expect_load_error(const fs::path& dir, const std::vector<std::string>& fragments,
                       ErrorKind kind = ErrorKind::invalid_argument) {
  try {
    ModelDir::open(dir.string());
    ADD_FAILURE() << "loading " << dir << " succeeded; expected an error mentioning " << fragments[0];
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "message: " << msg << "\nmissing: " << f;
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected qwen3::Error, got " << e.what();
  }
}

class DamagedModel : public ::testing::Test {
 protected:
  ScratchDir scratch{"model"};
  fs::path dir;
  fs::path st;
  void SetUp() override {
    dir = scratch.copy_model(tiny_model());
    st = dir / "model.safetensors";
  }
  SafetensorsImage image() const { return SafetensorsImage::read(st); }
  void edit_config(const std::function<void(nlohmann::ordered_json&)>& f) {
    auto j = nlohmann::ordered_json::parse(test::slurp(dir / "config.json"));
    f(j);
    test::spit(dir / "config.json", j.dump(2));
  }
};

TEST(ModelDirTest, LoadsGeneratedTinyModel) {
  auto m = ModelDir::open(tiny_model().string());
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_hidden_layers, 2);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.intermediate_size, 192);
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.max_position_embeddings, 40960);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.bos_token_id, 151643);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{151645, 151643}));  // config, then generation_config
  EXPECT_DOUBLE_EQ(c.default_temperature, 0.6);
  EXPECT_EQ(c.default_top_k, 20);
  EXPECT_DOUBLE_EQ(c.default_top_p, 0.95);
  EXPECT_EQ(c.torch_dtype, "bfloat16");

  auto layout = qwen3_tensor_layout(c, false);
  EXPECT_EQ(m->tensor_names().size(), layout.size());
  size_t bytes = 0;
  for (const auto& spec : layout) {
    ASSERT_TRUE(m->has_tensor(spec.name)) << spec.name;
    EXPECT_EQ(m->tensor(spec.name).shape, spec.shape) << spec.name;
    EXPECT_EQ(m->tensor(spec.name).dtype, DType::bf16);
    bytes += m->tensor(spec.name).nbytes;
  }
  EXPECT_EQ(m->tensor_bytes(), bytes);
  EXPECT_EQ(&m->lm_head(), &m->embed_tokens());  // tied
  EXPECT_EQ(m->layer_tensor(1, "mlp.down_proj.weight").name, "model.layers.1.mlp.down_proj.weight");
  EXPECT_THROW(m->tensor("nonexistent.weight"), Error);
}

TEST(ModelDirTest, TensorViewConvertsElements) {
  auto m = ModelDir::open(tiny_model().string());
  const TensorView& t = m->layer_tensor(0, "self_attn.q_proj.weight");
  EXPECT_EQ(t.rows(), 128);
  EXPECT_EQ(t.cols(), 64);
  EXPECT_EQ(t.numel(), 128 * 64);
  std::vector<float> row(64);
  t.to_float(row, 64 * 5);
  for (int i = 0; i < 64; ++i) {
    uint16_t h;
    std::memcpy(&h, t.data + (64 * 5 + i) * 2, 2);
    EXPECT_EQ(row[i], bf16_to_float(h));
    EXPECT_EQ(row[i], t.at(64 * 5 + i));
  }
  std::vector<float> too_many(10);
  EXPECT_THROW(t.to_float(too_many, t.numel() - 5), Error);
}

TEST(ModelDirTest, MissingDirectoryAndFiles) {
  ScratchDir scratch("model");
  expect_load_error(scratch.path() / "absent", {"absent", "does not exist"}, ErrorKind::not_found);
  fs::path dir = scratch.copy_model(tiny_model());
  fs::remove(dir / "model.safetensors");
  expect_load_error(dir, {"model.safetensors", "model.safetensors.index.json"}, ErrorKind::not_found);
  fs::remove(dir / "config.json");
  expect_load_error(dir, {"config.json"}, ErrorKind::not_found);
}

TEST_F(DamagedModel, TruncatedFile) {
  std::string bytes = test::slurp(st);
  test::spit(st, bytes.substr(0, bytes.size() - 100));
  // The last tensor in the file (128 bytes) now runs past the end.
  expect_load_error(dir, {"model.safetensors", "model.norm.weight", "past the end"});
}

TEST_F(DamagedModel, TruncatedInsideHeader) {
  std::string bytes = test::slurp(st);
  test::spit(st, bytes.substr(0, 100));
  expect_load_error(dir, {"model.safetensors", "truncated"});
  test::spit(st, bytes.substr(0, 5));
  expect_load_error(dir, {"model.safetensors", "truncated"});
}

TEST_F(DamagedModel, CorruptHeaderJson) {
  std::string bytes = test::slurp(st);
  bytes[8] = '#';  // the opening brace
  test::spit(st, bytes);
  expect_load_error(dir, {"model.safetensors", "not valid JSON"});
}

TEST_F(DamagedModel, HeaderNotAnObject) {
  std::string h = "[1, 2, 3]";
  test::spit(st, SafetensorsImage::length_prefix(h.size()) + h);
  expect_load_error(dir, {"model.safetensors", "not a JSON object"});
}

TEST_F(DamagedModel, OversizedHeaderLength) {
  std::string bytes = test::slurp(st);
  std::string big = SafetensorsImage::length_prefix(200ull << 20);
  bytes.replace(0, 8, big);
  test::spit(st, bytes);
  expect_load_error(dir, {"model.safetensors", "exceeds the limit"});
  bytes.replace(0, 8, SafetensorsImage::length_prefix(~0ull));
  test::spit(st, bytes);
  expect_load_error(dir, {"model.safetensors", "exceeds the limit"});
}

TEST_F(DamagedModel, UnsupportedDtype) {
  auto img = image();
  img.header["model.layers.0.self_attn.k_proj.weight"]["dtype"] = "I16";
  img.write(st);
  expect_load_error(dir, {"model.safetensors", "model.layers.0.self_attn.k_proj.weight", "I16", "not supported"});
}

TEST_F(DamagedModel, DtypeDisagreesWithByteCount) {
  auto img = image();
  img.header["model.layers.0.self_attn.k_proj.weight"]["dtype"] = "F32";
  img.write(st);
  expect_load_error(dir, {"model.safetensors", "model.layers.0.self_attn.k_proj.weight", "needs"});
}

TEST_F(DamagedModel, WrongShape) {
  auto img = image();
  img.header["model.layers.1.self_attn.q_proj.weight"]["shape"] = {64, 128};  // same bytes, transposed
  img.write(st);
  expect_load_error(dir, {"model.safetensors", "model.layers.1.self_attn.q_proj.weight", "[64, 128]", "[128, 64]"});
}

TEST_F(DamagedModel, MalformedShapeAndOffsets) {
  auto img = image();
  img.header["model.norm.weight"]["shape"] = {-64};
  img.write(st);
  expect_load_error(dir, {"model.safetensors", "model.norm.weight", "shape"});
  img = image();
  img = SafetensorsImage::read(tiny_model() / "model.safetensors");
  img.header["model.norm.weight"]["data_offsets"] = {5};
  img.write(st);
  expect_load_error(dir, {"model.safetensors", "model.norm.weight", "data_offsets"});
  img = SafetensorsImage::read(tiny_model() / "model.safetensors");
  img.header["model.norm.weight"].erase("dtype");
  img.write(st);
  expect_load_error(dir, {"model.safetensors", "model.norm.weight", "dtype"});
}

TEST_F(DamagedModel, MissingTensor) {
  auto img = image();
  img.header.erase("model.layers.1.self_attn.k_norm.weight");
  img.write(st);
  expect_load_error(dir, {"model.safetensors", "model.layers.1.self_attn.k_norm.weight", "missing"});
}

TEST_F(DamagedModel, ExtraTensor) {
  auto img = image();
  uint64_t end = img.data.size();
  img.header["model.layers.0.self_attn.q_proj.bias"] = {
      {"dtype", "BF16"}, {"shape", {128}}, {"data_offsets", {end, end + 256}}};
  img.data.append(256, '\0');
  img.write(st);
  expect_load_error(dir, {"model.safetensors", "model.layers.0.self_attn.q_proj.bias", "unexpected"});
}

TEST_F(DamagedModel, OverlappingOffsets) {
  auto img = image();
  // Point k_norm (64 bytes) into the middle of q_norm's neighbour.
  uint64_t qn = img.offset_of("model.layers.0.self_attn.q_proj.weight");
  img.header["model.layers.0.self_attn.k_norm.weight"]["data_offsets"] = {qn + 100, qn + 164};
  img.write(st);
  expect_load_error(dir, {"model.safetensors", "overlaps", "model.layers.0.self_attn.k_norm.weight",
                          "model.layers.0.self_attn.q_proj.weight"});
}

TEST_F(DamagedModel, OutOfRangeOffsets) {
  auto img = image();
  uint64_t end = img.data.size();
  img.header["model.layers.0.input_layernorm.weight"]["data_offsets"] = {end + 8, end + 8 + 128};
  img.write(st);
  expect_load_error(dir, {"model.safetensors", "model.layers.0.input_layernorm.weight", "past the end"});
  img = SafetensorsImage::read(tiny_model() / "model.safetensors");
  img.header["model.layers.0.input_layernorm.weight"]["data_offsets"] = {200, 72};
  img.write(st);
  expect_load_error(dir, {"model.safetensors", "model.layers.0.input_layernorm.weight", "end before begin"});
}

void plant_bf16(SafetensorsImage& img, const std::string& tensor, int64_t element, uint16_t bits) {
  uint64_t at = img.offset_of(tensor) + element * 2;
  img.data[at] = static_cast<char>(bits & 0xff);
  img.data[at + 1] = static_cast<char>(bits >> 8);
}

TEST_F(DamagedModel, NaNWeight) {
  auto img = image();
  plant_bf16(img, "model.layers.1.mlp.up_proj.weight", 64 * 7 + 3, 0x7fc1);
  img.write(st);
  expect_load_error(dir, {"model.safetensors", "model.layers.1.mlp.up_proj.weight", "NaN", "row 7, column 3"});
}

TEST_F(DamagedModel, InfWeight) {
  auto img = image();
  plant_bf16(img, "model.embed_tokens.weight", 64 * 151935 + 63, 0xff80);  // the very last element
  img.write(st);
  expect_load_error(dir, {"model.safetensors", "model.embed_tokens.weight", "Inf", "row 151935"});
}

TEST_F(DamagedModel, NotQwen3Config) {
  edit_config([](auto& j) {
    j["model_type"] = "llama";
    j["architectures"] = {"LlamaForCausalLM"};
  });
  expect_load_error(dir, {"config.json", "architectures", "Qwen3ForCausalLM"});
  edit_config([](auto& j) {
    j["architectures"] = {"Qwen3MoeForCausalLM", "Qwen3ForCausalLM"};
    j["model_type"] = "qwen3_moe";
  });
  expect_load_error(dir, {"config.json", "model_type", "qwen3_moe"});
  edit_config([](auto& j) {
    j.erase("architectures");
    j.erase("model_type");
  });
  expect_load_error(dir, {"config.json", "not a Qwen3 config"});
}

TEST_F(DamagedModel, ConfigAcceptsEitherIdentityKey) {
  edit_config([](auto& j) { j.erase("architectures"); });
  EXPECT_NO_THROW(ModelDir::open(dir.string()));
  edit_config([](auto& j) {
    j["architectures"] = {"Qwen3ForCausalLM"};
    j.erase("model_type");
  });
  EXPECT_NO_THROW(ModelDir::open(dir.string()));
}

TEST_F(DamagedModel, NonsensicalConfigNumbers) {
  auto base = nlohmann::ordered_json::parse(test::slurp(dir / "config.json"));
  struct Case {
    std::function<void(nlohmann::ordered_json&)> edit;
    std::vector<std::string> fragments;
  };
  std::vector<Case> cases = {
      {[](auto& j) { j["num_key_value_heads"] = 3; }, {"num_key_value_heads", "does not divide"}},
      {[](auto& j) { j["hidden_size"] = 0; }, {"hidden_size", "out of range"}},
      {[](auto& j) { j["num_hidden_layers"] = -2; }, {"num_hidden_layers", "out of range"}},
      {[](auto& j) { j["intermediate_size"] = "big"; }, {"intermediate_size", "integer"}},
      {[](auto& j) { j.erase("vocab_size"); }, {"vocab_size", "missing"}},
      {[](auto& j) { j["rms_norm_eps"] = -1e-6; }, {"rms_norm_eps"}},
      {[](auto& j) { j["rope_theta"] = 0; }, {"rope_theta"}},
      {[](auto& j) { j["head_dim"] = 31; }, {"head_dim", "even"}},
      {[](auto& j) {
         j.erase("head_dim");
         j["num_attention_heads"] = 3;
         j["num_key_value_heads"] = 1;
       },
       {"head_dim", "not divisible"}},
      {[](auto& j) { j["eos_token_id"] = 151936; }, {"eos_token_id", "outside the vocabulary"}},
      {[](auto& j) { j["tie_word_embeddings"] = "yes"; }, {"tie_word_embeddings"}},
      {[](auto& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}}; }, {"rope_scaling"}},
      {[](auto& j) { j["attention_bias"] = true; }, {"attention_bias"}},
      {[](auto& j) { j["hidden_act"] = "gelu"; }, {"hidden_act"}},
  };
  for (const auto& c : cases) {
    auto j = base;
    c.edit(j);
    test::spit(dir / "config.json", j.dump(2));
    auto fragments = c.fragments;
    fragments.push_back("config.json");
    expect_load_error(dir, fragments);
  }
  test::spit(dir / "config.json", "{\"model_type\": \"qwen3\", ");
  expect_load_error(dir, {"config.json", "not valid JSON"});
}

TEST_F(DamagedModel, ConfigDefaultsAndIdForms) {
  edit_config([](auto& j) {
    j.erase("head_dim");  // 64 / 4 = 16: tensors no longer match, so check the config alone below
    j["eos_token_id"] = {151645, 7};
  });
  fs::remove(dir / "generation_config.json");
  // head_dim now defaults to 64 / 4 = 16, which contradicts the stored [32] head norms.
  expect_load_error(dir, {"model.safetensors", "model.layers.0.self_attn.k_norm.weight", "[32]", "[16]"});
  edit_config([](auto& j) { j["head_dim"] = 32; });
  auto m = ModelDir::open(dir.string());
  EXPECT_EQ(m->config().eos_token_ids, (std::vector<int32_t>{151645, 7}));
  EXPECT_EQ(m->config().default_top_k, 0);  // no generation_config.json
  test::spit(dir / "generation_config.json", R"({"eos_token_id": 9, "top_k": 5, "temperature": 0.7})");
  m = ModelDir::open(dir.string());
  EXPECT_EQ(m->config().eos_token_ids, (std::vector<int32_t>{151645, 7, 9}));
  EXPECT_EQ(m->config().default_top_k, 5);
  test::spit(dir / "generation_config.json", R"({"top_p": 1.5})");
  expect_load_error(dir, {"generation_config.json", "top_p"});
}

TEST_F(DamagedModel, UntiedNeedsLmHead) {
  edit_config([](auto& j) { j["tie_word_embeddings"] = false; });
  expect_load_error(dir, {"model.safetensors", "lm_head.weight", "tie_word_embeddings"});
}

TEST_F(DamagedModel, StoredLmHeadIsUsedEvenWhenTied) {
  auto img = image();
  uint64_t end = img.data.size();
  const uint64_t n = 151936ull * 64 * 2;
  img.header["lm_head.weight"] = {{"dtype", "BF16"}, {"shape", {151936, 64}}, {"data_offsets", {end, end + n}}};
  std::string head(n, '\0');
  head[0] = 0x80;  // first element 0x3f80 = 1.0
  head[1] = 0x3f;
  img.data += head;
  img.write(st);
  auto m = ModelDir::open(dir.string());
  EXPECT_EQ(m->lm_head().name, "lm_head.weight");
  EXPECT_EQ(m->lm_head().at(0), 1.0f);
  EXPECT_EQ(m->lm_head().at(1), 0.0f);
}

// F16 and F32 checkpoints: the same tiny model converted, then loaded.
TEST_F(DamagedModel, LoadsF32AndF16Checkpoints) {
  auto src = image();
  for (const char* dtype : {"F32", "F16"}) {
    SafetensorsImage out;
    out.header = nlohmann::ordered_json::object();
    for (auto it = src.header.begin(); it != src.header.end(); ++it) {
      if (it.key() == "__metadata__") continue;
      uint64_t b = it.value()["data_offsets"][0], e = it.value()["data_offsets"][1];
      uint64_t begin = out.data.size();
      for (uint64_t i = b; i < e; i += 2) {
        uint16_t h = static_cast<uint8_t>(src.data[i]) | (static_cast<uint8_t>(src.data[i + 1]) << 8);
        float f = bf16_to_float(h);
        if (std::string(dtype) == "F32") {
          out.data.append(reinterpret_cast<const char*>(&f), 4);
        } else {
          uint16_t g = float_to_f16(f);
          out.data.append(reinterpret_cast<const char*>(&g), 2);
        }
      }
      out.header[it.key()] = {{"dtype", dtype}, {"shape", it.value()["shape"]}, {"data_offsets", {begin, out.data.size()}}};
    }
    out.write(st);
    auto m = ModelDir::open(dir.string());
    auto ref = ModelDir::open(tiny_model().string());
    const TensorView& a = m->layer_tensor(1, "mlp.gate_proj.weight");
    const TensorView& b = ref->layer_tensor(1, "mlp.gate_proj.weight");
    EXPECT_EQ(a.dtype, std::string(dtype) == "F32" ? DType::f32 : DType::f16);
    for (int64_t i = 0; i < b.numel(); i += 97) {
      if (a.dtype == DType::f32)
        EXPECT_EQ(a.at(i), b.at(i));
      else
        EXPECT_NEAR(a.at(i), b.at(i), std::fabs(b.at(i)) * 1e-3 + 1e-7);
    }
  }
}

// Sharded checkpoints: the tiny model split in two files with an index.
class ShardedModel : public DamagedModel {
 protected:
  void split() {
    auto src = image();
    SafetensorsImage shard[2];
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    for (auto& s : shard) s.header = nlohmann::ordered_json::object();
    int i = 0;
    for (auto it = src.header.begin(); it != src.header.end(); ++it, ++i) {
      if (it.key() == "__metadata__") continue;
      int which = it.key().find("layers.1.") != std::string::npos || it.key() == "model.norm.weight" ? 1 : 0;
      uint64_t b = it.value()["data_offsets"][0], e = it.value()["data_offsets"][1];
      uint64_t begin = shard[which].data.size();
      shard[which].data += src.data.substr(b, e - b);
      shard[which].header[it.key()] = {{"dtype", it.value()["dtype"]}, {"shape", it.value()["shape"]},
                                       {"data_offsets", {begin, shard[which].data.size()}}};
      weight_map[it.key()] = which ? "model-00002-of-00002.safetensors" : "model-00001-of-00002.safetensors";
    }
    shard[0].write(dir / "model-00001-of-00002.safetensors");
    shard[1].write(dir / "model-00002-of-00002.safetensors");
    index = {{"metadata", {{"total_size", src.data.size()}}}, {"weight_map", weight_map}};
    write_index();
    fs::remove(st);
  }
  void write_index() { test::spit(dir / "model.safetensors.index.json", index.dump(2)); }
  nlohmann::ordered_json index;
};

TEST_F(ShardedModel, LoadsAndEqualsUnsharded) {
  split();
  auto sharded = ModelDir::open(dir.string());
  auto single = ModelDir::open(tiny_model().string());
  ASSERT_EQ(sharded->tensor_names(), single->tensor_names());
  EXPECT_EQ(sharded->tensor_bytes(), single->tensor_bytes());
  for (const auto& name : single->tensor_names()) {
    const TensorView& a = sharded->tensor(name);
    const TensorView& b = single->tensor(name);
    EXPECT_EQ(a.shape, b.shape);
    ASSERT_EQ(a.nbytes, b.nbytes);
    EXPECT_EQ(std::memcmp(a.data, b.data, a.nbytes), 0) << name;
  }
  EXPECT_NE(sharded->tensor("model.norm.weight").file.find("model-00002-of-00002.safetensors"), std::string::npos);
  EXPECT_EQ(sharded->config().hidden_size, 64);
}

TEST_F(ShardedModel, IndexPointsToMissingShard) {
  split();
  fs::remove(dir / "model-00002-of-00002.safetensors");
  expect_load_error(dir, {"model.safetensors.index.json", "model-00002-of-00002.safetensors", "does not exist"},
                    ErrorKind::not_found);
}

TEST_F(ShardedModel, IndexMissesTensorOrNamesWrongShard) {
  split();
  index["weight_map"]["model.norm.weight"] = "model-00001-of-00002.safetensors";
  write_index();
  expect_load_error(dir, {"model-0000", "model.norm.weight", "model.safetensors.index.json"});
  index["weight_map"].erase("model.norm.weight");
  write_index();
  expect_load_error(dir, {"model-00002-of-00002.safetensors", "model.norm.weight", "not assigned"});
}

TEST_F(ShardedModel, IndexCannotEscapeTheDirectory) {
  split();
  index["weight_map"]["model.norm.weight"] = "../model-00002-of-00002.safetensors";
  write_index();
  expect_load_error(dir, {"model.safetensors.index.json", "model.norm.weight", "plain file name"});
  test::spit(dir / "model.safetensors.index.json", "{\"weight_map\": 3}");
  expect_load_error(dir, {"model.safetensors.index.json", "weight_map"});
}

}  // namespace
}  // namespace qwen3
