import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createHeadTamper, type HeadTamperMode } from '../../../canary/index.js'
import { headAsk, lowDimensionalHead, RemoteHead } from '../../../client/head/index.js'
import { HeadChannel } from '../../../client/session/head-channel.js'
import { pickHeadChunks } from '../../../client/weights/head-chunks.js'
import { decodeTensor, encodeTensor } from '../../../protocol/index.js'
import {
  createEdge,
  decodeHeadRows,
  dequantizeRow,
  type Edge,
  encodeHeadRows,
  type HeadRows,
  headTopK,
  type Kernels,
  type ModelFile,
  openModelFile,
  parseShape,
  selectKernelsFor,
  type WeightsManifest,
  writeRandomModel,
  Xorshift64
} from '../../../shards/index.js'

// Issue #35, session 4: how much a thin client (`--model-id … --head remote`) checks, against the
// client with the file that test/client/head/head-check.test.ts measures. The thin client holds
// whole 1 MiB chunks of the head (client/weights/head-chunks.ts): its secret rows are drawn from
// them and its context rows are only those inside them. Here the chunk geometry is scaled to the
// test head (128 rows a chunk, 64 chunks; pickHeadChunks itself chooses them) and the text is
// modelled as real text is where the check matters: at half the steps the top token is a token
// of the context (the hidden state leans towards its row). Both clients see the same steps.
// HEAD_CHECK_REPORT=1 prints the steps to conviction per run (docs/performance.md quotes them).

const dir = mkdtempSync(join(tmpdir(), 'layerswarm-head-thin-'))
const PATH = join(dir, 'head.gguf')
const VOCAB = 8192
const DIM = 256
const SECRET = 512
const CONTEXT = 64
const ROWS_PER_CHUNK = 128
const RUNS = 20

let model: ModelFile
let edge: Edge
let kernels: Kernels
let weights: Float32Array
let gain: Float32Array

/** A manifest's geometry alone (pickHeadChunks reads the head piece's size and the chunk bytes). */
function thinReadable(): (id: number) => boolean {
  const rowBytes = (DIM / 32) * 34 // q8_0
  const m = { chunkBytes: ROWS_PER_CHUNK * rowBytes, pieces: [{ name: 'output.weight', sizeBytes: VOCAB * rowBytes }] }
  return pickHeadChunks(m as unknown as WeightsManifest, [0], 0, VOCAB, SECRET).readable
}

function hiddenOf(rng: Xorshift64, context: readonly number[]): Float32Array {
  const h = new Float32Array(DIM)
  for (let j = 0; j < DIM; j++) h[j] = (rng.nextF32() + rng.nextF32() + rng.nextF32() - 1.5) * 2
  for (let j = 0; j < DIM; j += 61) h[j] *= 8
  if (rng.nextF32() < 0.5) {
    // real text: the next token is often one of the context's (a name, a repeated word)
    const c = context[Math.floor(rng.nextF32() * context.length)]
    const w = weights.subarray(c * DIM, (c + 1) * DIM)
    for (let j = 0; j < DIM; j++) h[j] = 0.3 * h[j] + (6 * w[j]) / gain[j]
  }
  return h
}

interface Client {
  head: RemoteHead
  contextHeld: number
}

function clientOf(rows: HeadRows, context: readonly number[]): Client {
  rows.add(context)
  const contextHeld = new Set(context.filter((id) => rows.has(id))).size
  return { head: new RemoteHead({ config: model.config, rows, channel: new HeadChannel() }), contextHeld }
}

describe('the head check of a thin client (rows inside its head chunks only)', () => {
  beforeAll(() => {
    writeRandomModel(PATH, { ...parseShape(`${DIM},1,4,4,512,${VOCAB}`), outputScale: 14 }, { dtype: 'q8_0', seed: 5 })
    model = openModelFile(PATH)
    kernels = selectKernelsFor(model.config, { kind: 'auto' })
    edge = createEdge({ model, kernels })
    const out = model.readMatrix('output')
    weights = new Float32Array(VOCAB * DIM)
    for (let id = 0; id < VOCAB; id++) dequantizeRow(out, id, weights.subarray(id * DIM, (id + 1) * DIM))
    gain = model.readVector('output_norm').map((g) => (Math.abs(g) < 0.05 ? Math.sign(g || 1) * 0.05 : g))
  })

  afterAll(() => {
    kernels.close?.()
    model.close()
  })

  const modes: [HeadTamperMode, number][] = [
    ['swap', 200],
    ['perturb', 100],
    ['drop', 300]
  ]
  for (const [mode, bound] of modes) {
    it(`"${mode}": steps to conviction, file client vs thin client (${RUNS} runs each)`, { timeout: 300_000 }, () => {
      const steps = { full: [] as number[], thin: [] as number[] }
      const context = { full: [] as number[], thin: [] as number[] }
      let topInContext = 0
      let total = 0
      for (let run = 0; run < RUNS; run++) {
        const crng = new Xorshift64(500 + run)
        const ctx = Array.from({ length: CONTEXT }, () => Math.floor(crng.nextF32() * VOCAB))
        const clients = {
          full: clientOf(lowDimensionalHead(model, SECRET), ctx),
          thin: clientOf(lowDimensionalHead(model, SECRET, thinReadable()), ctx)
        }
        for (const kind of ['full', 'thin'] as const) {
          const { head, contextHeld } = clients[kind]
          context[kind].push(contextHeld)
          const rng = new Xorshift64(100 + run)
          const tamper = createHeadTamper({ mode, seed: run + 1 })
          let n = 0
          while (!head.isConvicted('tamperer') && n < 2000) {
            const h = hiddenOf(rng, ctx)
            const logits = edge.lastLogits(h, 1)
            let row = headTopK(logits, headAsk({ temperature: 0 }, VOCAB, false))
            if (kind === 'full') {
              total++
              if (ctx.includes(row.ids[0])) topInContext++
            }
            row = tamper(row)
            const [wired] = decodeHeadRows(encodeHeadRows([row], false), 1, VOCAB, false)
            head.check('tamperer', wired, decodeTensor(encodeTensor(h, [1, DIM], 'q8_0'), { shape: [1, DIM] }))
            n++
          }
          steps[kind].push(n)
        }
      }
      const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length
      const report = {
        mode,
        topInContext: topInContext / total,
        contextRowsHeld: { full: mean(context.full), thin: mean(context.thin) },
        steps,
        mean: { full: mean(steps.full), thin: mean(steps.thin) }
      }
      if (process.env.HEAD_CHECK_REPORT) console.log(JSON.stringify(report))
      // the thin client holds only the context rows inside its chunks (about SECRET/VOCAB of them)
      expect(report.contextRowsHeld.full).toBeGreaterThan(CONTEXT * 0.9)
      expect(report.contextRowsHeld.thin).toBeLessThan(report.contextRowsHeld.full)
      expect(report.contextRowsHeld.thin).toBeLessThan(CONTEXT * 0.25)
      expect(Math.max(...steps.thin), `thin: ${steps.thin.join(', ')}`).toBeLessThanOrEqual(bound)
      // what the context rows are worth on such text: the file client convicts sooner
      expect(report.mean.full).toBeLessThan(report.mean.thin)
    })
  }
})
