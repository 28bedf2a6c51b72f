// The reference gives the same answer whatever form the same weights are
// stored in: BF16 in place, F32 (bit-identical), F16 (close), or BF16 at an odd
// file offset (copied before use).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>

#include "model/dtype.h"
#include "reference/reference_backend.h"
#include "safetensors_edit.h"
#include "test_models.h"

namespace qwen3 {
namespace {

namespace fs = std::filesystem;

std::vector<std::vector<float>> logits_of(const std::string& dir) {
  auto b = make_reference_backend(ModelDir::open(dir), 2);
  std::vector<int32_t> tokens = {151643, 9707, 11, 1879, 0, 151935, 42};
  auto kv = b->create_kv(8);
  auto r = b->forward(*kv, tokens, ForwardWants{.all_positions = true, .full_logits = true});
  std::vector<std::vector<float>> out;
  for (auto& p : r.positions) out.push_back(std::move(p.full));
  return out;
}

// Rewrites every tensor of `src` with `convert(bf16 bits) -> bytes` under `dtype`.
void rewrite(const fs::path& src, const fs::path& dst, const char* dtype,
             const std::function<void(uint16_t, std::string&)>& convert, bool odd_header = false) {
  auto in = test::SafetensorsImage::read(src);
  test::SafetensorsImage out;
  out.header = nlohmann::ordered_json::object();
  for (auto it = in.header.begin(); it != in.header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    uint64_t b = it.value()["data_offsets"][0], e = it.value()["data_offsets"][1];
    uint64_t begin = out.data.size();
    for (uint64_t i = b; i < e; i += 2)
      convert(static_cast<uint8_t>(in.data[i]) | (static_cast<uint8_t>(in.data[i + 1]) << 8), out.data);
    out.header[it.key()] = {{"dtype", dtype}, {"shape", it.value()["shape"]}, {"data_offsets", {begin, out.data.size()}}};
  }
  std::string h = out.header.dump();
  if (odd_header && h.size() % 2 == 0) h.push_back(' ');
  test::spit(dst, test::SafetensorsImage::length_prefix(h.size()) + h + out.data);
}

class WeightFormats : public ::testing::Test {
 protected:
  test::ScratchDir scratch{"ref-formats"};
  fs::path src = test::generated_model("tiny-outliers");
  fs::path dir = scratch.copy_model(src);
};

TEST_F(WeightFormats, F32CopyGivesBitIdenticalLogits) {
  rewrite(src / "model.safetensors", dir / "model.safetensors", "F32", [](uint16_t h, std::string& out) {
    float f = bf16_to_float(h);
    out.append(reinterpret_cast<const char*>(&f), 4);
  });
  EXPECT_EQ(ModelDir::open(dir.string())->embed_tokens().dtype, DType::f32);
  EXPECT_EQ(logits_of(dir.string()), logits_of(src.string()));
}

TEST_F(WeightFormats, F16CopyGivesCloseLogits) {
  rewrite(src / "model.safetensors", dir / "model.safetensors", "F16", [](uint16_t h, std::string& out) {
    uint16_t g = float_to_f16(bf16_to_float(h));
    out.append(reinterpret_cast<const char*>(&g), 2);
  });
  auto a = logits_of(dir.string()), b = logits_of(src.string());
  ASSERT_EQ(a.size(), b.size());
  for (size_t t = 0; t < a.size(); ++t) {
    double worst = 0;
    for (size_t v = 0; v < a[t].size(); ++v) worst = std::max(worst, std::fabs(double(a[t][v]) - b[t][v]));
    // The outlier embedding entries (120, -180, 150) and large norm weights lose bits in F16.
    EXPECT_LT(worst, 0.1) << "position " << t;
  }
}

TEST_F(WeightFormats, MisalignedBf16DataIsCopiedNotMisread) {
  // An odd header length puts every tensor at an odd address.
  rewrite(src / "model.safetensors", dir / "model.safetensors", "BF16",
          [](uint16_t h, std::string& out) { out.append(reinterpret_cast<const char*>(&h), 2); }, true);
  auto m = ModelDir::open(dir.string());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m->embed_tokens().data) % 2, 1u);
  EXPECT_EQ(logits_of(dir.string()), logits_of(src.string()));
}

}  // namespace
}  // namespace qwen3
