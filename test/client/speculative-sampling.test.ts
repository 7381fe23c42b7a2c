import { describe, expect, it } from 'vitest'
import {
  createNgramDrafter,
  createSelfDrafter,
  type Drafter,
  emptySpeculationStats,
  speculativeTokens
} from '../../client/index.js'
import {
  createEdge,
  createLocalPipeline,
  createShard,
  createTokenizer,
  type GenerateInit,
  generateTokens,
  openModelFile
} from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

/**
 * Speculative sampling must keep the target distribution (issue 18). Many seeds of plain sampling
 * and of speculative sampling give two samples of the second and third generated tokens (the
 * first comes from the prefill, the ones after from verified drafts); a two-sample chi-square
 * test at p = 0.001 must not tell them apart. A rule that keeps every draft must be told apart,
 * so the test can fail.
 */

const RUNS = 800
const SAMPLING = { temperature: 1, topK: 6 } as const

const model = openModelFile(GGUF_PATH)
const edge = createEdge({ model })
const shard = createShard({ model, start: 0, end: 5 })
const first = createShard({ model, start: 0, end: 1 })
const last = createShard({ model, start: 4, end: 5 })
const tokenizer = createTokenizer(model.vocabulary!)
// a prompt that repeats itself, so the n-gram drafter has something to propose
const prompt = tokenizer.encode('Lily saw a big dog. Lily saw a big cat. Lily saw a big')

/** Seeds spread over 31 bits (llama2.c's xorshift gives close first draws for close seeds). */
const seedOf = (i: number): number => (Math.imul(i + 1, 2654435761) >>> 1) + 1

type Decode = (init: GenerateInit) => AsyncGenerator<number>

async function pairs(decode: Decode, tag: string): Promise<Map<string, number>> {
  const counts = new Map<string, number>()
  for (let i = 0; i < RUNS; i++) {
    const pipeline = createLocalPipeline([shard], `${tag}-${i}`, prompt.length + 3)
    const out: number[] = []
    for await (const t of decode({ ...SAMPLING, seed: seedOf(i), edge, pipeline, promptTokens: prompt, maxTokens: 3 }))
      out.push(t)
    await pipeline.close()
    const key = out.slice(1, 3).join(',')
    counts.set(key, (counts.get(key) ?? 0) + 1)
  }
  return counts
}

/** Two-sample chi-square over categories, pooling those with fewer than 10 in both into one. */
function chiSquare(a: Map<string, number>, b: Map<string, number>): { stat: number; df: number } {
  let stat = 0
  let df = -1
  let poolA = 0
  let poolB = 0
  for (const key of new Set([...a.keys(), ...b.keys()])) {
    const x = a.get(key) ?? 0
    const y = b.get(key) ?? 0
    if (x + y < 20) {
      poolA += x
      poolB += y
      continue
    }
    stat += (x - y) ** 2 / (x + y)
    df++
  }
  if (poolA + poolB > 0) {
    stat += (poolA - poolB) ** 2 / (poolA + poolB)
    df++
  }
  return { stat, df }
}

/** Chi-square critical value at p = 0.001 (Wilson–Hilferty approximation). */
function critical(df: number): number {
  const z = 3.0902
  const h = 2 / (9 * df)
  return df * (1 - h + z * Math.sqrt(h)) ** 3
}

function withDrafter(make: (init: GenerateInit) => Drafter, keepAll = false): Decode {
  return async function* (init) {
    const drafter = make(init)
    const stats = emptySpeculationStats()
    try {
      if (!keepAll) {
        yield* speculativeTokens({ ...init, drafter, stats })
        return
      }
      // the broken rule: greedy-style "accept while equal" is not it; keep every draft verbatim
      let n = 0
      for await (const t of speculativeTokens({ ...init, drafter, stats })) {
        if (n++ === 0) yield t
        else break
      }
      const d = await drafter.draft([...init.promptTokens], 2)
      yield* d.tokens
    } finally {
      await drafter.close()
    }
  }
}

describe('speculative sampling keeps the target distribution', () => {
  it('n-gram drafts and self drafts against plain sampling, over many seeds', async () => {
    const plain = await pairs(generateTokens, 'plain')
    const ngram = await pairs(
      withDrafter(() => createNgramDrafter()),
      'ngram'
    )
    // the self drafter draws its tokens with its own generator, seeded from the run's seed
    const self = await pairs(
      withDrafter((init) => createSelfDrafter(edge, first, last, prompt.length + 3, init)),
      'self'
    )
    for (const spec of [ngram, self]) {
      const { stat, df } = chiSquare(plain, spec)
      expect(df).toBeGreaterThan(2)
      expect(stat).toBeLessThan(critical(df))
    }
    // the control: outputs that take the n-gram drafts verbatim are told apart
    const broken = await pairs(
      withDrafter(() => createNgramDrafter(), true),
      'broken'
    )
    const { stat, df } = chiSquare(plain, broken)
    expect(stat).toBeGreaterThan(critical(Math.max(df, 1)))
  }, 600_000)
})
