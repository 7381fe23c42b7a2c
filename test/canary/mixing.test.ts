import { describe, expect, it } from 'vitest'
import {
  auroc,
  buildCanarySet,
  CanaryArgumentError,
  type CanarySet,
  createCanaryScheduler,
  createDecoyPlanner,
  createRandom,
  HELD_OUT_PROMPTS,
  type SessionShape
} from '../../canary/index.js'
import { openModelFile } from '../../shards/index.js'

describe('createCanaryScheduler', () => {
  it('sends canary steps at the configured rate, in lockstep runs like a real session', () => {
    const s = createCanaryScheduler({ rate: 0.03, seed: 4 })
    let runs = 0
    let prev = false
    for (let i = 0; i < 200_000; i++) {
      const t = s.onRealStep()
      if (t.start) runs++
      if (prev && t.send && !t.start) expect(t.index).toBeGreaterThan(0)
      prev = t.send
    }
    expect(s.stats().fraction).toBeGreaterThan(0.025)
    expect(s.stats().fraction).toBeLessThan(0.035)
    expect(runs).toBeGreaterThan(300)
    expect(() => createCanaryScheduler({ rate: 0.7 })).toThrow(CanaryArgumentError)
  })
})

/** What a peer sees of a session: open params, step shapes and the hidden states it receives. */
function features(set: CanarySet, index: number, prompt: number, decode: number, maxLength: number, wire: number): number[] {
  const { dim } = set
  const x = set.canaries[index].inputs.subarray(0, (prompt + decode) * dim)
  const norms: number[] = []
  for (let r = 0; r < prompt + decode; r++) {
    let s = 0
    for (let c = 0; c < dim; c++) s += x[r * dim + c] ** 2
    norms.push(Math.sqrt(s))
  }
  const mean = (a: ArrayLike<number>) => Array.from(a).reduce((p, q) => p + q, 0) / a.length
  const std = (a: ArrayLike<number>) => {
    const m = mean(a)
    return Math.sqrt(mean(Array.from(a, (v) => (v - m) ** 2)))
  }
  const decodeNorms = norms.slice(prompt)
  // The timing pattern: one step per scheduler tick for both kinds (lockstep), so gaps are 1.
  // session length (steps, last position) and the late rows' statistics are features too
  const late = norms.slice(Math.max(prompt, norms.length - 8))
  return [
    prompt,
    decode + 1,
    prompt + decode,
    maxLength,
    wire,
    1,
    0,
    mean(norms),
    std(norms),
    mean(x),
    std(x),
    decodeNorms.length ? mean(decodeNorms) : 0,
    late.length ? mean(late) : 0
  ]
}

/** Logistic regression by batch gradient descent on standardized features; held-out AUROC. */
function heldOutAuroc(real: number[][], canary: number[][]): number {
  const rows = [...real.map((f) => ({ f, y: 0 })), ...canary.map((f) => ({ f, y: 1 }))]
  const rnd = createRandom(11)
  for (let i = rows.length - 1; i > 0; i--) {
    const j = rnd.int(i + 1)
    ;[rows[i], rows[j]] = [rows[j], rows[i]]
  }
  const cut = Math.floor(rows.length * 0.6)
  const train = rows.slice(0, cut)
  const test = rows.slice(cut)
  const d = rows[0].f.length
  const mu = Array.from({ length: d }, (_, k) => train.reduce((s, r) => s + r.f[k], 0) / train.length)
  const sd = Array.from(
    { length: d },
    (_, k) => Math.sqrt(train.reduce((s, r) => s + (r.f[k] - mu[k]) ** 2, 0) / train.length) || 1
  )
  const z = (f: number[]) => f.map((v, k) => (v - mu[k]) / sd[k])
  const w = new Array(d + 1).fill(0)
  const dot = (x: number[]) => x.reduce((s, v, k) => s + v * w[k], w[d])
  const score = (f: number[]) => dot(z(f))
  const zt = train.map((r) => ({ x: z(r.f), y: r.y }))
  for (let it = 0; it < 300; it++) {
    const g = new Array(d + 1).fill(0)
    for (const r of zt) {
      const e = 1 / (1 + Math.exp(-dot(r.x))) - r.y
      for (let k = 0; k < d; k++) g[k] += e * r.x[k]
      g[d] += e
    }
    for (let k = 0; k <= d; k++) w[k] -= (0.5 * g[k]) / train.length
  }
  return auroc(
    test.filter((r) => r.y === 1).map((r) => score(r.f)),
    test.filter((r) => r.y === 0).map((r) => score(r.f))
  )
}

