// Random damage to a small safetensors file: every outcome is either a clean
// load or a qwen3::Error, never a crash or another exception type.
#include <gtest/gtest.h>

#include <random>

#include "common/error.h"
#include "model/safetensors_file.h"
#include "model/safetensors_writer.h"
#include "safetensors_edit.h"

namespace qwen3 {
namespace {

TEST(SafetensorsFuzz, RandomCorruptionIsAnErrorOrALoad) {
  test::ScratchDir scratch("fuzz");
  const auto base_path = scratch.path() / "base.safetensors";
  {
    SafetensorsWriter w(base_path.string(), {{"a.weight", DType::bf16, {4, 8}},
                                              {"b.weight", DType::f32, {3}},
                                              {"c.weight", DType::f16, {2, 2, 2}}});
    std::vector<uint8_t> bytes(64 + 12 + 16, 0x3c);
    w.write(bytes.data(), bytes.size());
    w.finish();
  }
  const std::string base = test::slurp(base_path);
  ASSERT_EQ(SafetensorsFile(base_path.string()).tensors().size(), 3u);

  std::mt19937 rng(1234);
  const auto path = scratch.path() / "damaged.safetensors";
  int loads = 0, errors = 0;
  for (int iter = 0; iter < 400; ++iter) {
    std::string bytes = base;
    switch (iter % 4) {
      case 0:  // flip a few bytes anywhere in the header
      case 1:
        for (int k = 0; k < 1 + iter % 3; ++k) bytes[8 + rng() % (bytes.size() - 8 - 92)] = static_cast<char>(rng());
        break;
      case 2:  // replace a digit with another (offsets, shapes)
        for (size_t tries = 0; tries < 100; ++tries) {
          size_t at = 8 + rng() % (bytes.size() - 8 - 92);
          if (std::isdigit(static_cast<unsigned char>(bytes[at]))) {
            bytes[at] = static_cast<char>('0' + rng() % 10);
            break;
          }
        }
        break;
      case 3:  // truncate or damage the length field
        if (rng() % 2)
          bytes.resize(rng() % bytes.size());
        else
          bytes[rng() % 8] = static_cast<char>(rng());
        break;
    }
    test::spit(path, bytes);
    try {
      SafetensorsFile f(path.string());
      for (const auto& t : f.tensors()) {
        ASSERT_GE(t.data, f.data());
        ASSERT_LE(t.data + t.nbytes, f.data() + f.size());
      }
      ++loads;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
      ++errors;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "iteration " << iter << ": unexpected exception type: " << e.what();
    }
  }
  EXPECT_GT(errors, 200);  // most damage is detected...
  EXPECT_GT(loads, 0);     // ...and harmless damage (e.g. inside __metadata__ or spaces) still loads
}

}  // namespace
}  // namespace qwen3
