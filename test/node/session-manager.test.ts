import { describe, expect, it } from 'vitest'
import {
  BadShapeError,
  BadSpanError,
  BusyError,
  DuplicateSessionError,
  UnauthorizedError,
  UnknownSessionError
} from '../../node/errors.js'
import { SessionManager } from '../../node/session-manager.js'
import { createEdge, createShard, openModelFile } from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

const model = openModelFile(GGUF_PATH)
const edge = createEdge({ model })
const dim = model.config.dim

function setup(overrides: Partial<{ maxSessions: number; maxCacheTokens: number }> = {}) {
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
  return { m, shard, tick: (ms: number) => (clock += ms) }
}

describe('node session manager', () => {
  it('opens sub-spans, runs steps and answers a retried step without recomputing', () => {
    const { m } = setup()
    m.open({ sessionId: 's', start: 2, end: 4, maxLength: 64, owner: 'client' })
    const x = edge.embed([1, 5, 9])
    const a = m.step('s', 'client', 1, 0, x)
    expect(a.duplicate).toBe(false)
    const again = m.step('s', 'client', 1, 0, x)
    expect(again.duplicate).toBe(true)
    expect(again.output).toBe(a.output)
    expect(m.tokensServed).toBe(3)
    const b = m.step('s', 'client', 2, 3, edge.embed([4]))
    expect(b.duplicate).toBe(false)
  })

  it('enforces caps with BUSY, and rejects bad spans, shapes and duplicates', () => {
    const { m } = setup({ maxSessions: 2, maxCacheTokens: 100 })
    m.open({ sessionId: 'a', start: 1, end: 4, maxLength: 60, owner: 'c' })
    expect(() => m.open({ sessionId: 'b', start: 1, end: 4, maxLength: 60, owner: 'c' })).toThrow(BusyError) // KV cap
    m.open({ sessionId: 'b', start: 1, end: 4, maxLength: 40, owner: 'c' })
    expect(m.freeCacheTokens).toBe(0)
    expect(() => m.open({ sessionId: 'c', start: 1, end: 2, maxLength: 1, owner: 'c' })).toThrow(BusyError) // session cap
    expect(() => m.open({ sessionId: 'a', start: 1, end: 4, maxLength: 1, owner: 'c' })).toThrow(DuplicateSessionError)
    m.close('b', 'c')
    expect(() => m.open({ sessionId: 'd', start: 0, end: 2, maxLength: 1, owner: 'c' })).toThrow(BadSpanError)
    expect(() => m.open({ sessionId: 'd', start: 1, end: 4, maxLength: 100_000, owner: 'c' })).toThrow(BadSpanError)
    expect(() => m.step('a', 'c', 1, 0, new Float32Array(dim + 1))).toThrow(BadShapeError)
    expect(() => m.step('zzz', 'c', 1, 0, edge.embed([1]))).toThrow(UnknownSessionError)
  })

  it('only the owner (or the chained upstream) may use a session', () => {
    const { m } = setup()
    m.open({ sessionId: 's', start: 1, end: 4, maxLength: 8, owner: 'client', upstream: 'hopA' })
    expect(() => m.step('s', 'mallory', 1, 0, edge.embed([1]))).toThrow(UnauthorizedError)
    expect(() => m.close('s', 'mallory')).toThrow(UnauthorizedError)
    expect(() => m.rewind('s', 'hopA', 0)).toThrow(UnauthorizedError) // upstream may only step
    expect(m.step('s', 'hopA', 1, 0, edge.embed([1])).output.length).toBe(dim)
    expect(m.has('s')).toBe(true)
  })

  it('frees sessions idle past the timeout, and their KV with them', () => {
    const { m, shard, tick } = setup()
    m.open({ sessionId: 'old', start: 1, end: 4, maxLength: 8, owner: 'c' })
    tick(300)
    m.open({ sessionId: 'new', start: 1, end: 4, maxLength: 8, owner: 'c' })
    tick(300)
    expect(m.sweep()).toBe(1)
    expect(m.has('old')).toBe(false)
    expect(shard.hasSession('old')).toBe(false)
    expect(m.has('new')).toBe(true)
    expect(m.freeCacheTokens).toBe(1_000 - 8)
  })
})
