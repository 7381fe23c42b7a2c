import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, describe, expect, it } from 'vitest'
import {
  createRandomModel,
  MODEL_SHAPES,
  type ModelShape,
  parseShape,
  randomModelConfig,
  writeRandomModel
} from '../../shards/formats/random-model.js'
import { createEdge, createShard, type ModelFile, openModelFile } from '../../shards/index.js'
import { createReferenceKernels } from '../../shards/kernels/kernels-ref.js'
import { dequantizeRow } from '../../shards/quant/codecs.js'
import { MODEL_FILE_TYPES, tensorTypeFor, useMoreBits } from '../../shards/quant/file-types.js'
import { BLOCK_TENSORS, type TensorName } from '../../shards/types.js'

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-filetypes-'))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

describe("llama.cpp's per-tensor type mixture", () => {
  it('use_more_bits over 32 layers: first 4, last 4, and every third from layer 6', () => {
    // n/8 = 4, 7n/8 = 28; (i − 4) % 3 == 2 → 6, 9, …, 27
    const expected = [0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31]
    expect([...Array(32).keys()].filter((i) => useMoreBits(i, 32))).toEqual(expected)
  })

  it('8b Q4_K_M: Q6_K head, attn_v and ffn_down where use_more_bits, Q4_K elsewhere', () => {
    const c = randomModelConfig(MODEL_SHAPES['8b'])
    const t = (name: TensorName, cols = 4096) => tensorTypeFor('q4_k_m', name, cols, c)
    expect(t('output')).toBe('q6_k')
    expect(t('token_embd')).toBe('q4_k')
    expect([t('blk.0.attn_v'), t('blk.4.attn_v'), t('blk.6.attn_v'), t('blk.31.attn_v')]).toEqual([
      'q6_k',
      'q4_k',
      'q6_k',
      'q6_k'
    ])
    expect([t('blk.5.ffn_down', 14336), t('blk.27.ffn_down', 14336)]).toEqual(['q4_k', 'q6_k'])
    expect([t('blk.0.attn_q'), t('blk.0.attn_k'), t('blk.0.attn_output'), t('blk.0.ffn_gate'), t('blk.0.ffn_up')]).toEqual(
      Array(5).fill('q4_k')
    )
    expect(tensorTypeFor('q5_k_m', 'blk.4.attn_v', 4096, c)).toBe('q5_k')
    expect(tensorTypeFor('q4_0', 'output', 4096, c)).toBe('q6_k') // llama.cpp gives every quantised file a Q6_K head
    expect(tensorTypeFor('q8_0', 'output', 4096, c)).toBe('q8_0')
    expect(tensorTypeFor('f16', 'output', 4096, c)).toBe('f16')
  })

  it("the 8b shape is Llama-3-8B's, with a Q4_K_M mixture of 32 layers", () => {
    const m = createRandomModel(MODEL_SHAPES['8b'], { dtype: 'q4_k_m', seed: 1 })
    const c = m.config
    expect([c.dim, c.nLayers, c.nHeads, c.nKvHeads, c.hiddenDim, c.vocabSize, c.ropeTheta]).toEqual([
      4096, 32, 32, 8, 14336, 128256, 500000
    ])
    expect(m.metadata.get('llama.rope.freq_base')).toBe(500000)
    expect(m.metadata.get('general.file_type')).toBe(15) // LLAMA_FTYPE_MOSTLY_Q4_K_M
    expect(m.weightDType).toBe('q4_k')
    m.close()
  })

  it('rows that are not whole 256-blocks fall back: Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0, else F16', () => {
    const c = randomModelConfig(parseShape('64,8,4,4,96,300,tied'))
    expect(tensorTypeFor('q4_k_m', 'blk.1.attn_q', 64, c)).toBe('q5_0')
    expect(tensorTypeFor('q5_k_m', 'blk.1.attn_q', 64, c)).toBe('q5_1')
    expect(tensorTypeFor('q4_k_m', 'blk.0.attn_v', 64, c)).toBe('q8_0') // Q6_K by use_more_bits, then fallback
    expect(tensorTypeFor('q4_k_m', 'token_embd', 64, c)).toBe('q8_0') // tied: it is the head
    expect(tensorTypeFor('q4_k_m', 'blk.1.ffn_down', 48, c)).toBe('f16')
  })
})

