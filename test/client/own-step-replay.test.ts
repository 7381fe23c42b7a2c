import { afterAll, describe, expect, it } from 'vitest'
import { createDetector, createRandom, defaultBenignModel, type PeerVerdict } from '../../canary/index.js'
import type { HopSession, HopTarget } from '../../client/session/hop.js'
import { PeerScores } from '../../client/verification/canary-scores.js'
import { OwnStepChecks, OwnStepSession } from '../../client/verification/own-step-replay.js'
import { SpanReplay } from '../../client/verification/span-replay.js'
import { createEdge, createReferenceKernels, createShard, openModelFile } from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

/*
 * Issue 31 item 4: while no canary exists, a new client replays its real relayed steps at the
 * session's end (client/verification/own-step-replay.ts), and its chained steps hop by hop from the
 * middle hops' audited outputs. Real shards of the bundled model stand
 * in for the peers (the wire is covered by test/e2e/canary-first-token and canary-chat): an honest
 * hop's steps, speculative rewinds included, are verified; a tampering hop is convicted and not
 * verified; a hop whose record does not start at position 0 (its KV came from elsewhere) and a
 * peer with a step not replayed are never verified.
 */
const model = openModelFile(GGUF_PATH)
const kernels = createReferenceKernels()
const dim = model.config.dim
const edge = createEdge({ model, kernels })
const first = createShard({ model, start: 0, end: 1, kernels })
afterAll(() => {
  first.close()
  model.close()
})

const target = (peerId: string): HopTarget => ({ peerId, start: 1, end: 3 }) as HopTarget

function rig() {
  const benign = defaultBenignModel()
  const detector = createDetector({ benign })
  const classOf = (): string => 'f32'
  const scores = new PeerScores(detector, 'model', { classOf, wireOf: () => 'f32', setFor: () => undefined as never })
  const convicted: string[] = []
  const checks = new OwnStepChecks({
    replay: new SpanReplay(model, kernels),
    dim,
    benign,
    classOf,
    score: (...a) => scores.score(...a),
    noteConviction: (v: PeerVerdict) => {
      if (v.excluded && v.excludedAfter === v.observations) convicted.push(v.peerId)
    },
    wanted: () => true
  })
  return { checks, scores, detector, convicted }
}

/**
 * A peer serving [1,3) as a real shard, fed the client's block-0 rows of `tokens`; steps as a
 * speculative session sends them: a prefill, one-row steps, a 3-row draft step then a rewind to
 * its second row. `tamper` adds noise to what the peer answers.
 */
function session(peerId: string, o: { tamper?: number; from?: number } = {}): OwnStepSession {
  const own = new OwnStepSession(dim)
  const peer = createShard({ model, start: 1, end: 3, kernels })
  const id = `s-${peerId}-${o.from ?? 0}`
  first.openSession(id, { maxLength: 64 })
  peer.openSession(id, { maxLength: 64 })
  const rnd = createRandom(7)
  const hop = { sessionId: `hop-${peerId}`, target: target(peerId) } as unknown as HopSession
  const tokens = [1, 403, 407, 261, 378, 300, 302, 280, 410, 275, 290, 301, 333, 350, 299, 412, 256, 265, 270, 281]
  const plan: Array<[number, number]> = [[0, 4]]
  for (let p = 4; p < 12; p++) plan.push([p, 1])
  plan.push([12, 3], [13, 1]) // rows 13-14 of the draft step rejected: the next step rewinds to 13
  for (let p = 14; p < tokens.length; p++) plan.push([p, 1])
  let stepId = 1
  for (const [position, rows] of plan) {
    const input = first.forward(id, edge.embed(tokens.slice(position, position + rows)), position)
    const output = peer.forward(id, input, position)
    if (o.tamper) for (let i = 0; i < output.length; i++) output[i] += o.tamper * (rnd.next() - 0.5)
    if (position >= (o.from ?? 0))
      own.record({ hops: [hop], stepId, startPosition: position, inputs: [input], outputs: [output], receipts: [] })
    stepId++
  }
  first.closeSession(id)
  peer.close()
  return own
}

/**
 * A chained route [1,2) → [2,3) as real shards, stepped one row at a time after a prefill; the
 * client sees its input and the tail's answer, the middle hop's output comes from its audit,
 * and the audits come back out of step order (rounds). `tamperMiddle` adds noise to what the middle
 * hop forwards (the tail is fed that); `unaudited` is a step whose audit never came back.
 */
