/**
 * Decode matmuls at the `8b` shape (dim 4096, ffn 14336, 8 KV heads of 128, vocab 128256) on the
 * native block-type kernels, old against new layout in ONE run: every matrix is prepared twice
 * through prepareInto, once kept in ggml's row layout (keepRows) and once repacked into the
 * addon's rows8 layout (shards/native/quant-layout.h), and each repetition times the two back to
 * back (alternating which goes first), so load from other processes hits both alike; the ratio
 * is the median of per-repetition ratios. Weights are cycled through copies of at least `coldMiB` per layout (DRAM, not cache).
 * With --model, the decode tokens/s of a whole model is estimated from its matrices' shapes and
 * types (block matrices plus the LM head, each timed here) for both layouts.
 *
 *   npm run bench -- kernels --shape 8b [--threads 2] [--reps 9] [--cold-mib 1024] [--model FILE] [--heap]
 */
import { parseArgs } from 'node:util'
import { createFastKernels, type FastKernels } from '../shards/kernels/kernels-fast.js'
import { openModelFile } from '../shards/model/open-model.js'
import { QUANT_LAYOUTS, type QuantDType } from '../shards/quant/quant-blocks.js'
import type { WeightMatrix } from '../shards/types.js'

/** rows × cols × type: every decode matmul of a Q4_K_M `8b` (Q6_K: attn_v, ffn_down of some layers, the head). */
const SHAPES: Array<[number, number, QuantDType]> = [
  [4096, 4096, 'q4_k'],
  [1024, 4096, 'q4_k'],
  [1024, 4096, 'q6_k'],
  [14336, 4096, 'q4_k'],
  [4096, 14336, 'q4_k'],
  [4096, 14336, 'q6_k'],
  [128256, 4096, 'q6_k']
]
/** Byte offsets of each block's f16 scales (ggml-common.h), set to a small normal half. */
const HALVES: Partial<Record<QuantDType, number[]>> = { q4_k: [0, 2], q5_k: [0, 2], q6_k: [208] }

export interface Kernels8bOptions {
  readonly threads: number
  readonly reps: number
  readonly coldMiB: number
  readonly model?: string
  /** Weights in the WebAssembly heap (up to its weight share) instead of native buffers. */
  readonly heap?: boolean
}

/** Random quant bytes with finite, normal scales (speed does not depend on the values). */
function fillBlocks(dtype: QuantDType, data: Uint8Array, seed: number): void {
  const { blockBytes } = QUANT_LAYOUTS[dtype]
  let s = seed >>> 0
  for (let i = 0; i < data.length; i += 4) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0
    data[i] = s & 0xff
    data[i + 1] = (s >>> 8) & 0xff
    data[i + 2] = (s >>> 16) & 0xff
    data[i + 3] = s >>> 24
  }
  for (let b = 0; b < data.length / blockBytes; b++)
    for (const at of HALVES[dtype] ?? []) {
      data[b * blockBytes + at] = 0x00
      data[b * blockBytes + at + 1] = 0x14 // 2^-10
    }
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
const round = (x: number, d = 2): number => Math.round(x * 10 ** d) / 10 ** d

/** Wall seconds of one decode call, and the process's CPU seconds in it (every kernel thread). */
function seconds(k: FastKernels, out: Float32Array, x: Float32Array, w: WeightMatrix, cpu: number[]): number {
  const c0 = process.cpuUsage()
  const t0 = process.hrtime.bigint()
  k.matmul(out, x, w, 1)
  const wall = Number(process.hrtime.bigint() - t0) / 1e9
  const c = process.cpuUsage(c0)
  cpu.push((c.user + c.system) / 1e6)
  return wall
}

