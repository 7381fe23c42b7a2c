import { describe, expect, it } from 'vitest'
import { auroc, DEFAULT_CANARY_PROMPTS, HELD_OUT_PROMPTS, inputFor } from '../../canary/index.js'
import type { HopSession, HopTarget } from '../../client/session/hop.js'
import { createNgramDrafter } from '../../client/speculation/draft-ngram.js'
import { type SpeculativeStepOptions, speculativeTokens } from '../../client/speculation/speculative-decode.js'
import { DecoyPool } from '../../client/verification/canary-decoy-pool.js'
import { DecoyDraftRows, type PlannedDecoyStep } from '../../client/verification/canary-decoy-speculative.js'
import { CanaryMaterial, decoyDone } from '../../client/verification/canary-decoys.js'
import {
  createEdge,
  createReferenceKernels,
  createShard,
  createTokenizer,
  openModelFile,
  type Shard
} from '../../shards/index.js'
import { trainLogistic } from '../helpers/logistic.js'

/*
 * Issue 18: with speculation on, real steps carry K+1 rows and rewind the rejected drafts at the
 * next step. A peer sees each step's position and rows; decoys (canary sessions) must look the
 * same: rows per step, how often and how far the next step rewinds. Real sessions here are
 * generations with the prompt-lookup drafter at temperature 1 (the default), through local shards
 * of stories260K; decoys are what the client's decoy pool plans after observing those sessions.
 * No network: this is the shape a peer would see, planned exactly as the client plans it.
 */
const model = openModelFile('models/stories260K.gguf')
const kernels = createReferenceKernels()
const tokenizer = createTokenizer(model.vocabulary!)
const edge = createEdge({ model, kernels })
const n = model.config.nLayers
const first = createShard({ model, start: 0, end: 1, kernels })
const rest = createShard({ model, start: 1, end: n, kernels })
const target = { peerId: 'peer', start: 1, end: n, addrs: [] } as unknown as HopTarget
/** Sessions of each kind (the machine may be loaded: kept small). */
const SESSIONS = 80
const fakeHop = { close: async () => {} } as unknown as HopSession

interface Step {
  readonly startPosition: number
  readonly rows: number
  readonly draftLength?: number
}

/** A real speculative generation's steps, as every hop sees them. */
async function realSession(prompt: string, maxTokens: number, seed: number): Promise<Step[]> {
  const steps: Step[] = []
  const sid = `real-${seed}`
  const promptTokens = tokenizer.encode(prompt)
  const maxLength = promptTokens.length + maxTokens
  for (const s of [first, rest]) s.openSession(sid, { maxLength })
  const pipeline = {
    async forward(hidden: Float32Array, startPos: number, o: SpeculativeStepOptions = {}) {
      steps.push({ startPosition: startPos, rows: hidden.length / model.config.dim, draftLength: o.draftLength })
      return rest.forward(sid, first.forward(sid, hidden, startPos), startPos)
    },
    async close() {}
  }
  for await (const _ of speculativeTokens({
    edge,
    pipeline,
    promptTokens,
    maxTokens,
    temperature: 1,
    seed,
    drafter: createNgramDrafter()
  })) {
    // tokens are not what a peer sees; the steps are
  }
  for (const s of [first, rest]) s.closeSession(sid)
  return steps
}

/** What a peer sees of a session's decode steps: rows, and the rewinds that follow rejections. */
function shapeFeatures(steps: readonly Step[]): number[] {
  const decode = steps.slice(1)
  if (decode.length === 0) return [0, 0, 0, 0, 0]
  const rows = decode.map((s) => s.rows)
  let rewinds = 0
  let depth = 0
  for (let i = 0; i + 1 < decode.length; i++) {
    const back = decode[i].startPosition + decode[i].rows - decode[i + 1].startPosition
    if (back > 0) {
      rewinds++
      depth += back
    }
  }
  const last = decode[decode.length - 1]
  const positions = last.startPosition - steps[0].rows + 1
  return [
    rows.reduce((a, b) => a + b, 0) / rows.length,
    rows.filter((r) => r > 1).length / rows.length,
    rewinds / Math.max(1, decode.length - 1),
    depth / Math.max(1, rewinds),
    positions / decode.length
  ]
}

function heldOutAuroc(realF: number[][], decoyF: number[][]): number {
  const half = Math.floor(realF.length / 2)
  const clf = trainLogistic(
    [...realF.slice(0, half), ...decoyF.slice(0, half)],
    [...realF.slice(0, half).map(() => 1), ...decoyF.slice(0, half).map(() => 0)]
  )
  return auroc(
    realF.slice(half).map((f) => clf.predict(f)),
    decoyF.slice(half).map((f) => clf.predict(f))
  )
}

