import { describe, expect, it } from 'vitest'
import { type chainIdsAt, openChainHops, routeSessionIds } from '../../client/session/chain-ids.js'
import type { HopSession } from '../../client/session/hop.js'

/*
 * Per-hop session ids on a chain (issue #39, client/session/chain-ids.ts): each hop is told its own
 * id, the id to forward under (its next hop's) and the id its upstream's receipts are signed for;
 * a chain with a hop that does not acknowledge them is reopened under one id. The opens here are
 * records of what each hop was told (the wire is tested end to end in test/e2e/swarm.test.ts).
 */
interface Told {
  i: number
  sessionId: string
  nextSessionId?: string
  upstreamSessionId?: string
}

function opener(ack: (i: number) => boolean) {
  const told: Told[] = []
  const closed: string[] = []
  const open = async (i: number, ids: ReturnType<typeof chainIdsAt>): Promise<HopSession> => {
    told.push({ i, ...ids })
    const hop = { sessionId: ids.sessionId, chainedSessionIds: ack(i), close: async () => void closed.push(ids.sessionId) }
    return hop as unknown as HopSession
  }
  return { told, closed, open }
}

describe('per-hop session ids on a chain', () => {
  it('every hop its own id; each told its next hop and upstream ids, opened from the last back', async () => {
    const o = opener(() => true)
    const { hops, perHopIds } = await openChainHops(3, 'first', o.open)
    expect(perHopIds).toBe(true)
    const ids = hops.map((h) => h.sessionId)
    expect(ids[0]).toBe('first')
    expect(new Set(ids).size).toBe(3)
    expect(o.told.map((t) => t.i)).toEqual([2, 1, 0])
    expect(o.told.reverse()).toEqual([
      { i: 0, sessionId: ids[0], nextSessionId: ids[1] },
      { i: 1, sessionId: ids[1], nextSessionId: ids[2], upstreamSessionId: ids[0] },
      { i: 2, sessionId: ids[2], upstreamSessionId: ids[1] }
    ])
    expect(o.closed).toEqual([])
  })

  it('a hop that does not acknowledge them: the fresh hops close and the chain reopens under one id', async () => {
    const o = opener((i) => i !== 1)
    const { hops, perHopIds } = await openChainHops(3, 'first', o.open)
    expect(perHopIds).toBe(false)
    expect(hops.map((h) => h.sessionId)).toEqual(['first', 'first', 'first'])
    expect(o.closed.length).toBe(3)
    expect(o.told.slice(3).map((t) => [t.sessionId, t.nextSessionId, t.upstreamSessionId])).toEqual([
      ['first', undefined, 'first'],
      ['first', 'first', 'first'],
      ['first', 'first', undefined]
    ])
  })

  it('relayed (no acknowledgement asked) and one-hop chains keep their ids; taken standbys keep theirs', async () => {
    const relayed = await openChainHops(2, 'r', opener(() => false).open, [], false)
    expect(new Set(relayed.hops.map((h) => h.sessionId)).size).toBe(2)
    expect((await openChainHops(1, 'one', opener(() => false).open)).hops.map((h) => h.sessionId)).toEqual(['one'])
    const standby = { sessionId: 'standby', chainedSessionIds: true } as unknown as HopSession
    const o = opener(() => true)
    const { hops } = await openChainHops(2, 'x', o.open, [undefined, standby])
    expect(hops[1]).toBe(standby)
    expect(o.told).toEqual([{ i: 0, sessionId: 'x', nextSessionId: 'standby' }])
  })

  it('ids are 128-bit random hex', () => {
    const ids = routeSessionIds(4, 'a')
    for (const id of ids.slice(1)) expect(id).toMatch(/^[0-9a-f]{32}$/)
    expect(routeSessionIds(3, 'a', true)).toEqual(['a', 'a', 'a'])
  })

  it('a failed open closes the hops opened before it', async () => {
    const closed: string[] = []
    const open = async (i: number, ids: ReturnType<typeof chainIdsAt>): Promise<HopSession> => {
      if (i === 0) throw new Error('refused')
      return {
        sessionId: ids.sessionId,
        chainedSessionIds: true,
        close: async () => void closed.push(ids.sessionId)
      } as unknown as HopSession
    }
    await expect(openChainHops(3, 'f', open)).rejects.toThrow('refused')
    await new Promise((r) => setImmediate(r))
    expect(closed.length).toBe(2)
  })
})
