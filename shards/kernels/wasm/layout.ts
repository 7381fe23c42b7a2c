/**
 * Fixed layout shared by the host and the WebAssembly kernels (shards/asm/index.ts): the
 * argument block the host fills before each parallel call, and the op codes.
 */

/** Byte offset of the i32 argument slots (shards/asm/common.ts ARGS). */
export const ARGS_OFFSET = 256
export const ARGS_SLOTS = 16
/** Allocations start here; below it are the argument slots. */
export const HEAP_BASE = 64 * 1024
export const PAGE = 65536
/** wasm32 limit: 4 GiB of linear memory. */
export const MAX_PAGES = 65536

export const OP_MATMUL_F32 = 1
export const OP_MATMUL_F16 = 2
export const OP_MATMUL_Q8 = 3
export const OP_ATTENTION_F32 = 4
export const OP_ATTENTION_F16 = 5
export const OP_STREAM = 6
/**
 * Whole blocks, native addon only (shards/native/block.h); slot 1: the first block's
 * descriptor, slot 2: how many blocks (descriptors BLOCK_DESC_BYTES apart, run in order).
 */
export const OP_DECODE_BLOCK = 7
/**
 * Matmul on a block type of quant-blocks.ts, native addon only (shards/native/quant-dot.h);
 * slot 3: the ggml type id, slot 2: the f32 activations (the addon quantises them).
 */
export const OP_MATMUL_QUANT = 8
/**
 * Matmul on a block type in WebAssembly (shards/asm/matmul-quant.ts); slots 2-3: i16
 * activations and their scales, 8: the ggml type id, 9: Q8_K Σq per 16, 10: unpack areas.
 */
export const OP_MATMUL_BLOCKS = 9
/** BF16 weights in WebAssembly: the f32 kernel's slots and order (shards/asm/matmul-f.ts). */
export const OP_MATMUL_BF16 = 10
/** i32 slots of the block descriptor, and the byte offset of eps (f64) within it. */
export const BLOCK_DESC_SLOTS = 22
export const BLOCK_DESC_EPS_BYTE = 96
export const BLOCK_DESC_BYTES = 256
/** i32 types of wqkv, wo, w13, w2 (ggml ids), then whether Wv is separate and its type. */
export const BLOCK_DESC_TYPES_BYTE = 104
/** i64 addresses of wqkv, wo, w13, w2, wv as distances from the heap's start (follow the types). */
export const BLOCK_DESC_WEIGHTS_BYTE = 128
/** i32 qDim, then heap offsets of the QKV bias, Q norm and K norm weights (0: none), after the weights; shards/native/block.h. */
export const BLOCK_DESC_ARCH_BYTE = 168
/** i64 addresses of the KV layer's keys and values as distances from the heap's start (heap or native buffer). */
export const BLOCK_DESC_KV_BYTE = 184
/** Claim and done counters of the block's 5 phases, 16 i32 apart (own cache lines). */
export const BLOCK_SYNC_BYTES = 5 * 2 * 16 * 4

/** Control block (its own SharedArrayBuffer) slots used by the thread pool. */
export const CTRL_GENERATION = 0
export const CTRL_PENDING = 1
export const CTRL_STOP = 2
export const CTRL_ERROR = 3
/** 0: run the op in WebAssembly; 1: in the native addon. */
export const CTRL_ENGINE = 4
/** Next share of the current op to claim (shares go to whichever thread claims them first). */
export const CTRL_NEXT = 5
/** Non-zero: idle workers sleep at once instead of spinning (ThreadPool.rest). */
export const CTRL_REST = 6
export const CTRL_SLOTS = 8