function chainSession(o: { tamperMiddle?: number; unaudited?: number }): OwnStepSession {
  const own = new OwnStepSession(dim)
  const middle = createShard({ model, start: 1, end: 2, kernels })
  const tail = createShard({ model, start: 2, end: 3, kernels })
  const id = `chain-${o.tamperMiddle ?? 0}-${o.unaudited ?? 0}`
  for (const s of [first, middle, tail]) s.openSession(id, { maxLength: 64 })
  const rnd = createRandom(11)
  const hop = (peerId: string, start: number, end: number) =>
    ({ sessionId: `hop-${peerId}`, target: { peerId, start, end } }) as unknown as HopSession
  const hops = [hop('middle', 1, 2), hop('tail', 2, 3)]
  const tokens = [1, 403, 407, 261, 378, 300, 302, 280, 410, 275, 290, 301]
  const plan: Array<[number, number]> = [[0, 4]]
  for (let p = 4; p < tokens.length; p++) plan.push([p, 1])
  const audited: Array<() => void> = []
  plan.forEach(([position, rows], i) => {
    const input = first.forward(id, edge.embed(tokens.slice(position, position + rows)), position)
    const forwarded = middle.forward(id, input, position)
    if (o.tamperMiddle) for (let k = 0; k < forwarded.length; k++) forwarded[k] += o.tamperMiddle * (rnd.next() - 0.5)
    const output = tail.forward(id, forwarded, position)
    own.expect(hops)
    const step = { hops, stepId: i + 1, startPosition: position, rows, input, output, receipts: [] }
    if (i !== o.unaudited) audited.push(() => own.recordChained(step, [forwarded]))
  })
  for (const record of audited.reverse()) record()
  for (const s of [first, middle, tail]) s.closeSession(id)
  middle.close()
  tail.close()
  return own
}

describe('own-step replay (issue 31 item 4)', () => {
  it('verifies an honest hop, speculative rewinds included, and scores each kept step', async () => {
    const { checks, scores, detector, convicted } = rig()
    await checks.check(session('honest'))
    expect(checks.verified('honest')).toBe(true)
    expect(convicted).toEqual([])
    // one observation per step still in the record (the rewound draft step is cut, not dropped)
    expect(detector.verdict('honest').observations).toBe(1 + 8 + 1 + 1 + 6)
    // replayed real steps are not counted as canaries sent
    expect(scores.report().find((r) => r.peerId === 'honest')?.canariesSent).toBe(0)
  })

  it('convicts a tampering hop and never verifies it', async () => {
    const { checks, convicted } = rig()
    await checks.check(session('tamperer', { tamper: 0.5 }))
    expect(convicted).toEqual(['tamperer'])
    expect(checks.verified('tamperer')).toBe(false)
  })

  it('does not verify a hop whose record starts past position 0, nor a peer with a step not replayed', async () => {
    const { checks } = rig()
    await checks.check(session('restored', { from: 6 }))
    expect(checks.verified('restored')).toBe(false)
    await checks.check(session('honest'))
    expect(checks.verified('honest')).toBe(true)
    checks.unverify(['honest'])
    await checks.check(session('honest'))
    expect(checks.verified('honest')).toBe(false)
  })

  it('replays a chained route hop by hop: a tampering middle hop convicted, the honest tail it fed verified', async () => {
    const { checks, convicted } = rig()
    await checks.check(chainSession({ tamperMiddle: 0.5 }))
    expect(convicted).toEqual(['middle'])
    expect(checks.verified('middle')).toBe(false)
    // the tail computed honestly on the tampered rows it was sent: judged on its own rows, not blamed
    expect(checks.verified('tail')).toBe(true)
  })

  it('verifies an honest chain, and no hop of a chain with a step whose audit never came back', async () => {
    const { checks, convicted } = rig()
    await checks.check(chainSession({}))
    expect(checks.verified('middle') && checks.verified('tail')).toBe(true)
    const other = rig()
    await other.checks.check(chainSession({ unaudited: 5 }))
    expect(other.checks.verified('middle')).toBe(false)
    expect(other.checks.verified('tail')).toBe(false)
    expect(convicted).toEqual([])
  })

  it('records nothing when canaries exist (begin)', () => {
    const none = new OwnStepChecks({ ...rigDeps(), wanted: () => false })
    expect(none.begin()).toBeUndefined()
  })
})

function rigDeps() {
  const benign = defaultBenignModel()
  return {
    replay: new SpanReplay(model, kernels),
    dim,
    benign,
    classOf: () => 'f32',
    score: () => undefined as never,
    noteConviction: () => {}
  }
}
