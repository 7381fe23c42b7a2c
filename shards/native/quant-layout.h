// The rows8 layout of a K-quant matrix (Q4_K, Q5_K, Q6_K; repackRows8 in quant-layout.cc).
// ggml stores a matrix row after row, so the 8-row decode kernels (quant-decode.cc) read 8
// streams a row apart at once. In rows8 every tile of 8 consecutive rows is interleaved by
// super-block instead: tile t holds block 0 of its rows 8t … 8t + 7, then block 1 of them, and
// so on, so one 8-row pass reads one contiguous stream whose cache lines it uses whole (the
// idea of llama.cpp's load-time repacking, ggml-cpu/repack.cpp block_q4_Kx8, without its
// reordering of quants inside blocks: blocks stay byte-for-byte ggml blocks, so every kernel
// computes exactly the same sums on them). Rows past the last full tile stay plain after the
// tiles. The matrix keeps its size: the repacking happens in place.
#pragma once
#include <cstddef>
#include <cstdint>

namespace ls {

/** OR-ed into a K-quant's type code (op 8, the fused block's type slots): the matrix is rows8. */
constexpr int kRows8 = 0x100;
inline int baseType(int type) { return type & 0xff; }

/** Rows below this are in 8-row tiles (0 for a plain matrix of wRows rows). */
inline int rows8Tiled(int type, int wRows) { return (type & kRows8) != 0 ? wRows / 8 * 8 : 0; }

/** Row r's block 0; its block b is b · blockStride(tiled, r) · bb bytes further. */
inline const uint8_t* rowStart(const uint8_t* w, int tiled, size_t rb, int bb, int r) {
  return r < tiled ? w + size_t(r / 8) * 8 * rb + size_t(r % 8) * bb : w + size_t(r) * rb;
}
inline int blockStride(int tiled, int r) { return r < tiled ? 8 : 1; }

/** Whether repackRows8 takes `type` (Q4_K, Q5_K, Q6_K: the types of quant-decode.cc's rowsK). */
bool rows8Supported(int type);
/**
 * Rearrange a plain matrix of `rows` rows of `cols` elements into rows8, in place (one tile of
 * scratch); false, and nothing changed, for other types or a partial super-block.
 */
bool repackRows8(int type, uint8_t* w, int rows, int cols);

}  // namespace ls
