// The fused decode block (block.cc). The host (shards/kernels-wasm/fused-block.ts) writes a
// descriptor of BLOCK_DESC_SLOTS i32 slots (and eps as f64 at BLOCK_DESC_EPS_BYTE) into the
// shared memory and puts its offset in argument slot 1 of op 7.
#pragma once
#include <cstdint>

#define BLOCK_DESC_SLOTS 22
#define BLOCK_DESC_EPS_BYTE 96

namespace ls {

/** Take part in the block call described at base + descAt; n is the pool's thread count. */
void blockTask(uint8_t* base, uint32_t descAt, int n);
/** Whether this build has the fused block (AVX-512: the f32 and Q8_0 decode kernels). */
bool blockAvailable();

}  // namespace ls