describe('decoy sessions', () => {
  const model = openModelFile('models/stories260K.gguf')
  // Real traffic: other TinyStories prompts continued by the model, as a real client generates.
  const real = buildCanarySet({ model, boundary: 1, ends: [2], prompts: HELD_OUT_PROMPTS, seed: 99 })
  const canaries = buildCanarySet({ model, boundary: 1, ends: [2], seed: 1 })

  it('copies real session shapes', () => {
    const planner = createDecoyPlanner({ set: canaries, seed: 2 })
    planner.observeReal({ promptLength: 7, steps: 5, maxLength: 128, wire: 'f16' })
    const p = planner.plan()
    expect(p.maxLength).toBe(128)
    expect(p.wire).toBe('f16')
    expect(p.steps).toEqual([
      { startPosition: 0, rows: 7 },
      { startPosition: 7, rows: 1 },
      { startPosition: 8, rows: 1 },
      { startPosition: 9, rows: 1 },
      { startPosition: 10, rows: 1 }
    ])
    expect(() => planner.observeReal({ promptLength: 0, steps: 1, maxLength: 8, wire: 'f32' })).toThrow(CanaryArgumentError)
  })

  it('ends the prefill at an allowed end only at the real prompt length, with room for its steps; the shape stays a real one', () => {
    const planner = createDecoyPlanner({ set: canaries, seed: 4 })
    planner.observeReal({ promptLength: 12, steps: 3, maxLength: 128, wire: 'f32' })
    const L = canaries.canaries[0].tokens.length
    // canary 1 may end its prefill at 12 or 30, the others nowhere: 12 is the real length
    const ends = canaries.canaries.map((_, i) => (i === 1 ? [30, 12] : []))
    const p = planner.plan(undefined, ends)
    expect(p.canaryIndex).toBe(1)
    expect(p.steps).toEqual([
      { startPosition: 0, rows: 12 },
      { startPosition: 12, rows: 1 },
      { startPosition: 13, rows: 1 }
    ])
    // no end at the real length (9): the prefill copies the real length anyway, never a nearby end
    const nine = createDecoyPlanner({ set: canaries, seed: 4 })
    nine.observeReal({ promptLength: 9, steps: 3, maxLength: 128, wire: 'f32' })
    expect(nine.plan(undefined, ends).steps[0].rows).toBe(9)
    // an end at the real length but without room for the decode steps is not taken
    const q = createDecoyPlanner({ set: canaries, seed: 4, history: 1 })
    q.observeReal({ promptLength: L - 1, steps: 3, maxLength: 512, wire: 'f32' })
    const far = q.plan(
      undefined,
      canaries.canaries.map((_, i) => (i === 0 ? [L - 1] : []))
    )
    expect(far.steps[0].rows).toBe(L - 1)
    expect(() => q.plan(undefined, [[3]])).toThrow(CanaryArgumentError)
  })

  it('a classifier over what a peer sees (session length included) does no better than chance', () => {
    const rnd = createRandom(3)
    const planner = createDecoyPlanner({ set: canaries, seed: 5 })
    const wires = ['f32', 'f16', 'q8_0'] as const
    const realF: number[][] = []
    const canaryF: number[][] = []
    for (let i = 0; i < 300; i++) {
      const index = rnd.int(real.canaries.length)
      const L = real.canaries[index].tokens.length
      const prompt = Math.min(L - 1, real.canaries[index].promptLength - rnd.int(4))
      // real sessions of every length up to the canaries' (256 positions): decoys copy them
      const decode = 1 + rnd.int(L - prompt)
      const shape: SessionShape = {
        promptLength: prompt,
        steps: decode + 1,
        maxLength: [256, 384][rnd.int(2)],
        wire: wires[rnd.int(3)]
      }
      planner.observeReal(shape)
      realF.push(features(real, index, prompt, decode, shape.maxLength, wires.indexOf(shape.wire)))
      const plan = planner.plan()
      const rows = plan.steps.reduce((s, x) => s + x.rows, 0)
      canaryF.push(
        features(
          canaries,
          plan.canaryIndex,
          plan.steps[0].rows,
          rows - plan.steps[0].rows,
          plan.maxLength,
          wires.indexOf(plan.wire)
        )
      )
    }
    const a = heldOutAuroc(realF, canaryF)
    expect(a).toBeGreaterThan(0.4)
    expect(a).toBeLessThan(0.6)
  })
})
