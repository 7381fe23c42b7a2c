import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import {
  acceptOrResample,
  createNgramDrafter,
  createSelfDrafter,
  type Drafter,
  DraftLength,
  DraftModel,
  DraftModelMismatchError,
  emptySpeculationStats,
  InvalidSpeculationError,
  ngramDraft,
  parseSpeculate,
  speculativeTokens
} from '../../client/index.js'
import {
  type BlockPipeline,
  createEdge,
  createLocalPipeline,
  createShard,
  createTokenizer,
  generateTokens,
  openModelFile,
  parseShape,
  writeRandomModel,
  Xorshift64
} from '../../shards/index.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')

describe('n-gram drafter (prompt lookup)', () => {
  it('proposes what followed the most recent earlier match of the longest suffix', () => {
    // suffix [7, 8] occurred at 1..2 followed by 9, 10, 11
    expect(ngramDraft([5, 7, 8, 9, 10, 11, 3, 7, 8], 3)).toEqual([9, 10, 11])
    // the most recent match wins
    expect(ngramDraft([1, 2, 3, 1, 2, 4, 1, 2], 1)).toEqual([4])
    // falls back to shorter suffixes; a continuation that reaches the end is looked up again with
    // the drafts as context (a loop repeats)
    expect(ngramDraft([4, 9, 6, 9], 5)).toEqual([6, 9, 6, 9, 6])
    expect(ngramDraft([3, 1, 1], 4)).toEqual([1, 1, 1, 1])
    expect(ngramDraft([1, 2, 3], 4)).toEqual([])
    expect(ngramDraft([1, 1], 0)).toEqual([])
  })

  it('rejects bad options with a typed error', async () => {
    expect(() => ngramDraft([1, 2], -1)).toThrow(InvalidSpeculationError)
    expect(() => createNgramDrafter({ minNgram: 3, maxNgram: 2 })).toThrow(InvalidSpeculationError)
    expect((await createNgramDrafter().draft([1, 2, 1], 2)).tokens).toEqual([2, 1])
  })

  it('parses --speculate values', () => {
    expect(parseSpeculate('ngram')).toBe('ngram')
    expect(parseSpeculate('draft:models/x.gguf')).toBe('draft:models/x.gguf')
    expect(() => parseSpeculate('draft:')).toThrow(InvalidSpeculationError)
    expect(() => parseSpeculate('fast')).toThrow(InvalidSpeculationError)
  })
})

describe('acceptance rule', () => {
  /** P(out = x) of acceptOrResample, summed exactly over the draft and the accept/resample branches. */
  function outputDistribution(p: Float64Array, q: Float64Array): Float64Array {
    const out = new Float64Array(p.length)
    let residualMass = 0
    for (let i = 0; i < p.length; i++) residualMass += Math.max(0, p[i] - q[i])
    for (let d = 0; d < p.length; d++) {
      if (q[d] === 0) continue
      const accept = Math.min(1, p[d] / q[d])
      out[d] += q[d] * accept
      for (let x = 0; x < p.length; x++)
        if (residualMass > 0) out[x] += q[d] * (1 - accept) * (Math.max(0, p[x] - q[x]) / residualMass)
    }
    return out
  }

  it('keeps the target distribution exactly (analytic, random p and q)', () => {
    const rng = new Xorshift64(7)
    for (let trial = 0; trial < 50; trial++) {
      const n = 2 + (trial % 7)
      const p = Float64Array.from({ length: n }, () => rng.nextF32() ** 3)
      const q = Float64Array.from({ length: n }, (_, i) => (i === trial % n ? 0 : rng.nextF32()))
      const sp = p.reduce((a, b) => a + b, 0)
      const sq = q.reduce((a, b) => a + b, 0)
      for (let i = 0; i < n; i++) {
        p[i] /= sp
        q[i] /= sq
      }
      const got = outputDistribution(p, q)
      for (let i = 0; i < n; i++) expect(got[i]).toBeCloseTo(p[i], 12)
    }
  })

  it('a deterministic draft is kept with probability p(x), else never returned', () => {
    const p = Float64Array.from([0.5, 0.3, 0.2])
    const rng = new Xorshift64(11)
    const counts = [0, 0, 0]
    let kept = 0
    const n = 20_000
    for (let i = 0; i < n; i++) {
      const r = acceptOrResample(p, 1, undefined, rng)
      counts[r.token]++
      if (r.accepted) {
        kept++
        expect(r.token).toBe(1)
      } else expect(r.token).not.toBe(1)
    }
    // 4 standard deviations of a binomial at these sizes
    for (let i = 0; i < 3; i++) expect(Math.abs(counts[i] / n - p[i])).toBeLessThan(4 * Math.sqrt((p[i] * (1 - p[i])) / n))
    expect(kept).toBe(counts[1])
    expect(() => acceptOrResample(p, 3, undefined, rng)).toThrow(InvalidSpeculationError)
  })
})

