// Standalone check of the Arm NEON kernels (neon-q8.cc) against the canonical scalar Q8_0
// arithmetic (matmul.cc's generic path, shards/kernels-ref-exact.ts), bit for bit, on random
// inputs: decode (T < 8, both entry points) and batched shapes, whole and split row ranges.
// Cross-compiled for aarch64 and run under qemu-user by test/shards/neon-cross.test.ts (the
// Node addon itself needs an arm64 node, which CI does not have). It checks correctness only:
// timings under an emulator mean nothing. Prints "ok <cases>" and exits 0, else the first
// mismatch and exits 1.
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "matmul.h"

namespace {

uint32_t state = 0x9e3779b9u;
uint32_t next() {
  state ^= state << 13, state ^= state >> 17, state ^= state << 5;
  return state;
}

float halfToFloat(uint16_t h) {
  uint32_t em = uint32_t(h & 0x7fff) << 13, bits;
  float f;
  std::memcpy(&f, &em, 4);
  f *= 5.192296858534828e33f;
  std::memcpy(&bits, &f, 4);
  bits |= uint32_t(h & 0x8000) << 16;
  std::memcpy(&f, &bits, 4);
  return f;
}

// The canonical chain per (row, token): exact block sums, then sumf + f32(isum)·(dw·dx).
// Not vectorized: GCC 12 at -O2 -march=native on an AVX512-VNNI host was seen to compute this
// int8 × int8 loop wrongly when it vectorizes it (built natively, the check doubles as an x86 one).
__attribute__((optimize("no-tree-vectorize"))) void reference(const uint8_t* w, const int8_t* xs, const float* xd, float* out, int rows, int cols, int T) {
  const int nb = cols / 32;
  for (int r = 0; r < rows; r++)
    for (int t = 0; t < T; t++) {
      float sumf = 0;
      for (int b = 0; b < nb; b++) {
        const uint8_t* blk = w + (size_t(r) * nb + b) * 34;
        int isum = 0;
        for (int i = 0; i < 32; i++) isum += int(int8_t(blk[2 + i])) * xs[size_t(t) * cols + b * 32 + i];
        uint16_t h;
        std::memcpy(&h, blk, 2);
        sumf = sumf + float(isum) * (halfToFloat(h) * xd[size_t(t) * nb + b]);
      }
      out[size_t(t) * rows + r] = sumf;
    }
}

int failures = 0, cases = 0;

void expectSame(const char* what, const std::vector<float>& got, const std::vector<float>& want, int rows, int cols, int T) {
  cases++;
  if (std::memcmp(got.data(), want.data(), want.size() * 4) == 0) return;
  for (size_t i = 0; i < want.size(); i++)
    if (std::memcmp(&got[i], &want[i], 4) != 0) {
      std::printf("MISMATCH %s rows=%d cols=%d T=%d at %zu: got %.9g want %.9g\n", what, rows, cols, T, i, got[i], want[i]);
      break;
    }
  failures++;
}

void run(int rows, int cols, int T) {
  const int nb = cols / 32;
  std::vector<uint8_t> w(size_t(rows) * nb * 34);
  for (size_t i = 0; i < w.size(); i++) w[i] = uint8_t(next());  // quants include −128
  for (int b = 0; b < rows * nb; b++) {
    // Scales: normal halves of either sign, magnitude 2^-14 .. 2^1.
    const uint16_t h = uint16_t(((next() & 1) << 15) | ((1 + next() % 16) << 10) | (next() & 0x3ff));
    std::memcpy(&w[size_t(b) * 34], &h, 2);
  }
  std::vector<int8_t> xs(size_t(T) * cols);
  std::vector<int16_t> xq(xs.size());
  for (size_t i = 0; i < xs.size(); i++) xs[i] = int8_t(int(next() % 255) - 127), xq[i] = xs[i];
  std::vector<float> xd(size_t(T) * nb);
  for (auto& d : xd) d = float(next() % 100000 + 1) * 1e-7f;
  // decodeQ8Prepared's Σq per block × decodeQ8Bias() (0 on NEON and AVX2, 128 with VNNI).
  std::vector<int32_t> bias(size_t(T) * nb, 0);
  for (size_t j = 0; j < bias.size(); j++) {
    int s = 0;
    for (int i = 0; i < 32; i++) s += xs[j * 32 + i];
    bias[j] = ls::decodeQ8Bias() * s;
  }
  std::vector<float> want(size_t(T) * rows), got(want.size());
  reference(w.data(), xs.data(), xd.data(), want.data(), rows, cols, T);
  const int mid = rows / 3;
  if (T < 8 && ls::decodeAvailable(true)) {
    std::fill(got.begin(), got.end(), -1.f);
    ls::decodeQ8Prepared(w.data(), xs.data(), bias.data(), xd.data(), got.data(), rows, cols, T, 0, rows);
    expectSame("decodeQ8Prepared", got, want, rows, cols, T);
    std::fill(got.begin(), got.end(), -1.f);
    ls::decodeQ8(w.data(), xq.data(), xd.data(), got.data(), rows, cols, T, 0, mid);
    ls::decodeQ8(w.data(), xq.data(), xd.data(), got.data(), rows, cols, T, mid, rows);
    expectSame("decodeQ8 (split rows)", got, want, rows, cols, T);
  }
  std::fill(got.begin(), got.end(), -1.f);
  ls::matmulQ8Prepare(xs.data(), xd.data(), cols, T);
  ls::matmulQ8Rows(w.data(), got.data(), rows, cols, T, 0, mid);
  ls::matmulQ8Rows(w.data(), got.data(), rows, cols, T, mid, rows);
  expectSame("matmulQ8Rows (split rows)", got, want, rows, cols, T);
  std::fill(got.begin(), got.end(), -1.f);
  ls::matmulQ8(w.data(), xq.data(), xd.data(), got.data(), rows, cols, T, 0, rows);
  expectSame("matmulQ8", got, want, rows, cols, T);
}

}  // namespace

int main() {
  std::printf("isa %s, decode kernels %s\n", ls::isa(), ls::decodeAvailable(true) ? "yes" : "no");
  for (int T : {1, 2, 3, 7, 8, 9, 17, 33})
    for (int cols : {32, 96, 2048})
      for (int rows : {1, 5, 13, 64}) run(rows, cols, T);
  if (failures > 0) {
    std::printf("FAILED %d of %d\n", failures, cases);
    return 1;
  }
  std::printf("ok %d\n", cases);
  return 0;
}
