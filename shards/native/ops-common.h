// Scalar helpers shared by ops.cc and attention.cc: bit casts and WebAssembly's f32.max.
#pragma once
#include <cstdint>
#include <cstring>

namespace ls {
namespace {

inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// WebAssembly f32.max: NaN in, NaN out; max(-0, +0) = +0.
inline float wasmMax(float a, float b) {
  if (a != a || b != b) return a + b;
  if (a == b) return floatOf(bitsOf(a) & bitsOf(b));
  return a > b ? a : b;
}

// AssemblyScript reads a float literal as f64 and then narrows it: (float)(double literal).
#define F32(lit) static_cast<float>(lit)

}  // namespace
}  // namespace ls
