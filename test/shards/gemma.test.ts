import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import {
  type ArchSpec,
  computeModelId,
  createEdge,
  createFastKernels,
  createRandomModel,
  createShard,
  type Kernels,
  type ModelConfig,
  type ModelFile,
  openModelFile,
  parseShape,
  writeRandomModel
} from '../../shards/index.js'
import { createNaiveGemmaModel } from '../helpers/naive-gemma.js'

// Gemma 2 and Gemma 3 (issue 34) against an independent float64 forward written from Hugging
// Face's modeling code (test/helpers/naive-gemma.ts), and ablations: with each family-specific
// step taken out of the engine, its logits move far from that forward, so the comparison would
// fail if the step were removed from the engine.

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-gemma-'))
const open: Kernels[] = []
afterAll(() => {
  for (const k of open) k.close?.()
})

/** The same model with its config changed (the engine reads everything through model.config). */
function withConfig(model: ModelFile, change: (c: ModelConfig) => ModelConfig): ModelFile {
  return Object.create(model, { config: { value: change(model.config) } })
}

function engineLogits(model: ModelFile, ids: number[], split: number[], kernels?: Kernels): Float32Array[] {
  const edge = createEdge({ model, kernels })
  const shards = split.slice(1).map((end, i) => createShard({ model, start: split[i], end, kernels }))
  for (const s of shards) s.openSession('x', { maxLength: 64 })
  const run = (t: number[], pos: number) => shards.reduce((h, s) => s.forward('x', h, pos), edge.embed(t))
  const V = model.config.vocabSize
  const out: Float32Array[] = []
  // A prefill of 7 rows (the batched path), then one row at a time (the decode path).
  const prefill = edge.logits(run(ids.slice(0, 7), 0), 7)
  for (let t = 0; t < 7; t++) out.push(prefill.slice(t * V, (t + 1) * V))
  for (let p = 7; p < ids.length; p++) out.push(edge.logits(run([ids[p]], p), 1).slice())
  return out
}

function relErr(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let num = 0
  let den = 0
  for (let i = 0; i < a.length; i++) {
    num += (a[i] - b[i]) ** 2
    den += b[i] ** 2
  }
  return Math.sqrt(num / den)
}

// Small soft-caps and a window of 4 so that each step changes the logits of 14 positions.
const GEMMA2: ArchSpec = { architecture: 'gemma2', headDim: 32, slidingWindow: 4, attnSoftcap: 2, finalSoftcap: 3 }
const GEMMA3: ArchSpec = { architecture: 'gemma3', headDim: 32, slidingWindow: 4, swaPattern: 2, ropeTheta: 1000000 }
const SHAPE = '64,3,4,2,96,300'
// The GeGLU gate goes through binary16 (ggml's table): a float32 value next to a rounding
// boundary of f16 may round the other way than its float64 counterpart, hence 5e-4, not 1e-5.
const TOL = 5e-4
const ids = [1, 17, 290, 44, 3, 101, 250, 60, 61, 9, 77, 200, 5, 42]

function worstAgainstNaive(model: ModelFile, logits: Float32Array[]): number {
  const naive = createNaiveGemmaModel(model, { geluF16: true })
  return Math.max(...ids.map((id, pos) => relErr(logits[pos], naive.step(id, pos))))
}

const cases: Array<{ what: string; arch: ArchSpec }> = [
  { what: 'gemma2', arch: GEMMA2 },
  { what: 'gemma3', arch: GEMMA3 }
]

describe('gemma2 / gemma3 against an independent float64 forward', () => {
  for (const { what, arch } of cases) {
    for (const dtype of ['f32', 'q8_0'] as const) {
      it(`${what} ${dtype}: reference kernels split in spans, and fast kernels`, () => {
        const model = createRandomModel(parseShape(SHAPE), { dtype, seed: 5, seqLen: 64, arch })
        expect(worstAgainstNaive(model, engineLogits(model, ids, [0, 1, 3]))).toBeLessThan(TOL)
        const fast = createFastKernels({ threads: 2 })
        open.push(fast)
        // Q8_0 activations are quantised by the fast kernels (as ggml does): a looser bound.
        const tol = dtype === 'q8_0' ? 3e-2 : TOL
        expect(worstAgainstNaive(model, engineLogits(model, ids, [0, 3], fast))).toBeLessThan(tol)
      })
    }
  }

  // Each ablation takes one step out of the engine; the engine must then be far from the
  // float64 forward (which keeps the step), 20× the tolerance above.
  const ablations: Array<{ what: string; arch: ArchSpec; change: (c: ModelConfig) => ModelConfig }> = [
    { what: 'gemma2 attention soft-cap', arch: GEMMA2, change: (c) => fam(c, { attnSoftcap: 0 }) },
    { what: 'gemma2 final soft-cap', arch: GEMMA2, change: (c) => fam(c, { finalSoftcap: 0 }) },
    { what: 'gemma2 sliding window', arch: GEMMA2, change: (c) => fam(c, { slidingWindow: 0 }) },
    { what: 'gemma2 embedding scale', arch: GEMMA2, change: (c) => fam(c, { embedScale: 1 }) },
    { what: 'gemma2 post-norms', arch: GEMMA2, change: (c) => fam(c, { postNorms: false }) },
    { what: 'gemma2 GeGLU (as SwiGLU)', arch: GEMMA2, change: (c) => fam(c, { ffnAct: 'silu' }) },
    { what: 'gemma3 local RoPE base', arch: GEMMA3, change: (c) => fam(c, { ropeThetaSwa: c.ropeTheta }) },
    { what: 'gemma3 sliding window', arch: GEMMA3, change: (c) => fam(c, { slidingWindow: 0 }) },
    { what: 'gemma3 Q/K norms', arch: GEMMA3, change: (c) => ({ ...c, qkNorm: false }) },
    { what: 'gemma3 post-norms', arch: GEMMA3, change: (c) => fam(c, { postNorms: false }) }
  ]
  for (const a of ablations) {
    it(`without the ${a.what} the engine is far from the float64 forward`, () => {
      const model = createRandomModel(parseShape(SHAPE), { dtype: 'f32', seed: 5, seqLen: 64, arch: a.arch })
      const ablated = withConfig(model, a.change)
      expect(worstAgainstNaive(model, engineLogits(ablated, ids, [0, 3]))).toBeGreaterThan(1e-2)
    })
  }
})

