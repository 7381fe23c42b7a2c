/**
 * Issue #41 item 3/4: a holder's store of sealed KV (node/daemon/kv/kv-hold.ts). A hold grows only
 * from position 0 and then only where it ends, only from the source that started it; its bytes
 * count against the node's KV positions, so a hold past the free budget is BUSY; and an idle
 * hold is dropped. Nothing is kept before commit().
 */
import { describe, expect, it } from 'vitest'
import { HOLD_IDLE_MS, KvHoldStore } from '../../node/daemon/kv/kv-hold.js'
import { isKvHold, KV_HOLD_SESSION_ID, type KvGrant } from '../../protocol/index.js'

const grant = (o: Partial<KvGrant> = {}): KvGrant => ({
  grantId: new Uint8Array(16),
  clientPeerId: 'client',
  sourcePeerId: 'live',
  destinationPeerId: 'holder',
  modelId: 'lsm1-x',
  sourceSessionId: 's1',
  destinationSessionId: KV_HOLD_SESSION_ID,
  start: 1,
  end: 4,
  fromPosition: 0,
  toPosition: 8,
  prefixHash: new Uint8Array(32),
  expiresAtMs: 0,
  wrappedKeyHash: new Uint8Array(32),
  signature: new Uint8Array(64),
  ...o
})

const frame = (bytes: number) => ({ snapshots: [new Uint8Array(bytes)], prefixHash: new Uint8Array(32) })

function store(free = 1_000, now = () => 0) {
  return new KvHoldStore({ freeTokens: () => free, bytesPerToken: 100, now })
}

describe('KvHoldStore (sealed KV held for a client)', () => {
  it('a grant names a hold only by its signed destination session', () => {
    expect(isKvHold(grant())).toBe(true)
    expect(isKvHold(grant({ destinationSessionId: 'abc' }))).toBe(false)
  })

  it('keeps a hold only on commit, then grows it where it ends; the held bytes count as KV positions', () => {
    const s = store()
    const g = grant()
    const { hold, fresh } = s.begin(g)
    expect(fresh).toBe(true)
    expect(s.get('client', 's1', 1, 4)).toBeUndefined() // nothing kept before commit
    s.commit(g, hold, [frame(250)], 250, fresh)
    expect(s.get('client', 's1', 1, 4)).toMatchObject({ length: 8, bytes: 250 })
    expect(s.tokens).toBe(3)
    const g2 = grant({ fromPosition: 8, toPosition: 16 })
    const next = s.begin(g2)
    expect(next.fresh).toBe(false)
    s.commit(g2, next.hold, [frame(100)], 100, next.fresh)
    expect(s.get('client', 's1', 1, 4)).toMatchObject({ length: 16, bytes: 350 })
    expect(s.get('client', 's1', 1, 4)!.frames).toHaveLength(2)
    // another client's, session's or span's hold is another hold
    expect(s.get('other', 's1', 1, 4)).toBeUndefined()
    expect(s.get('client', 's1', 1, 3)).toBeUndefined()
  })

  it('refuses a range that does not continue the hold, a new hold not from 0, and another source (KV_GRANT_WRONG_SPAN)', () => {
    const s = store()
    const g = grant()
    const b = s.begin(g)
    s.commit(g, b.hold, [frame(10)], 10, b.fresh)
    for (const bad of [
      grant({ fromPosition: 4, toPosition: 12 }),
      grant({ fromPosition: 8, toPosition: 16, sourcePeerId: 'intruder' }),
      grant({ sourceSessionId: 's2', fromPosition: 8, toPosition: 16 })
    ])
      expect(() => s.begin(bad)).toThrow(expect.objectContaining({ code: 'KV_GRANT_WRONG_SPAN' }))
  })

  it('a hold past the node’s free KV positions is BUSY', () => {
    const s = store(5)
    s.reserve(500)
    expect(() => s.reserve(501)).toThrow(expect.objectContaining({ code: 'BUSY' }))
  })

  it('drops a hold nobody used for HOLD_IDLE_MS', () => {
    let t = 0
    const s = store(1_000, () => t)
    const g = grant()
    const b = s.begin(g)
    s.commit(g, b.hold, [frame(10)], 10, b.fresh)
    t = HOLD_IDLE_MS - 1
    expect(s.get('client', 's1', 1, 4)).toBeDefined() // and this use keeps it
    t = 2 * HOLD_IDLE_MS
    expect(s.get('client', 's1', 1, 4)).toBeUndefined()
    expect(s.tokens).toBe(0)
  })
})
