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
  type ModelFile,
  openModelFile,
  parseShape,
  UnsupportedModelError,
  writeGguf,
  writeRandomModel
} from '../../shards/index.js'
import { loadNativeAddon } from '../../shards/native/load.js'
import { createNaiveFamilyModel } from '../helpers/naive-families.js'

// Each family's forward pass (reference and fast kernels) against an independent float64
// forward written from the model cards (test/helpers/naive-families.ts).

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-arch-'))
const open: Kernels[] = []
afterAll(() => {
  for (const k of open) k.close?.()
})

function engineLogits(model: ModelFile, tokens: number[], extra: number[], split: number[], kernels?: Kernels) {
  const edge = createEdge({ model, kernels })
  const shards = split.slice(1).map((end, i) => createShard({ model, start: split[i], end, kernels }))
  for (const s of shards) s.openSession('x', { maxLength: 64 })
  const run = (ids: number[], pos: number) => shards.reduce((h, s) => s.forward('x', h, pos), edge.embed(ids))
  const V = model.config.vocabSize
  const out: Float32Array[] = []
  const prefill = edge.logits(run(tokens, 0), tokens.length)
  for (let t = 0; t < tokens.length; t++) out.push(prefill.slice(t * V, (t + 1) * V))
  extra.forEach((id, i) => {
    out.push(edge.logits(run([id], tokens.length + i), 1).slice())
  })
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

const same = (a: Float32Array, b: Float32Array): boolean => Buffer.from(a.buffer).equals(Buffer.from(b.buffer))

const FAMILIES: Array<{ what: string; spec: string; arch: ArchSpec; llama3Factor?: number }> = [
  {
    what: 'llama 3 (θ 500000, llama3 rope_freqs)',
    spec: '64,3,4,2,96,300',
    arch: { architecture: 'llama', ropeTheta: 500000, ropeScaling: 'llama3' },
    llama3Factor: 8
  },
  {
    what: 'llama, linear RoPE scaling ×4',
    spec: '64,2,4,4,96,300,tied',
    arch: { architecture: 'llama', ropeScaling: 'linear', ropeScalingFactor: 4 }
  },
  { what: 'qwen2 (QKV biases, NEOX)', spec: '64,3,4,2,96,300,tied', arch: { architecture: 'qwen2', ropeTheta: 1000000 } },
  {
    what: 'qwen3 (Q/K norms, head size 32 ≠ dim/heads)',
    spec: '64,3,4,2,96,300',
    arch: { architecture: 'qwen3', headDim: 32, ropeTheta: 1000000 }
  }
]

const tokens = [1, 17, 290, 44, 3, 101, 250, 60, 61] // 9: the batched kernels (T >= 8) too
const extra = [9, 77, 200, 5]
const positions = [...tokens, ...extra]

describe('model families against an independent float64 forward', () => {
  for (const f of FAMILIES) {
    for (const dtype of ['f32', 'f16', 'q8_0'] as const) {
      it(`${f.what}, ${dtype}: reference kernels, split in spans`, () => {
        const model = createRandomModel(parseShape(f.spec), { dtype, seed: 3, seqLen: 64, arch: f.arch })
        const ours = engineLogits(model, tokens, extra, [0, 1, model.config.nLayers])
        const naive = createNaiveFamilyModel(model, { llama3Factor: f.llama3Factor })
        positions.forEach((id, pos) => {
          expect(relErr(ours[pos], naive.step(id, pos)), `position ${pos}`).toBeLessThan(1e-5)
        })
      })
    }
  }

  it('the naive forward is sensitive to what it checks (NEOX vs NORM, biases, Q/K norms)', () => {
    // Reading a qwen3 model as if RoPE were NORM must give different logits, so the check above can fail.
    const model = createRandomModel(parseShape('64,2,4,2,96,300'), { dtype: 'f32', seed: 3, seqLen: 64, arch: FAMILIES[3].arch })
    const asLlama: ModelFile = { ...model, metadata: new Map([...model.metadata, ['general.architecture', 'llama']]) }
    const a = createNaiveFamilyModel(model)
    const b = createNaiveFamilyModel(asLlama)
    let worst = 0
    positions.forEach((id, pos) => {
      worst = Math.max(worst, relErr(a.step(id, pos), b.step(id, pos)))
    })
    expect(worst).toBeGreaterThan(1e-3)
  })

  const addon = loadNativeAddon()
  for (const f of FAMILIES) {
    for (const dtype of ['f32', 'q8_0'] as const) {
      it(`${f.what}, ${dtype}: fast kernels (fused block on and off give the same bits)`, () => {
        const model = createRandomModel(parseShape(f.spec), { dtype, seed: 4, seqLen: 64, arch: f.arch })
        const fused = createFastKernels({ threads: 2 })
        const plain = createFastKernels({ threads: 2, fusedBlock: false })
        open.push(fused, plain)
        let fusedRuns = 0
        for (const key of ['blockForward', 'spanForward'] as const) {
          const inner = fused[key]?.bind(fused) as ((...a: unknown[]) => boolean) | undefined
          if (inner)
            (fused as unknown as Record<string, unknown>)[key] = (...a: unknown[]) => {
              const ran = inner(...a)
              if (ran) fusedRuns++
              return ran
            }
        }
        const a = engineLogits(model, tokens, extra, [0, 1, model.config.nLayers], fused)
        const b = engineLogits(model, tokens, extra, [0, model.config.nLayers], plain)
        a.forEach((l, i) => {
          expect(same(l, b[i]), `position ${i}`).toBe(true)
        })
        const naive = createNaiveFamilyModel(model, { llama3Factor: f.llama3Factor })
        // Q8_0 activations are quantized by the fast kernels (as ggml does): a looser bound.
        const tol = dtype === 'q8_0' ? 2e-2 : 1e-5
        positions.forEach((id, pos) => {
          expect(relErr(a[pos], naive.step(id, pos)), `position ${pos}`).toBeLessThan(tol)
        })
        // Where the addon has the fused block, every family runs through it (not op by op).
        if (addon?.fusedBlock) expect(fusedRuns).toBeGreaterThan(0)
      })
    }
  }
})

describe('family files', () => {
  it('every family round-trips through GGUF: same config, same logits bit for bit, distinct model ids', () => {
    const ids = new Set<string>()
    for (const f of FAMILIES) {
      const shape = parseShape(f.spec)
      const path = join(dir, `${f.arch.architecture}-${f.arch.ropeScaling ?? 'none'}.gguf`)
      writeRandomModel(path, shape, { dtype: 'q8_0', seed: 9, seqLen: 64, arch: f.arch })
      const file = openModelFile(path)
      const mem = createRandomModel(shape, { dtype: 'q8_0', seed: 9, seqLen: 64, arch: f.arch })
      expect(file.config).toEqual(mem.config)
      expect(file.metadata.get('general.architecture')).toBe(f.arch.architecture)
      const a = engineLogits(file, [1, 5, 6, 7], [8, 9], [0, shape.nLayers])
      const b = engineLogits(mem, [1, 5, 6, 7], [8, 9], [0, 1, shape.nLayers])
      a.forEach((l, i) => {
        expect(same(l, b[i])).toBe(true)
      })
      // The fast kernels read a file's tensors straight into their memory (reordering NEOX rows
      // on the way): the same bits as from the in-memory model.
      const k1 = createFastKernels({ threads: 2 })
      const k2 = createFastKernels({ threads: 2 })
      open.push(k1, k2)
      const fa = engineLogits(file, [1, 5, 6, 7], [8, 9], [0, shape.nLayers], k1)
      const fb = engineLogits(mem, [1, 5, 6, 7], [8, 9], [0, 1, shape.nLayers], k2)
      fa.forEach((l, i) => {
        expect(same(l, fb[i]), `${f.what} fast, position ${i}`).toBe(true)
      })
      ids.add(computeModelId(file))
      file.close()
    }
    // Same shape and seed as a plain Llama 2 file: a different id.
    const plain = join(dir, 'plain.gguf')
    writeRandomModel(plain, parseShape(FAMILIES[0].spec), { dtype: 'q8_0', seed: 9, seqLen: 64 })
    const p = openModelFile(plain)
    ids.add(computeModelId(p))
    p.close()
    expect(ids.size).toBe(FAMILIES.length + 1)
  })

  it('another architecture is refused with UNSUPPORTED_MODEL naming it and the supported ones', () => {
    const path = join(dir, 'gemma.gguf')
    writeGguf(path, {
      metadata: [
        ['general.architecture', { type: 'string', value: 'gemma' }],
        ['gemma.embedding_length', { type: 'u32', value: 8 }]
      ],
      tensors: [{ name: 'token_embd.weight', dtype: 'f32', shape: [8, 4], data: new Uint8Array(128) }]
    })
    let err: unknown
    try {
      openModelFile(path).close()
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(UnsupportedModelError)
    expect((err as UnsupportedModelError).code).toBe('UNSUPPORTED_MODEL')
    expect(String((err as Error).message)).toMatch(/"gemma".*llama, qwen2, qwen3/)
  })

  it('qwen3 KV (head size 32 ≠ dim/heads) moves between shards as sealed failover does: the same bits after', () => {
    const model = createRandomModel(parseShape('64,3,4,2,96,300'), { dtype: 'q8_0', seed: 8, seqLen: 64, arch: FAMILIES[3].arch })
    const kernels = createFastKernels({ threads: 2 })
    open.push(kernels)
    const edge = createEdge({ model, kernels })
    const mk = () => createShard({ model, start: 0, end: 3, kernels, kvDType: 'f16' })
    const a = mk()
    const b = mk()
    a.openSession('s', { maxLength: 32 })
    b.openSession('s', { maxLength: 32 })
    a.forward('s', edge.embed([1, 2, 3, 4, 5]), 0)
    expect(a.kvBytesPerPosition('s')).toBe(3 * 2 * model.config.kvDim * 2)
    expect(model.config.kvDim).toBe(2 * 32)
    b.importKv('s', 0, a.exportKv('s', 0, 5))
    for (const [pos, id] of [
      [5, 9],
      [6, 10],
      [7, 11]
    ]) {
      expect(same(a.forward('s', edge.embed([id]), pos), b.forward('s', edge.embed([id]), pos))).toBe(true)
    }
  })
})
