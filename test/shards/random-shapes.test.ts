import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { createRandomModel, parseShape, writeRandomModel } from '../../shards/formats/random-model.js'
import { createEdge, createShard, type ModelFile, openModelFile } from '../../shards/index.js'
import { createNaiveModel } from '../helpers/naive-forward.js'

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-shapes-'))

/** Logits of the engine for `tokens`, prefilled in one batch, then `extra` decoded one by one. */
function engineLogits(model: ModelFile, tokens: number[], extra: number[], split: number[]): Float32Array[] {
  const edge = createEdge({ model })
  const shards = split.slice(1).map((end, i) => createShard({ model, start: split[i], end }))
  for (const s of shards) s.openSession('x', { maxLength: 64 })
  const run = (ids: number[], pos: number) => shards.reduce((h, s) => s.forward('x', h, pos), edge.embed(ids))
  const V = model.config.vocabSize
  const out: Float32Array[] = []
  const prefill = edge.logits(run(tokens, 0), tokens.length)
  for (let t = 0; t < tokens.length; t++) out.push(prefill.slice(t * V, (t + 1) * V))
  extra.forEach((id, i) => {
    out.push(edge.logits(run([id], tokens.length + i), 1))
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

const CASES: Array<{ spec: string; what: string; split: number[] }> = [
  { spec: '64,3,4,4,96,300', what: 'multi-head attention without grouping', split: [0, 3] },
  { spec: '64,4,8,2,160,320,untied', what: 'GQA 4:1, untied classifier', split: [0, 1, 4] },
  { spec: '96,1,6,3,224,300,tied', what: 'one layer, tied head, head size 16', split: [0, 1] },
  { spec: '128,5,4,1,352,400', what: 'multi-query attention, 5 layers', split: [0, 2, 3, 5] }
]

describe('random-weight models of other shapes', () => {
  for (const { spec, what, split } of CASES) {
    for (const dtype of ['f32', 'f16', 'q8_0'] as const) {
      it(`${what} (${spec}, ${dtype}): engine equals an independent llama2.c-style forward`, () => {
        const model = createRandomModel(parseShape(spec), { dtype, seed: 5, seqLen: 64 })
        const tokens = [1, 17, 290, 44, 3, 101, 250]
        const extra = [9, 77, 200]
        const ours = engineLogits(model, tokens, extra, split)
        const naive = createNaiveModel(model)
        const theirs = [...tokens, ...extra].map((id, pos) => naive.step(id, pos))
        ours.forEach((l, i) => {
          expect(relErr(l, theirs[i]), `position ${i}`).toBeLessThan(1e-5)
        })
      })
    }
  }

  it('a GGUF written to disk runs exactly like the in-memory model, whole or split', () => {
    const shape = parseShape('64,4,8,2,160,320,untied')
    for (const dtype of ['f32', 'q8_0'] as const) {
      const path = join(dir, `m-${dtype}.gguf`)
      writeRandomModel(path, shape, { dtype, seed: 9, seqLen: 64 })
      const file = openModelFile(path)
      const mem = createRandomModel(shape, { dtype, seed: 9, seqLen: 64 })
      expect(file.config).toEqual(mem.config)
      const a = engineLogits(file, [1, 5, 6, 7], [8, 9], [0, 4])
      const b = engineLogits(mem, [1, 5, 6, 7], [8, 9], [0, 2, 4])
      a.forEach((l, i) => {
        expect(Buffer.from(l.buffer).equals(Buffer.from(b[i].buffer))).toBe(true)
      })
      file.close()
    }
  })
})
