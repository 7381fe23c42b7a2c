/**
 * Block-type kernel microbenchmark: nanoseconds of CPU time per 256-weight super-block (per
 * token) of the native (or WebAssembly) matmul on one thread, decode (T = 1) and batched
 * (T = 64), at the 1.1b shapes (2048 → 5632 and 5632 → 2048). Process CPU time rather than wall
 * time, so other processes on a shared machine slow it less; one kernel thread, so it is that
 * thread's time. Weights stay in cache (a few MiB, reused): this is the compute cost, not DRAM.
 *
 *   npm run bench -- kernels --types q4_k,q6_k [--quick]
 */
import { createFastKernels } from '../shards/kernels/kernels-fast.js'
import { quantizeMatrix } from '../shards/quant/codecs.js'
import type { QuantDType } from '../shards/quant/quant-blocks.js'

const SHAPES: Array<[number, number]> = [
  [5632, 2048],
  [2048, 5632]
]

export interface QuantKernelBenchOptions {
  /** Block types, and q8_0 (issue 40: its batched kernel per instruction-set level). */
  readonly types: ReadonlyArray<QuantDType | 'q8_0'>
  readonly quick?: boolean
  /** WebAssembly instead of the addon. */
  readonly wasm?: boolean
}

function randomValues(n: number, seed: number): Float32Array {
  const v = new Float32Array(n)
  let s = seed
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    v[i] = (s / 2 ** 32 - 0.5) * 0.2
  }
  return v
}

/** Least CPU microseconds of one call over `reps` calls (after a warm-up). */
function cpuMicros(call: () => void, reps: number): number {
  call()
  let best = Number.POSITIVE_INFINITY
  for (let i = 0; i < reps; i++) {
    const t0 = process.cpuUsage()
    call()
    const d = process.cpuUsage(t0)
    best = Math.min(best, d.user + d.system)
  }
  return best
}

export function runQuantKernelBench(options: QuantKernelBenchOptions): Record<string, unknown> {
  const k = createFastKernels({ threads: 1, ...(options.wasm ? { native: false } : {}) })
  const results: Record<string, unknown>[] = []
  try {
    for (const dtype of options.types) {
      for (const [rows, cols] of SHAPES) {
        const w = k.prepare(quantizeMatrix(randomValues(rows * cols, rows + cols), rows, cols, dtype))
        const superBlocks = (rows * cols) / 256
        const entry: Record<string, unknown> = { dtype, shape: `${rows}x${cols}` }
        for (const T of [1, 64]) {
          const x = randomValues(T * cols, 7 + T).map((v) => v * 50)
          const out = new Float32Array(T * rows)
          // Process CPU time has a coarse tick: time enough calls that one measurement is ≥ 20 ms.
          const calls = T === 1 ? 200 : 4
          const us = cpuMicros(
            () => {
              for (let c = 0; c < calls; c++) k.matmul(out, x, w, T)
            },
            options.quick ? 2 : 5
          )
          entry[T === 1 ? 'decodeNsPerSuperBlock' : 'batch64NsPerSuperBlockPerToken'] = round(
            (us * 1000) / calls / superBlocks / T
          )
        }
        results.push(entry)
      }
    }
  } finally {
    k.close?.()
  }
  return { bench: 'kernels-quant', node: process.version, kernels: k.name, threads: 1, results }
}

function round(x: number): number {
  return Math.round(x * 100) / 100
}
