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
    ...(slow ? { slowWeightBytes: p.slowWeightBytes, slowReasons: p.reasons } : {})
  }
}
