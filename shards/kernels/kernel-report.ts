import { kvRowBytes } from '../kv-cache.js'
import type { Shard } from '../shard.js'
import type { Kernels } from './kernels.js'

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
  /** Where KV layers live: 'native' buffers, the WebAssembly 'heap', or plain 'memory'. */
  readonly kvMemory: 'native' | 'heap' | 'memory'
  /** Set when one session's KV (kvBytes) does not fit what is left of the WebAssembly heap. */
  readonly slowKv?: string
}

const MiB = (bytes: number): string => `${Math.round(bytes / 2 ** 20)} MiB`

export function spanKernelReport(kernels: Kernels, shard: Shard): SpanKernelReport {
  const c = shard.config
  const kvBytes = (shard.end - shard.start) * 2 * c.seqLen * kvRowBytes(shard.kvDType, c.kvDim)
  const p = kernels.placement?.()
  const slow = p !== undefined && p.slowWeightBytes > 0
  const kvMemory = shard.kvDType === 'q8_0' ? 'memory' : (p?.kvMemory ?? 'memory')
  // Without the native addon KV layers share the 4 GiB heap with the weights; a session past
  // what is left keeps its KV in ordinary memory, copied into the heap on every attention call.
  const kvShort = kvMemory === 'heap' && p?.kvHeapFreeBytes !== undefined && kvBytes > p.kvHeapFreeBytes
  const slowKv = kvShort
    ? `one session's KV (${MiB(kvBytes)}) does not fit the ${MiB(p?.kvHeapFreeBytes ?? 0)} left in the 4 GiB WebAssembly heap (no native addon): its attention copies the cache into the heap on every call`
    : undefined
  const slowAttention = shard.kvDType === 'q8_0' && kernels.name !== 'reference'
  return {
    kernels: slow || slowKv || slowAttention ? `${kernels.name}+slow` : kernels.name,
    weightBytes: shard.weightBytes,
    kvBytes,
    kvMemory,
    ...(slowKv ? { slowKv } : {}),
    ...(slow ? { slowWeightBytes: p.slowWeightBytes, slowReasons: p.reasons } : {}),
    // The fast kernels keep f32/f16 caches in their memory; a q8_0 one is read by the reference
    // attention (shards/kv-cache.ts), so say so rather than run slower silently.
    ...(slowAttention ? { slowAttention: 'q8_0 KV cache: attention runs on the reference kernels' } : {})
  }
}

/** Every cause of slowness in a report, one line each (for `node start`'s JSON line). */
export function spanSlowReasons(report: SpanKernelReport): string[] {
  return [
    ...(report.slowReasons ?? []),
    ...(report.slowAttention ? [report.slowAttention] : []),
    ...(report.slowKv ? [report.slowKv] : [])
  ]
}