describe('draft length', () => {
  it('drafts more when steps cost a round trip and drafts are kept, less when rows cost as much', () => {
    const wan = new DraftLength({ maxDraft: 8 })
    for (let i = 0; i < 30; i++) {
      wan.observeStep(1 + (i % 4), 50 + 0.5 * (1 + (i % 4)))
      wan.observeDraft(3, 3)
    }
    const loop = new DraftLength({ maxDraft: 8 })
    for (let i = 0; i < 30; i++) {
      loop.observeStep(1 + (i % 4), 0.5 + 2 * (1 + (i % 4)))
      loop.observeDraft(3, 1)
    }
    expect(wan.next(100)).toBeGreaterThan(loop.next(100))
    expect(wan.next(2)).toBe(2)
    expect(loop.next(100)).toBeGreaterThanOrEqual(1)
    expect(() => new DraftLength({ maxDraft: -1 })).toThrow(InvalidSpeculationError)
  })

  it('drafts long when drafts are kept all or nothing (prompt lookup), though half of the drafted tokens fail', () => {
    // half the steps keep all 8 drafts, half keep none: 0.5 per drafted token, as independent
    // acceptances at 0.5 would give, but S(i) = 0.5 at every position, so long drafts pay
    const bursty = new DraftLength({ maxDraft: 8 })
    for (let i = 0; i < 40; i++) {
      bursty.observeStep(1 + (i % 9), 50 + 1.5 * (1 + (i % 9)))
      bursty.observeDraft(8, i % 2 === 0 ? 8 : 0)
    }
    expect(bursty.acceptance).toBeLessThan(0.6) // per drafted token (decayed, so the last steps weigh most)
    expect(bursty.survival(8)).toBeGreaterThan(0.35) // independent acceptances at 0.5 would give 0.5^8
    expect(bursty.next(100)).toBe(8)
    expect(() => bursty.survival(9)).toThrow(InvalidSpeculationError)
  })
})

describe('speculative greedy decoding on a local pipeline', () => {
  const model = openModelFile(GGUF_PATH)
  const edge = createEdge({ model })
  const shard = createShard({ model, start: 0, end: 5 })
  const first = createShard({ model, start: 0, end: 1 })
  const last = createShard({ model, start: 4, end: 5 })
  const tokenizer = createTokenizer(model.vocabulary!)
  const prompt = tokenizer.encode(ref.prompt)

  async function run(drafter: Drafter | undefined, id: string, maxTokens = 64) {
    const pipeline: BlockPipeline = createLocalPipeline([shard], id, prompt.length + maxTokens)
    const stats = emptySpeculationStats()
    const init = { edge, pipeline, promptTokens: prompt, maxTokens, temperature: 0, stopIds: tokenizer.stopIds }
    const tokens: number[] = []
    for await (const t of drafter ? speculativeTokens({ ...init, drafter, stats }) : generateTokens(init)) tokens.push(t)
    await pipeline.close()
    return { tokens, stats }
  }

  it('ngram and self drafts give exactly the tokens of plain decoding, in fewer steps', async () => {
    const plain = await run(undefined, 'plain')
    expect(plain.tokens).toEqual(ref.generated_tokens)
    const ngram = await run(createNgramDrafter(), 'ngram')
    expect(ngram.tokens).toEqual(plain.tokens)
    expect(ngram.stats.accepted).toBeGreaterThan(0)
    expect(ngram.stats.steps).toBeLessThan(plain.tokens.length - 1)
    const selfDrafter = createSelfDrafter(edge, first, last, prompt.length + 64, { temperature: 0 })
    const self = await run(selfDrafter, 'self')
    await selfDrafter.close()
    expect(self.tokens).toEqual(plain.tokens)
    expect(self.stats.drafted).toBeGreaterThan(0)
    expect(self.stats.tokens).toBe(plain.tokens.length)
  })

  it('a drafter that is always wrong still gives the same tokens (every position rewound)', async () => {
    const wrong: Drafter = {
      name: 'wrong',
      async draft(context, k) {
        return { tokens: Array.from({ length: k }, (_, i) => (context.length + i) % 7) }
      },
      async close() {}
    }
    const plain = await run(undefined, 'plain2', 40)
    const spec = await run(wrong, 'wrong', 40)
    expect(spec.tokens).toEqual(plain.tokens)
  })

  it('a draft model with the same tokenizer drafts (the model itself: every draft kept); another vocabulary is refused', async () => {
    const draftModel = new DraftModel(GGUF_PATH, model)
    const drafter = draftModel.drafter(prompt.length + 40, { temperature: 0 })
    const spec = await run(drafter, 'draft-model', 40)
    await drafter.close()
    draftModel.close()
    expect(spec.tokens).toEqual(ref.generated_tokens.slice(0, 40))
    expect(spec.stats.accepted).toBe(spec.stats.drafted)
    expect(spec.stats.steps).toBeLessThan(20)
    const dir = mkdtempSync(join(tmpdir(), 'layerswarm-draft-'))
    try {
      const other = join(dir, 'other.gguf')
      writeRandomModel(other, parseShape('32,2,2,2,64,300'), { dtype: 'f32', seed: 1 })
      expect(() => new DraftModel(other, model)).toThrow(DraftModelMismatchError)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