function fam(c: ModelConfig, f: Partial<NonNullable<ModelConfig['family']>>): ModelConfig {
  return { ...c, family: { ...(c.family as NonNullable<ModelConfig['family']>), ...f } }
}

describe('gemma files', () => {
  it('round-trip through GGUF: the same config and logits bit for bit; distinct model ids', () => {
    const seen = new Set<string>()
    for (const { what, arch } of cases) {
      const path = join(dir, `${what}.gguf`)
      writeRandomModel(path, parseShape(SHAPE), { dtype: 'q8_0', seed: 9, seqLen: 64, arch })
      const file = openModelFile(path)
      const mem = createRandomModel(parseShape(SHAPE), { dtype: 'q8_0', seed: 9, seqLen: 64, arch })
      expect(file.config).toEqual(mem.config)
      expect(file.config.family?.embedScale).toBe(Math.fround(8))
      const a = engineLogits(file, ids.slice(0, 9), [0, 3])
      const b = engineLogits(mem, ids.slice(0, 9), [0, 2, 3])
      a.forEach((l, i) => {
        expect(Buffer.from(l.buffer).equals(Buffer.from(b[i].buffer)), `${what} position ${i}`).toBe(true)
      })
      seen.add(computeModelId(file))
      file.close()
    }
    expect(seen.size).toBe(2)
  })

  it('batched steps of two sessions (a node batching sessions) give each session its own bits', () => {
    const model = createRandomModel(parseShape(SHAPE), { dtype: 'q8_0', seed: 6, seqLen: 64, arch: GEMMA2 })
    const edge = createEdge({ model })
    const mk = () => createShard({ model, start: 1, end: 3 })
    const [alone, batched] = [mk(), mk()]
    for (const s of [alone, batched]) for (const id of ['a', 'b']) s.openSession(id, { maxLength: 32 })
    const prompts = { a: ids.slice(0, 6), b: ids.slice(6, 13) }
    const want = Object.entries(prompts).map(([id, p]) => alone.forward(id, edge.embed(p), 0))
    const got = batched.forwardBatch(Object.entries(prompts).map(([id, p]) => ({ id, hidden: edge.embed(p), startPos: 0 })))
    got.forEach((g, i) => {
      expect(Buffer.from(g.buffer).equals(Buffer.from(want[i].buffer))).toBe(true)
    })
  })

  it('defaults as llama.cpp reads them: gemma2 window 4096 every other layer, caps 50 / 30; gemma3 no window or caps', () => {
    const g2 = createRandomModel(parseShape(SHAPE), { dtype: 'f32', seed: 1, seqLen: 64, arch: { architecture: 'gemma2' } })
    const path = join(dir, 'g2-defaults.gguf')
    writeRandomModel(path, parseShape(SHAPE), { dtype: 'f32', seed: 1, seqLen: 64, arch: { architecture: 'gemma2' } })
    const file = openModelFile(path)
    expect(file.config.family).toEqual(g2.config.family)
    expect(file.config.family).toMatchObject({ slidingWindow: 4096, swaPeriod: 2, attnSoftcap: 50, finalSoftcap: 30 })
    expect(file.config.tiedEmbeddings).toBe(true)
    file.close()
    const g3 = createRandomModel(parseShape(SHAPE), { dtype: 'f32', seed: 1, seqLen: 64, arch: { architecture: 'gemma3' } })
    expect(g3.config.family).toMatchObject({ slidingWindow: 0, attnSoftcap: 0, finalSoftcap: 0, ropeThetaSwa: 10000 })
    expect(g3.config.qkNorm).toBe(true)
  })
})