export function runKernels8bBench(o: Kernels8bOptions): Record<string, unknown> {
  // Every copy in a native buffer (as most of an 8b span), both layouts alike.
  const k = createFastKernels({ threads: o.threads, heapWeightBytes: o.heap ? undefined : 0 })
  try {
    if (!k.name.includes('native') || !k.prepareInto) throw new Error('bench kernels --shape 8b needs the native addon')
    const streamGBs = round(k.readBandwidth(512 * 2 ** 20, 3))
    const results: Array<Record<string, unknown> & { key: string; plainS: number; rows8S: number }> = []
    for (const [rows, cols, dtype] of SHAPES) {
      const shape = { dtype, rows, cols }
      const bytes = (QUANT_LAYOUTS[dtype].blockBytes * rows * cols) / 256
      const copies = Math.max(1, Math.ceil((o.coldMiB * 2 ** 20) / bytes))
      const make = (keepRows: boolean, i: number): WeightMatrix =>
        (k.prepareInto as NonNullable<FastKernels['prepareInto']>)(shape, (d) => fillBlocks(dtype, d, rows + cols + i), {
          keepRows
        })
      const plain: WeightMatrix[] = []
      const rows8: WeightMatrix[] = []
      for (let i = 0; i < copies; i++) {
        plain.push(make(true, i))
        rows8.push(make(false, i))
      }
      const x = Float32Array.from({ length: cols }, (_, i) => Math.sin(i))
      const out = new Float32Array(rows)
      const cp: number[] = []
      const cr: number[] = []
      seconds(k, out, x, plain[0], [])
      seconds(k, out, x, rows8[0], [])
      const tp: number[] = []
      const tr: number[] = []
      const ratio: number[] = []
      for (let r = 0; r < o.reps; r++) {
        // Alternate which layout goes first: the second of a pair finds the threads awake.
        const first = r % 2 === 0
        const b0 = first ? 0 : seconds(k, out, x, rows8[(r + 1) % copies], cr)
        const a = seconds(k, out, x, plain[(r + 1) % copies], cp)
        const b = first ? seconds(k, out, x, rows8[(r + 1) % copies], cr) : b0
        tp.push(a)
        tr.push(b)
        ratio.push(a / b)
      }
      results.push({
        key: `${rows}x${cols}:${dtype}`,
        shape: `${rows}x${cols}`,
        dtype,
        weightMiB: round(bytes / 2 ** 20),
        copies,
        plainGBs: round(bytes / median(tp) / 1e9),
        rows8GBs: round(bytes / median(tr) / 1e9),
        plainFractionOfStream: round(bytes / median(tp) / 1e9 / streamGBs, 3),
        rows8FractionOfStream: round(bytes / median(tr) / 1e9 / streamGBs, 3),
        rows8SpeedupMedian: round(median(ratio), 3),
        // CPU time per call (a descheduled thread costs wall time, not CPU time; spinning
        // kernel threads do count): plain over rows8, medians.
        rows8CpuSpeedup: round(median(cp) / median(cr), 3),
        plainS: median(tp),
        rows8S: median(tr)
      })
    }
    const estimate = o.model ? modelEstimate(o.model, results) : undefined
    return {
      bench: 'kernels-8b',
      kernels: k.name,
      threads: o.threads,
      reps: o.reps,
      streamReadGBs: streamGBs,
      results: results.map(({ key, plainS, rows8S, ...r }) => r),
      ...(estimate ? { modelEstimate: estimate } : {})
    }
  } finally {
    k.close?.()
  }
}

/** Σ of the timed matmuls over a model's block matrices and head, as decode tokens/s per layout. */
function modelEstimate(path: string, results: Array<{ key: string; plainS: number; rows8S: number }>) {
  const model = openModelFile(path)
  try {
    const info = model.matrixInfo?.bind(model)
    if (!info) throw new Error(`${path}: no matrix shapes`)
    const c = model.config
    const names = ['attn_q', 'attn_k', 'attn_v', 'attn_output', 'ffn_gate', 'ffn_up', 'ffn_down'] as const
    const mats = [info('output')]
    for (let l = 0; l < c.nLayers; l++) for (const n of names) mats.push(info(`blk.${l}.${n}`))
    let plain = 0
    let rows8 = 0
    const missing = new Set<string>()
    for (const m of mats) {
      const hit = results.find((r) => r.key === `${m.rows}x${m.cols}:${m.dtype}`)
      if (!hit) {
        missing.add(`${m.rows}x${m.cols}:${m.dtype}`)
        continue
      }
      plain += hit.plainS
      rows8 += hit.rows8S
    }
    if (missing.size > 0) return { error: `shapes not timed here: ${[...missing].join(', ')}` }
    return {
      matmuls: mats.length,
      plainTokensPerSecond: round(1 / plain),
      rows8TokensPerSecond: round(1 / rows8),
      rows8Speedup: round(plain / rows8, 3)
    }
  } finally {
    model.close()
  }
}

export function main8b(argv: string[]): void {
  const { values } = parseArgs({
    args: argv,
    options: {
      shape: { type: 'string' },
      threads: { type: 'string', default: '2' },
      reps: { type: 'string', default: '9' },
      'cold-mib': { type: 'string', default: '1024' },
      model: { type: 'string' },
      heap: { type: 'boolean', default: false }
    }
  })
  const int = (name: string, v: string, min: number): number => {
    const n = Number(v)
    if (!Number.isInteger(n) || n < min) throw new Error(`bench kernels: --${name} must be an integer ≥ ${min}`)
    return n
  }
  if (values.shape !== '8b') throw new Error('bench kernels: --shape 8b is the only shape')
  const result = runKernels8bBench({
    threads: int('threads', values.threads, 1),
    reps: int('reps', values.reps, 1),
    coldMiB: int('cold-mib', values['cold-mib'], 1),
    model: values.model,
    heap: values.heap
  })
  console.log(JSON.stringify(result, null, 2))
}
