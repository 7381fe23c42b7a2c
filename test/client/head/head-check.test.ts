import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHeadTamper, type HeadTamperMode } from '../../../canary/index.js'
import { headAsk, lowDimensionalHead, RemoteHead } from '../../../client/head/index.js'
import { HeadChannel } from '../../../client/session/head-channel.js'
import { decodeTensor, encodeTensor } from '../../../protocol/index.js'
import {
  createEdge,
  decodeHeadRows,
  type Edge,
  encodeHeadRows,
  type HeadRows,
  headTopK,
  type Kernels,
  type ModelFile,
  openModelFile,
  parseShape,
  selectKernelsFor,
  writeRandomModel,
  Xorshift64
} from '../../../shards/index.js'

// Issue #35: the client's low-dimensional head checks the head peer. The "peer" here is the
// engine's own head on the fast kernels (q8 activation quantisation, as a node runs it), its
// reply encoded as on the wire (f16 gaps) and its hidden output sent in q8_0; the client
// evaluates its secret and context rows with the reference dot. An honest head shows no
// violation over 10,000 steps; a head that swaps the top token, perturbs logits or drops the
// top token is convicted (HEAD_CONVICT_VIOLATIONS violations) within the documented steps.

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-head-check-'))
const PATH = join(dir, 'head.gguf')
const VOCAB = 8192
const SECRET = 512 // 1/16 of the vocabulary: a swap is seen with p ≈ 1 − (15/16)² ≈ 12 % per step

let model: ModelFile
let edge: Edge
let kernels: Kernels
let rows: HeadRows

function hiddenOf(rng: Xorshift64, dim: number): Float32Array {
  // roughly a final residual stream: Gaussian-ish with a few large outlier dimensions
  const h = new Float32Array(dim)
  for (let j = 0; j < dim; j++) h[j] = (rng.nextF32() + rng.nextF32() + rng.nextF32() - 1.5) * 2
  for (let j = 0; j < dim; j += 61) h[j] *= 8
  return h
}

/** One step of a (possibly tampering) head peer and the client's check of it. */
function step(head: RemoteHead, rng: Xorshift64, peer: string, tamper?: ReturnType<typeof createHeadTamper>): void {
  const dim = model.config.dim
  const h = hiddenOf(rng, dim)
  const logits = edge.lastLogits(h, 1)
  const ask = headAsk({ temperature: 0 }, VOCAB, false)
  let row = headTopK(logits, ask)
  if (tamper) row = tamper(row)
  const [wired] = decodeHeadRows(encodeHeadRows([row], false), 1, VOCAB, false)
  const hidden = decodeTensor(encodeTensor(h, [1, dim], 'q8_0'), { shape: [1, dim] })
  head.check(peer, wired, hidden)
}

describe('the head check (secret and context rows)', () => {
  beforeAll(() => {
    // the 8b shape's output scale: logits spread as a trained model's do
    writeRandomModel(PATH, { ...parseShape(`256,1,4,4,512,${VOCAB}`), outputScale: 14 }, { dtype: 'q8_0', seed: 5 })
    model = openModelFile(PATH)
    kernels = selectKernelsFor(model.config, { kind: 'auto' })
    edge = createEdge({ model, kernels })
    rows = lowDimensionalHead(model, SECRET)
    rows.add(Array.from({ length: 64 }, (_, i) => i * 97)) // context rows
  })

  afterAll(() => {
    kernels.close?.()
    model.close()
  })

  it('an honest head peer shows no violation over 10,000 steps', { timeout: 300_000 }, () => {
    const head = new RemoteHead({ config: model.config, rows, channel: new HeadChannel() })
    const rng = new Xorshift64(1)
    for (let i = 0; i < 10_000; i++) step(head, rng, 'honest')
    expect(head.stats.violations).toBe(0)
    expect(head.stats.convicted).toEqual([])
    expect(head.stats.checks).toBeGreaterThan(10_000 * SECRET * 0.9)
  })

  const modes: [HeadTamperMode, number][] = [
    ['swap', 120],
    ['perturb', 100],
    ['drop', 250]
  ]
  for (const [mode, bound] of modes) {
    it(`a head that does "${mode}" is convicted within ${bound} steps (20 runs)`, { timeout: 120_000 }, () => {
      const steps: number[] = []
      for (let run = 0; run < 20; run++) {
        const fresh = lowDimensionalHead(model, SECRET) // a new secret sample per run
        const head = new RemoteHead({ config: model.config, rows: fresh, channel: new HeadChannel() })
        const rng = new Xorshift64(100 + run)
        const tamper = createHeadTamper({ mode, seed: run + 1 })
        let n = 0
        while (!head.isConvicted('tamperer') && n < 1000) {
          step(head, rng, 'tamperer', tamper)
          n++
        }
        steps.push(n)
      }
      // HEAD_CHECK_REPORT=1 prints the steps each run took (docs/verification.md quotes them)
      if (process.env.HEAD_CHECK_REPORT) console.log(JSON.stringify({ mode, steps }))
      expect(Math.max(...steps), `steps to conviction: ${steps.join(', ')}`).toBeLessThanOrEqual(bound)
    })
  }
})
