// The fused decode block (block.cc). The host (shards/kernels-wasm/fused-block.ts) writes a
// descriptor of BLOCK_DESC_SLOTS i32 slots (and eps as f64 at BLOCK_DESC_EPS_BYTE) per block
// into the shared memory, BLOCK_DESC_BYTES apart, and puts the first one's offset in argument
// slot 1 of op 7 and the number of blocks in slot 2.
#pragma once
#include <cstdint>

#define BLOCK_DESC_SLOTS 22
#define BLOCK_DESC_EPS_BYTE 96
#define BLOCK_DESC_BYTES 256
// Matrix types (ggml ids: 0 f32, 8 Q8_0, quant-dot.h's) of wqkv, wo, w13, w2, then whether Wv
// is separate (0: stacked in wqkv) and its type, as i32 from this byte on.
#define BLOCK_DESC_TYPES_BYTE 104
// The weights' addresses as i64 byte distances from the shared memory's start (weights past
// the WebAssembly heap live in native buffers, anywhere): wqkv, wo, w13, w2, wv.
#define BLOCK_DESC_WEIGHTS_BYTE 128
// Architecture slots (i32 from this byte, after the five weight addresses): qDim, then heap
// offsets of the QKV bias and the Q and K norm weights (0: none).
#define BLOCK_DESC_ARCH_BYTE 168
#define BLOCK_DESC_ARCH_SLOTS 4
// The KV layer's keys and values as i64 byte distances from the shared memory's start (with the
// addon, KV layers live in native buffers, not in the WebAssembly heap).
#define BLOCK_DESC_KV_BYTE 184

namespace ls {

/**
 * Take part in the call running `count` blocks described from base + descAt, in order; n is
 * the pool's thread count.
 */
void blockTask(uint8_t* base, uint32_t descAt, int count, int n);
/** Whether this build has the fused block (AVX-512: the f32 and Q8_0 decode kernels). */
bool blockAvailable();

}  // namespace ls
