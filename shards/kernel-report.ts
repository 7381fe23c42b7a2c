import type { Kernels } from './kernels.js'
import { kvRowBytes } from './kv-cache.js'
import type { Shard } from './shard.js'

/** What a node tells about the kernels its span runs on (`node start`'s JSON line and log). */
export interface SpanKernelReport {
  /** The kernel set, e.g. "wasm-simd+native"; "+slow" when part of the span runs on TypeScript. */
  readonly kernels: string
  /** Bytes of the span's weights as stored (what a decode step reads). */
  readonly weightBytes: number
  /** KV bytes one session of the model's full context takes on this span. */
  readonly kvBytes: number
  /** Bytes of weights on the slow TypeScript kernels, and why (absent when none). */
  readonly slowWeightBytes?: number
  readonly slowReasons?: readonly string[]
  /** Set when attention runs on the TypeScript reference: a q8_0 KV cache on fast kernels. */
  readonly slowAttention?: string
}

export function spanKernelReport(kernels: Kernels, shard: Shard): SpanKernelReport {
  const c = shard.config
  const kvBytes = (shard.end - shard.start) * 2 * c.seqLen * kvRowBytes(shard.kvDType, c.kvDim)
  const p = kernels.placement?.()
  const slow = p !== undefined && p.slowWeightBytes > 0
  return {
    kernels: slow ? `${kernels.name}+slow` : kernels.name,
    weightBytes: shard.weightBytes,
    kvBytes,
    ...(slow ? { slowWeightBytes: p.slowWeightBytes, slowReasons: p.reasons } : {}),
    // The fast kernels keep f32/f16 caches in their memory; a q8_0 one is read by the reference
    // attention (shards/kv-cache.ts), so say so rather than run slower silently.
    ...(shard.kvDType === 'q8_0' && kernels.name !== 'reference'
      ? { slowAttention: 'q8_0 KV cache: attention runs on the reference kernels' }
      : {})
  }
}
