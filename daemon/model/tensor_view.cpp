#include <cmath>

#include "common/error.h"

#include "model/dtype.h"
#include "model/model_dir.h"

namespace qwen3 {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::f32: return "F32";
  }
  return "?";
}

size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

float f16_to_float(uint16_t h) {
  uint32_t sign = (h >> 15) & 1u, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  float v;
  if (exp == 0) {
    v = std::ldexp(static_cast<float>(mant), -24);  // subnormal (or zero)
  } else if (exp == 31) {
    v = mant ? NAN : INFINITY;
  } else {
    v = std::ldexp(static_cast<float>(mant | 0x400u), static_cast<int>(exp) - 25);
  }
  return sign ? -v : v;
}

uint16_t float_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7e00;
  if (a >= 65520.0f) return sign | 0x7c00;
  if (a < std::ldexp(1.0f, -14)) {  // subnormal: multiples of 2^-24
    float m = std::nearbyint(a * std::ldexp(1.0f, 24));
    return sign | static_cast<uint16_t>(m);
  }
  int e;
  float m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  float scaled = std::nearbyint(std::ldexp(m, 11));  // 11 significant bits
  if (scaled >= 2048.0f) { scaled /= 2; ++e; }
  uint32_t exp = static_cast<uint32_t>(e - 1 + 15);
  if (exp >= 31) return sign | 0x7c00;
  return sign | static_cast<uint16_t>((exp << 10) | (static_cast<uint32_t>(scaled) & 0x3ffu));
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorView::cols() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

float TensorView::at(int64_t i) const {
  switch (dtype) {
    case DType::bf16: {
      uint16_t h;
      std::memcpy(&h, data + i * 2, 2);
      return bf16_to_float(h);
    }
    case DType::f16: {
      uint16_t h;
      std::memcpy(&h, data + i * 2, 2);
      return f16_to_float(h);
    }
    case DType::f32: {
      float f;
      std::memcpy(&f, data + i * 4, 4);
      return f;
    }
  }
  return 0.0f;
}

void TensorView::to_float(std::span<float> out, int64_t first) const {
  const size_t n = out.size();
  if (first < 0 || first + static_cast<int64_t>(n) > numel())
    throw invalid_argument(file + ": tensor '" + name + "': to_float range [" + std::to_string(first) + ", " +
                           std::to_string(first + static_cast<int64_t>(n)) + ") outside its " +
                           std::to_string(numel()) + " elements");
  switch (dtype) {
    case DType::bf16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, data + (first + static_cast<int64_t>(i)) * 2, 2);
        out[i] = bf16_to_float(h);
      }
      break;
    case DType::f16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, data + (first + static_cast<int64_t>(i)) * 2, 2);
        out[i] = f16_to_float(h);
      }
      break;
    case DType::f32:
      std::memcpy(out.data(), data + first * 4, n * 4);
      break;
  }
}

}  // namespace qwen3
