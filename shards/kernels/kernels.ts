import type { ModelConfig, WeightMatrix } from '../types.js'

/**
 * One layer of a session's KV cache: `maxLength` rows of kvDim values each, keys and values.
 * f32; f16 halves its memory (IEEE half bit patterns, Uint16Array); q8_0 stores each row as
 * GGUF Q8_0 blocks (kvDim/32 blocks of an f16 scale and 32 int8, 34 bytes, Uint8Array), as
 * llama.cpp's `--cache-type-k/v q8_0`. Element i of the flat [maxLength, kvDim] array lives in
 * block i/32 (kvDim is a multiple of 32, so blocks never straddle rows).
 */
export interface KvLayer {
  readonly dtype: 'f32' | 'f16' | 'q8_0'
  /** [maxLength, kvDim] */
  readonly keys: Float32Array | Uint16Array | Uint8Array
  /** [maxLength, kvDim] */
  readonly values: Float32Array | Uint16Array | Uint8Array
}

/** Shape of one attention call. Rows of the batch sit at positions startPos .. startPos+T-1. */
export interface AttentionShape {
  /** Tokens in the batch. */
  readonly T: number
  readonly startPos: number
  readonly nHeads: number
  readonly nKvHeads: number
  readonly headDim: number
}

/**
 * One expert's SwiGLU FFN: gate and up [hidden, dim], down [dim, hidden]. Without `up`, `gate`
 * holds [gate; up] stacked [2 hidden, dim] (one matmul); they stay apart when their types differ
 * (llama.cpp's K-quant mixtures may store them in two types).
 */
export interface ExpertFfn {
  readonly gate: WeightMatrix
  readonly up?: WeightMatrix
  readonly down: WeightMatrix
}

/** A block's router [nExperts, dim] and its experts. */
export interface MoeMatrices {
  readonly router: WeightMatrix
  readonly experts: readonly ExpertFfn[]
  /** qwen2moe's shared expert [sharedHidden wide], and its gate row gateInp [1, dim]. */
  readonly shared?: ExpertFfn & { readonly gateInp: WeightMatrix }
}

/** The weights of one transformer block as the forward pass holds them (shards/block.ts). */
export interface BlockMatrices {
  readonly attnNorm: Float32Array // [dim]
  readonly wqkv: WeightMatrix // [qDim + 2 kvDim, dim], or [qDim + kvDim, dim] when wv is set
  /**
   * Wv [kvDim, dim] on its own when its dtype differs from Wq/Wk's (llama.cpp's Q4_K_M and
   * Q5_K_M mixtures give some layers' attn_v Q6_K): then wqkv holds [Wq; Wk] only.
   */
  readonly wv?: WeightMatrix
  /** Wk [kvDim, dim] on its own when attn_k's type also differs from attn_q's: then wqkv holds Wq only (shards/qkv.ts). */
  readonly wk?: WeightMatrix
  /** Q, K, V biases [qDim + 2 kvDim] (qwen2), added to wqkv's output. */
  readonly bqkv?: Float32Array
  /** Per-head RMSNorm weights [headDim] on queries and on keys, before RoPE (qwen3). */
  readonly qNorm?: Float32Array
  readonly kNorm?: Float32Array
  readonly wo: WeightMatrix // [dim, qDim]
  readonly ffnNorm: Float32Array // [dim]
  readonly w13: WeightMatrix // gate then up [2 hidden, dim]
  readonly w2: WeightMatrix // down [dim, hidden]
  /** The mixture-of-experts FFN (shards/moe-block.ts); then w13 and w2 are empty (0 rows). */
  readonly moe?: MoeMatrices
  /** The block's index in the model: Gemma's sliding-window layers and RoPE bases depend on it. */
  readonly layer?: number
  /** RMSNorm weights [dim] on the attention and FFN outputs before their residual adds (Gemma 2/3). */
  readonly attnPostNorm?: Float32Array
  readonly ffnPostNorm?: Float32Array
}

/**
 * The kernel set the forward pass runs on. The plain TypeScript reference implements it in
 * `kernels-ref.ts`; faster sets (WebAssembly SIMD, native) replace it behind this interface and
 * are checked against the reference. All tensors are row-major; T is the batch (token) count.
 * Each output element must be computed by one summation in a fixed order, so results do not
 * depend on the thread count.
 */
