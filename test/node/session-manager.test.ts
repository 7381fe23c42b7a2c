import { describe, expect, it } from 'vitest'
import type { NodeSession } from '../../node/daemon/node-session.js'
import { sessionKey } from '../../node/daemon/node-session.js'
import { SessionManager } from '../../node/daemon/session-manager.js'
import { NodeStepQueue } from '../../node/daemon/step-batch-run.js'
import {
  BadShapeError,
  BadSpanError,
  BusyError,
  DuplicateSessionError,
  UnauthorizedError,
  UnknownSessionError
} from '../../protocol/errors.js'
import { createEdge, createShard, openModelFile } from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

const model = openModelFile(GGUF_PATH)
const edge = createEdge({ model })
const dim = model.config.dim

function setup(overrides: Partial<{ maxSessions: number; maxCacheTokens: number; maxSessionsPerOwner: number }> = {}) {
  let clock = 1_000
  const shard = createShard({ model, start: 1, end: 4 })
  const m = new SessionManager({
    shard,
    maxSessions: 3,
    maxCacheTokens: 1_000,
    idleTimeoutMs: 500,
    now: () => clock,
    ...overrides
  })
  // steps run the one way a node runs them: through its step queue (node/daemon/step-batch-run.ts)
  const queue = new NodeStepQueue({ shard, sessions: m, maxQueued: 8, maxBatchRows: 64 })
  const step = (session: NodeSession, stepId: number, startPosition: number, hidden: Float32Array, fromUpstream = false) =>
    queue.enqueue({ session, stepId, startPosition, hidden, fromUpstream })
  return { m, shard, step, tick: (ms: number) => (clock += ms) }
}

describe('node session manager', () => {
  it('opens sub-spans, runs steps and answers a retried step without recomputing', async () => {
    const { m, step } = setup()
    const s = m.open({ sessionId: 's', start: 2, end: 4, maxLength: 64, owner: 'client' })
    const x = edge.embed([1, 5, 9])
    const a = await step(s, 1, 0, x)
    expect(a.duplicate).toBe(false)
    const again = await step(s, 1, 0, x)
    expect(again.duplicate).toBe(true)
    expect(again.output).toBe(a.output)
    expect(m.tokensServed).toBe(3)
    // same id, position and rows but other input bytes: not a retry, so computed (its receipt signs that input)
    const other = await step(s, 1, 0, edge.embed([2, 5, 9]))
    expect(other.duplicate).toBe(false)
    expect(other.output).not.toEqual(a.output)
    const b = await step(s, 2, 3, edge.embed([4]))
    expect(b.duplicate).toBe(false)
  })

  it('enforces caps with BUSY, and rejects bad spans, shapes and duplicates', async () => {
    const { m, step } = setup({ maxSessions: 2, maxCacheTokens: 100 })
    m.open({ sessionId: 'a', start: 1, end: 4, maxLength: 60, owner: 'c' })
    expect(() => m.open({ sessionId: 'b', start: 1, end: 4, maxLength: 60, owner: 'c' })).toThrow(BusyError) // KV cap
    const b = m.open({ sessionId: 'b', start: 1, end: 4, maxLength: 40, owner: 'c' })
    expect(m.freeCacheTokens).toBe(0)
    expect(() => m.open({ sessionId: 'c', start: 1, end: 2, maxLength: 1, owner: 'c' })).toThrow(BusyError) // session cap
    expect(() => m.open({ sessionId: 'a', start: 1, end: 4, maxLength: 1, owner: 'c' })).toThrow(DuplicateSessionError)
    m.close(b)
    expect(() => m.open({ sessionId: 'd', start: 0, end: 2, maxLength: 1, owner: 'c' })).toThrow(BadSpanError)
    expect(() => m.open({ sessionId: 'd', start: 1, end: 4, maxLength: 100_000, owner: 'c' })).toThrow(BadSpanError)
    await expect(step(m.owned('a', 'c'), 1, 0, new Float32Array(dim + 1))).rejects.toThrow(BadShapeError)
    expect(() => m.owned('zzz', 'c')).toThrow(UnknownSessionError)
  })

  it('keys sessions by (owner, id): another peer can neither reach nor squat a session', async () => {
    const { m, shard, step } = setup()
    const mine = m.open({ sessionId: 's', start: 1, end: 4, maxLength: 8, owner: 'client', upstream: 'hopA' })
    expect(() => m.owned('s', 'mallory')).toThrow(UnknownSessionError)
    // the id the client will use next, opened first by a squatter: the client's open still succeeds
    const squat = m.open({ sessionId: 's.2', start: 1, end: 4, maxLength: 8, owner: 'mallory' })
    const real = m.open({ sessionId: 's.2', start: 1, end: 4, maxLength: 8, owner: 'client' })
    expect(real).not.toBe(squat)
    expect(shard.hasSession(sessionKey('client', 's.2'))).toBe(true)
    expect(m.fedBy('s', 'hopA')).toEqual([mine])
    expect(m.find('s', 'hopA')).toBe(mine)
    expect(m.fedBy('s', 'mallory')).toEqual([])
    expect((await step(mine, 1, 0, edge.embed([1]), true)).output.length).toBe(dim)
    // an upstream's step ids must go up: a replayed tag cannot rewind the KV
    await expect(step(mine, 1, 1, edge.embed([2]), true)).rejects.toThrow(UnauthorizedError)
    expect((await step(mine, 1, 0, edge.embed([1]), true)).duplicate).toBe(true) // a retry is answered
  })

  it('caps the sessions one owner holds', () => {
    const { m } = setup({ maxSessions: 4, maxSessionsPerOwner: 2 })
    m.open({ sessionId: 'a', start: 1, end: 4, maxLength: 8, owner: 'greedy' })
    m.open({ sessionId: 'b', start: 1, end: 4, maxLength: 8, owner: 'greedy' })
    expect(() => m.open({ sessionId: 'c', start: 1, end: 4, maxLength: 8, owner: 'greedy' })).toThrow(/per-peer cap/)
    m.open({ sessionId: 'c', start: 1, end: 4, maxLength: 8, owner: 'other' })
    expect(m.ownedBy('greedy')).toBe(2)
    expect(m.holdsAny('greedy')).toBe(true)
    expect(m.holdsAny('stranger')).toBe(false)
  })

  it('frees sessions idle past the timeout, and their KV with them', () => {
    const { m, shard, tick } = setup()
    const old = m.open({ sessionId: 'old', start: 1, end: 4, maxLength: 8, owner: 'c' })
    tick(300)
    m.open({ sessionId: 'new', start: 1, end: 4, maxLength: 8, owner: 'c' })
    tick(300)
    expect(m.sweep()).toBe(1)
    expect(m.isOpen(old)).toBe(false)
    expect(shard.hasSession(sessionKey('c', 'old'))).toBe(false)
    expect(m.find('new', 'c')).toBeDefined()
  })
})