/** Greedy tokens of the whole model on the reference kernels. */
function greedy(model: ModelFile, prompt: number[], n: number): { tokens: number[]; margins: number[] } {
  const kernels = createReferenceKernels()
  const edge = createEdge({ model, kernels })
  const shard = createShard({ model, start: 0, end: model.config.nLayers, kernels })
  shard.openSession('s', { maxLength: 64 })
  const V = model.config.vocabSize
  const tokens: number[] = []
  const margins: number[] = []
  let ids = prompt
  let pos = 0
  for (let i = 0; i < n; i++) {
    const logits = edge.logits(shard.forward('s', edge.embed(ids), pos), ids.length).subarray((ids.length - 1) * V)
    pos += ids.length
    let best = 0
    for (let v = 1; v < V; v++) if (logits[v] > logits[best]) best = v
    let second = Number.NEGATIVE_INFINITY
    for (let v = 0; v < V; v++) if (v !== best) second = Math.max(second, logits[v])
    tokens.push(best)
    margins.push(logits[best] - second)
    ids = [best]
  }
  return { tokens, margins }
}

describe('make-model file types', () => {
  const shape = parseShape('256,4,4,2,512,600,untied')
  for (const dtype of MODEL_FILE_TYPES) {
    it(`${dtype}: the file holds the mixture, reads back as in memory, and decodes near f32`, () => {
      const path = join(dir, `m-${dtype}.gguf`)
      writeRandomModel(path, shape, { dtype, seed: 5 })
      const file = openModelFile(path)
      const mem = createRandomModel(shape, { dtype, seed: 5 })
      const f32 = createRandomModel(shape, { dtype: 'f32', seed: 5 })
      try {
        const c = file.config
        const names: TensorName[] = ['token_embd', 'output']
        for (let l = 0; l < c.nLayers; l++) for (const t of BLOCK_TENSORS) if (!t.endsWith('norm')) names.push(`blk.${l}.${t}`)
        for (const name of names) {
          const w = file.readMatrix(name)
          expect(w.dtype, name).toBe(tensorTypeFor(dtype, name, w.cols, c))
          expect(Buffer.from(w.data).equals(Buffer.from(mem.readMatrix(name).data)), name).toBe(true)
        }
        // The quantised head against its f32 original: one row, relative RMS error under 10 %.
        const w = file.readMatrix('output')
        const ref = f32.readMatrix('output')
        const a = new Float32Array(w.cols)
        const b = new Float32Array(w.cols)
        dequantizeRow(w, 3, a)
        dequantizeRow(ref, 3, b)
        const err = Math.hypot(...a.map((v, i) => v - b[i])) / Math.hypot(...b)
        expect(err).toBeLessThan(0.1)
        // Whole-file decode on the reference kernels runs and gives finite tokens.
        const { tokens } = greedy(file, [1, 300, 301], 3)
        expect(tokens.every((t) => t >= 0 && t < c.vocabSize)).toBe(true)
      } finally {
        file.close()
        mem.close()
        f32.close()
      }
    })
  }

  it('a scaled LM head gives clear greedy margins', () => {
    const base: ModelShape = { ...parseShape('256,2,4,2,512,4000,untied') }
    const peaked: ModelShape = { ...base, outputScale: MODEL_SHAPES['8b'].outputScale }
    const flat = greedy(createRandomModel(base, { dtype: 'f32', seed: 2 }), [1, 400, 401], 6).margins
    const sharp = greedy(createRandomModel(peaked, { dtype: 'f32', seed: 2 }), [1, 400, 401], 6).margins
    const median = (m: number[]) => [...m].sort((x, y) => x - y)[Math.floor(m.length / 2)]
    // Logits scale with the head, so margins do too (×14); a logit of margin is clear for
    // implementations that differ by rounding (their logits agree to ~1e-2 on this shape).
    expect(median(sharp)).toBeGreaterThan(10 * median(flat))
    expect(median(sharp)).toBeGreaterThan(0.5)
  })
})