export interface PrepareOptions {
  /** Keep the file's row layout in the prepared copy: its rows are read outside the kernels. */
  readonly keepRows?: boolean
}

export interface Kernels {
  readonly name: string
  /** Turn file weights into whatever the kernels multiply fastest (may copy or keep as is). */
  prepare(w: WeightMatrix): WeightMatrix
  /**
   * Optional: allocate a prepared matrix in the kernels' memory and let `fill` write its stored
   * bytes there directly (a model file reads into it), so no file copy is ever resident. The
   * kernels may then rearrange the bytes for their own streaming (the native kernels' rows8
   * layout of K-quants) unless `keepRows` says the caller reads rows of the prepared copy itself
   * (a tied embedding table).
   */
  prepareInto?(shape: Omit<WeightMatrix, 'data'>, fill: (data: Uint8Array) => void, options?: PrepareOptions): WeightMatrix
  /** out[T, w.rows] = x[T, w.cols] · wᵀ */
  matmul(out: Float32Array, x: Float32Array, w: WeightMatrix, T: number): void
  /** out[T, n] = x[T, n] / rms(x) * weight[n], n = weight.length */
  rmsnorm(out: Float32Array, x: Float32Array, weight: Float32Array, T: number, eps: number): void
  /**
   * In place RoPE on x[T, nHeads*headDim], adjacent pairs (2i, 2i+1) as llama2.c and GGUF.
   * Pair j turns by position * freqs[j] when `freqs` is given (scaled RoPE, architectures.ts
   * ropeFrequencies), else by position / theta^(2j/headDim).
   */
  rope(x: Float32Array, T: number, nHeads: number, headDim: number, startPos: number, theta: number, freqs?: Float64Array): void
  /** out[T, nHeads*headDim] = causal softmax(q kᵀ / √headDim) v over cache rows 0 .. startPos+t. */
  attention(out: Float32Array, q: Float32Array, kv: KvLayer, shape: AttentionShape): void
  /** gate[i] = silu(gate[i]) * up[i] for i < n */
  swiglu(gate: Float32Array, up: Float32Array, n: number): void
  /**
   * Optional: one whole block (shards/block.ts blockForward) on x [T, dim] in place, writing
   * the batch's keys and values into `kv` rows startPos.., in a single call. Returns false
   * when it does not take this case (the caller then runs the ops one by one). Must give the
   * same bits as the op-by-op path on the same kernel set.
   */
  blockForward?(x: Float32Array, T: number, startPos: number, w: BlockMatrices, kv: KvLayer, config: ModelConfig): boolean
  /**
   * Optional: consecutive blocks ws[i] (KV layer kvs[i]) in one call, as blockForward on each
   * in turn: one thread wake-up per step instead of one per block. False when it does not take
   * this case (the caller then runs the blocks one by one).
   */
  spanForward?(
    x: Float32Array,
    T: number,
    startPos: number,
    ws: readonly BlockMatrices[],
    kvs: readonly KvLayer[],
    config: ModelConfig
  ): boolean
  /**
   * Optional: let idle kernel threads sleep now rather than spin for the next call. Call it
   * before waiting on the network: spinning threads hold cores that other processes on the
   * same host (the next peer of a local swarm) need. Changes no result.
   */
  rest?(): void
  /** Release threads or memory the kernel set holds. */
  close?(): void
  /**
   * Optional: where the weights prepared so far run. Weights the fast kernels cannot take (a
   * span past the 4 GiB WebAssembly heap without the native addon, a block type without a
   * kernel here) run on the slow TypeScript definitions; this says how many bytes and why.
   */
  placement?(): KernelPlacement
}

export interface KernelPlacement {
  /** Bytes of prepared weights in total, and those that run on the slow TypeScript kernels. */
  readonly weightBytes: number
  /** Of those, bytes in native buffers past the 4 GiB WebAssembly heap (native kernels only). */
  readonly nativeBufferBytes?: number
  readonly slowWeightBytes: number
  /** One line per cause of slow weights (empty when none). */
  readonly reasons: readonly string[]
  /**
   * Where the kernels keep f32/f16 KV layers: native buffers (any size that fits in RAM), the
   * WebAssembly heap (with kvHeapFreeBytes left in it), or absent for plain typed arrays.
   */
  readonly kvMemory?: 'native' | 'heap'
  readonly kvHeapFreeBytes?: number
}
