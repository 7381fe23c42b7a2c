/**
 * Kernel microbenchmark: decode matvec GB/s for f32 and q8_0 at 110m-like and 1.1b-like shapes,
 * batched T=128 throughput, against the reference and with 1 and 2 threads, next to the
 * streaming read bandwidth of the same threads measured in the same run. Prints one JSON object.
 *
 *   node dist/bench/kernels.js [--quick]
 *
 * Weights are cycled through enough copies to exceed the last-level cache, so decode numbers
 * are DRAM numbers as in a real model, not cache hits.
 */
import { pathToFileURL } from 'node:url'
import type { Kernels } from '../shards/kernels/kernels.js'
import { createFastKernels, type FastKernels } from '../shards/kernels/kernels-fast.js'
import { createReferenceKernels } from '../shards/kernels/kernels-ref.js'
import { quantizeMatrix } from '../shards/quant/codecs.js'
import type { WeightDType, WeightMatrix } from '../shards/types.js'

const SHAPES: Array<[number, number]> = [
  [768, 768],
  [2048, 768],
  [32000, 768],
  [5632, 2048]
]
/** Bytes of weight copies cycled through in decode runs (well above a 32 MiB L3). */
const COLD_BYTES = 256 * 2 ** 20

function randomMatrix(rows: number, cols: number, dtype: WeightDType, seed: number): WeightMatrix {
  const v = new Float32Array(rows * cols)
  let s = seed
  for (let i = 0; i < v.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    v[i] = (s / 2 ** 32 - 0.5) * 0.2
  }
  return quantizeMatrix(v, rows, cols, dtype)
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)]
}

/** Median seconds per call over `reps` calls (after one warm-up), cycling through weights. */
function time(k: Kernels, ws: WeightMatrix[], T: number, reps: number): number {
  const { rows, cols } = ws[0]
  const x = new Float32Array(T * cols).map((_, i) => Math.sin(i))
  const out = new Float32Array(T * rows)
  k.matmul(out, x, ws[0], T)
  const times: number[] = []
  for (let i = 0; i < reps; i++) {
    const w = ws[i % ws.length]
    const t0 = process.hrtime.bigint()
    k.matmul(out, x, w, T)
    times.push(Number(process.hrtime.bigint() - t0) / 1e9)
  }
  return median(times)
}

export interface KernelBenchOptions {
  readonly quick?: boolean
}

export function runKernelBench(options: KernelBenchOptions = {}): Record<string, unknown> {
  const quick = options.quick ?? false
  const sets: Array<[string, FastKernels]> = [
    ['wasm1', createFastKernels({ threads: 1, native: false })],
    ['wasm2', createFastKernels({ threads: 2, native: false })]
  ]
  const native2 = createFastKernels({ threads: 2 })
  const hasNative = native2.name.includes('native')
  const ref = createReferenceKernels()
  const bandwidth: Record<string, number> = {}
  for (const [name, k] of sets)
    bandwidth[name === 'wasm1' ? 'threads1' : 'threads2'] = round(k.readBandwidth(512 * 2 ** 20, quick ? 3 : 5))
  const results: Record<string, unknown>[] = []
  for (const dtype of ['f32', 'q8_0'] as const) {
    for (const [rows, cols] of SHAPES) {
      const base = randomMatrix(rows, cols, dtype, rows + cols)
      const bytes = base.data.byteLength
      const copies = Math.max(1, Math.min(512, Math.ceil(COLD_BYTES / bytes)))
      const entry: Record<string, unknown> = { dtype, shape: `${rows}x${cols}`, weightMiB: round(bytes / 2 ** 20) }
      for (const [name, k] of sets) {
        const ws = Array.from({ length: copies }, () => k.prepare(base))
        const reps = quick ? 5 : Math.max(9, Math.min(200, Math.ceil(2e9 / bytes)))
        const s = time(k, ws, 1, reps)
        entry[`decodeGBs_${name}`] = round(bytes / s / 1e9)
        entry[`decodeUs_${name}`] = round(s * 1e6)
        if (!quick || rows * cols <= 768 * 2048) {
          const sb = time(k, [ws[0]], 128, quick ? 1 : 3)
          entry[`batch128TokPerS_${name}`] = round(128 / sb)
        }
      }
      if (hasNative) {
        const w = native2.prepare(base)
        entry.batch128TokPerS_native2 = round(128 / time(native2, [w], 128, quick ? 1 : 3))
      }
      if (rows * cols <= 2048 * 768) {
        entry.decodeGBs_reference = round(bytes / time(ref, [base], 1, 3) / 1e9)
        if (rows * cols <= 768 * 768) entry.batch128TokPerS_reference = round(128 / time(ref, [base], 128, 1))
      }
      results.push(entry)
    }
  }
  for (const [, k] of sets) k.close?.()
  native2.close?.()
  return { bench: 'kernels', node: process.version, native: hasNative, streamReadGBs: bandwidth, results }
}

function round(x: number): number {
  return Math.round(x * 100) / 100
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  console.log(JSON.stringify(runKernelBench({ quick: process.argv.includes('--quick') }), null, 2))
}
