// The exact f16 → f32 conversion every native kernel shares: shift the exponent and mantissa
// into place and multiply by 2^112, as shards/asm/common.ts halfToFloat does, so each kernel set
// reads GGUF block scales to the same bits. Plain C++: included by the AVX2, VNNI and NEON files.
#pragma once
#include <cstdint>
#include <cstring>

namespace ls {

inline float halfBitsToFloat(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  uint32_t em = uint32_t(h & 0x7fff) << 13, bits;
  float f;
  std::memcpy(&f, &em, 4);
  f *= 5.192296858534828e33f;  // 2^112
  std::memcpy(&bits, &f, 4);
  bits |= uint32_t(h & 0x8000) << 16;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace ls
