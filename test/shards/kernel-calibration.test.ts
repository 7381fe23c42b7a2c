import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import {
  chooseKernels,
  cpuInfo,
  type KernelChoice,
  kernelChoiceOf,
  kernelChoiceSummary
} from '../../shards/kernels/kernel-calibration.js'
import { createFastKernels, type FastKernels } from '../../shards/kernels/kernels-fast.js'
import { matmulExact } from '../../shards/kernels/kernels-ref-exact.js'
import { loadNativeAddon } from '../../shards/native/load.js'
import { quantizeMatrix } from '../../shards/quant/index.js'
import { randomBlockMatrix } from '../helpers/random-blocks.js'

// Issue 40: kernels chosen by measurement. The calibration times both engines per dtype and
// shape class, caches the choice per machine and build, and routes each class accordingly;
// whatever it picks, results stay bit for bit those of the exact definitions.

const addon = loadNativeAddon()
const dir = mkdtempSync(join(tmpdir(), 'ls-calib-'))
const made: FastKernels[] = []
const fast = (): FastKernels => {
  const k = createFastKernels({ threads: 2 })
  made.push(k)
  return k
}
afterAll(() => {
  for (const k of made) k.close?.()
  rmSync(dir, { recursive: true, force: true })
})

describe('kernel calibration', () => {
  it('cpuInfo names the CPU and its SIMD flags', () => {
    const cpu = cpuInfo()
    expect(cpu.model.length).toBeGreaterThan(0)
    expect(cpu.arch).toBe(process.arch)
    if (process.platform === 'linux' && process.arch === 'x64') expect(cpu.flags).toContain('sse4_2')
  })

  it('without the addon, or with LAYERSWARM_CALIBRATE=0, nothing is measured or routed', () => {
    const k = fast()
    expect(chooseKernels(k, null, { file: join(dir, 'none.json') })).toBeUndefined()
    expect(chooseKernels(k, addon, { file: join(dir, 'none.json'), env: { LAYERSWARM_CALIBRATE: '0' } })).toBeUndefined()
    expect(k.avoidedNative()).toEqual([])
  })

  it.skipIf(!addon)('measures every dtype and shape once, caches it, and routes what the cache says', () => {
    const file = join(dir, 'choice.json')
    const k = fast()
    const first = chooseKernels(k, addon, { file }) as KernelChoice
    expect(first.classes.length).toBe(2 * (3 + 10))
    for (const c of first.classes) {
      expect(c.nativeMs).toBeGreaterThan(0)
      expect(c.wasmMs).toBeGreaterThan(0)
      expect(c.engine).toBe(c.wasmMs < c.nativeMs * 0.9 ? 'wasm' : 'native')
    }
    expect(kernelChoiceOf(k)).toBe(first)
    const cached = JSON.parse(readFileSync(file, 'utf8')) as Record<string, KernelChoice>
    expect(Object.keys(cached)).toEqual([first.key])
    // The cache decides from now on: edit it so Q8_0 batches and Q4_K decode stay on WebAssembly.
    const edited = {
      ...first,
      classes: first.classes.map((c) => ({
        ...c,
        engine: (c.dtype === 'q8_0' && c.shape === 'batched') || (c.dtype === 'q4_k' && c.shape === 'decode') ? 'wasm' : 'native'
      }))
    }
    writeFileSync(file, JSON.stringify({ [first.key]: edited }))
    const k2 = fast()
    const second = chooseKernels(k2, addon, { file }) as KernelChoice
    expect(second.measuredAt).toBe(first.measuredAt)
    expect(k2.avoidedNative()).toEqual(['q4_k:decode', 'q8_0:batched'])
    expect(kernelChoiceSummary(second).wasm).toEqual(['q8_0:batched', 'q4_k:decode'])
    // Same bits on either engine: Q8_0 batched (now WebAssembly) and Q4_K decode, against the definitions.
    const q8 = quantizeMatrix(
      new Float32Array(64 * 96).map((_, i) => Math.sin(i)),
      96,
      64,
      'q8_0'
    )
    const q4k = randomBlockMatrix('q4_k', 9, 512, 3)
    for (const [w, T] of [
      [q8, 12],
      [q4k, 1]
    ] as const) {
      const x = new Float32Array(T * w.cols).map((_, i) => Math.cos(i * 0.3))
      const got = new Float32Array(T * w.rows)
      const want = new Float32Array(T * w.rows)
      k2.matmul(got, x, k2.prepare(w), T)
      const k1 = fast()
      k1.matmul(want, x, k1.prepare(w), T)
      expect(got).toEqual(want)
      if (w.dtype === 'q4_k') {
        matmulExact(want, x, w, T)
        expect(got).toEqual(want)
      }
    }
  })

  it.skipIf(!addon)('a corrupt cache is measured again and rewritten', () => {
    const file = join(dir, 'corrupt.json')
    writeFileSync(file, '{not json')
    const choice = chooseKernels(fast(), addon, { file }) as KernelChoice
    expect(Object.keys(JSON.parse(readFileSync(file, 'utf8')))).toEqual([choice.key])
  })
})