describe('speculative decoy shapes (issue 18)', () => {
  const material = new CanaryMaterial(model, { kernels, prompts: DEFAULT_CANARY_PROMPTS.slice(0, 8), maxLength: 256, seed: 7 })
  const rows = new DecoyDraftRows(model, { kernels, edge, first })
  const pool = new DecoyPool(material, rows)
  const realShapes: Step[][] = []
  const decoyShapes: Step[][] = []
  const checked: Array<{ step: PlannedDecoyStep; canary: number; input: Float32Array; tokens: readonly number[] }> = []

  it('decoys of speculative sessions draft, keep and rewind like the real steps they copy', async () => {
    const set = material.setFor(1)
    for (let i = 0; i < SESSIONS; i++) {
      const prompt = HELD_OUT_PROMPTS[i % HELD_OUT_PROMPTS.length]
      const real = await realSession(prompt, 16 + ((i * 7) % 33), 1000 + i)
      realShapes.push(real)
      const sessionId = `s${i}`
      for (const s of real)
        material.observeStep(
          { forwarding: 'relay', maxLength: 256, sessionId, startPosition: s.startPosition, rows: s.rows },
          'f32'
        )
      material.endSession(sessionId)
      // the decoy's steps each take the draft length of a real step (the one its probe follows)
      const ks = real.slice(1).map((s) => s.draftLength ?? 0)
      const ctx = { forwarding: 'relay' as const, maxLength: 256, draftLength: ks[0] ?? 1 }
      const key = `k${i}`
      const decoy = await pool.decoyFor(key, [target], ctx, async () => ({ hop: fakeHop }))
      expect(decoy.spec).toBeDefined()
      const steps: Step[] = []
      let j = 0
      while (!decoyDone(decoy)) {
        const k = ks[j++ % Math.max(1, ks.length)]
        await pool.stepDecoy(
          key,
          decoy,
          async (step) => {
            steps.push(step)
            const input = rows.input(set, decoy.canary, 1, decoy.spec, step)
            expect(input.length).toBe(step.rows * set.dim)
            if (step.rejected.length > 0 && checked.length < 6)
              checked.push({ step, canary: decoy.canary, input: input.slice(), tokens: decoy.spec!.tokens })
          },
          k
        )
      }
      pool.retire(key, decoy, Promise.resolve())
      decoyShapes.push(steps)
    }
    // every decoy step: the canary's rows first (scored), then rejected drafts; the next step
    // starts right after the kept rows, as a real one does
    for (const steps of decoyShapes) {
      for (let s = 1; s + 1 < steps.length; s++) {
        const st = steps[s] as PlannedDecoyStep
        expect(st.scored + st.rejected.length).toBe(st.rows)
        expect(steps[s + 1].startPosition).toBe(st.startPosition + st.scored)
      }
    }
    const multi = decoyShapes.flatMap((s) => s.slice(1)).filter((s) => s.rows > 1).length
    expect(multi).toBeGreaterThan(0)
    expect(checked.length).toBeGreaterThan(0)
  }, 900_000)

  it("rejected drafts' rows are the drafted tokens' states after the canary's context (as a real step's)", () => {
    const set = material.setFor(1)
    for (const { step, canary, input, tokens } of checked) {
      const at = step.startPosition + step.scored
      // a rejected draft is not the canary's token (else it would have been kept)
      expect(step.rejected[0]).not.toBe(tokens[at])
      expect(input.subarray(0, step.scored * set.dim)).toEqual(inputFor(set, canary, step.startPosition, step.scored))
      const shard: Shard = createShard({ model, start: 0, end: 1, kernels })
      shard.openSession('x', { maxLength: tokens.length })
      shard.forward('x', edge.embed(tokens.slice(0, at)), 0)
      const expected = shard.forward('x', edge.embed(step.rejected), at)
      const got = input.subarray(step.scored * set.dim)
      let maxErr = 0
      for (let i = 0; i < got.length; i++) maxErr = Math.max(maxErr, Math.abs(got[i] - expected[i]))
      expect(maxErr).toBeLessThan(1e-4)
    }
  })

  it('a classifier over rows per step and rewinds tells decoys from real steps no better than chance', () => {
    const a = heldOutAuroc(realShapes.map(shapeFeatures), decoyShapes.map(shapeFeatures))
    expect(a).toBeLessThan(0.62)
    // the same classifier against one-row decoys (speculation's shape not copied) wins easily:
    // the features do carry the difference when there is one
    const oneRow = decoyShapes.map((steps) => [
      steps[0],
      ...Array.from({ length: steps[steps.length - 1].startPosition - steps[0].rows + 1 }, (_, p) => ({
        startPosition: steps[0].rows + p,
        rows: 1
      }))
    ])
    expect(heldOutAuroc(realShapes.map(shapeFeatures), oneRow.map(shapeFeatures))).toBeGreaterThan(0.9)
  })
})
