// In-place repacking of K-quant matrices into the rows8 layout (quant-layout.h).
#include "quant-layout.h"

#include <cstring>
#include <vector>

#include "quant-dot.h"

namespace ls {

bool rows8Supported(int type) { return type == kTypeQ4_K || type == kTypeQ5_K || type == kTypeQ6_K; }

bool repackRows8(int type, uint8_t* w, int rows, int cols) {
  if (!rows8Supported(type) || rows < 0) return false;
  const size_t rb = quantRowBytes(type, cols);
  if (rb == 0) return false;
  const size_t bb = quantRowBytes(type, 256), nb = rb / bb;
  // One tile at a time through a tile-sized copy: no second copy of the matrix.
  std::vector<uint8_t> tile(8 * rb);
  for (int t = 0; t < rows / 8; t++) {
    uint8_t* at = w + size_t(t) * 8 * rb;
    std::memcpy(tile.data(), at, 8 * rb);
    for (int i = 0; i < 8; i++)
      for (size_t b = 0; b < nb; b++) std::memcpy(at + (b * 8 + i) * bb, tile.data() + i * rb + b * bb, bb);
  }
  return true;
}

}  // namespace ls
