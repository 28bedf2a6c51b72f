// Float format conversions used by the loader and the generator.
#include <gtest/gtest.h>

#include <cmath>

#include "model/dtype.h"
#include "model/model_dir.h"

namespace qwen3 {
namespace {

TEST(DtypeTest, Bf16RoundTripAndRounding) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_to_float(0x4049), 3.140625f);
  // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties to even (1.0).
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  EXPECT_EQ(float_to_bf16(INFINITY), 0x7f80);
}

TEST(DtypeTest, F16KnownValues) {
  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(0xc000), -2.0f);
  EXPECT_EQ(f16_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_float(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_TRUE(std::isinf(f16_to_float(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_to_float(0x7e00)));
  EXPECT_EQ(f16_to_float(0x8000), -0.0f);
  for (uint32_t h = 0; h < 0x7c00; ++h) {  // every finite positive value survives a round trip
    ASSERT_EQ(float_to_f16(f16_to_float(static_cast<uint16_t>(h))), h) << h;
    ASSERT_EQ(float_to_f16(-f16_to_float(static_cast<uint16_t>(h))), h | 0x8000) << h;
  }
  EXPECT_EQ(float_to_f16(70000.0f), 0x7c00);
}

TEST(DtypeTest, Names) {
  EXPECT_STREQ(dtype_name(DType::bf16), "BF16");
  EXPECT_STREQ(dtype_name(DType::f16), "F16");
  EXPECT_STREQ(dtype_name(DType::f32), "F32");
  EXPECT_EQ(dtype_size(DType::f32), 4u);
  EXPECT_EQ(dtype_size(DType::bf16), 2u);
}

}  // namespace
}  // namespace qwen3
