/**
 * Issue #39's announcement store: lifetimes capped from the issue time, confirmed entries kept
 * over unconfirmed newcomers, per-source and per-IP shares of unconfirmed entries.
 */
import { generateKeyPair } from '@libp2p/crypto/keys'
import { peerIdFromPrivateKey } from '@libp2p/peer-id'
import { describe, expect, it } from 'vitest'
import {
  type Announcement,
  AnnouncementExpiredError,
  AnnouncementStore,
  DEFAULT_MAX_ANNOUNCEMENT_LIFETIME_MS,
  type SignedAnnouncement,
  signAnnouncement,
  verifyAnnouncement
} from '../../protocol/index.js'

const NOW = 1_700_000_000_000

async function make(lifetimeMs: number, issuedAtMs = NOW): Promise<{ a: Announcement; s: SignedAnnouncement }> {
  const key = await generateKeyPair('Ed25519')
  const a: Announcement = {
    peerId: peerIdFromPrivateKey(key).toString(),
    modelId: 'm',
    start: 0,
    end: 1,
    throughput: 1,
    freeCacheTokens: 1,
    wireDtypes: ['f32'],
    version: '1',
    addrs: [],
    issuedAtMs,
    expiresAtMs: issuedAtMs + lifetimeMs
  }
  return { a, s: await signAnnouncement(a, key) }
}

describe('announcement store (issue #39)', () => {
  it('refuses an announcement signed with a 1 h lifetime; the cap is a few minutes', async () => {
    const long = await make(60 * 60_000)
    await expect(verifyAnnouncement(long.s, NOW)).rejects.toThrow(AnnouncementExpiredError)
    expect(DEFAULT_MAX_ANNOUNCEMENT_LIFETIME_MS).toBeLessThanOrEqual(2 * 60_000)
  })

  it('keeps an entry at most maxLifetimeMs from its issue time', async () => {
    const store = new AnnouncementStore(4, { maxLifetimeMs: 10_000 })
    const x = await make(60_000)
    store.put(x.a, x.s, NOW)
    expect(store.list(undefined, NOW + 9_999)).toHaveLength(1)
    expect(store.list(undefined, NOW + 10_000)).toHaveLength(0)
  })

  it('never evicts a confirmed entry for unconfirmed newcomers, and lists confirmed ones last', async () => {
    const store = new AnnouncementStore(4)
    const honest = await make(15_000)
    store.confirm(honest.a.peerId) // seen on a connection before its announcement came
    store.put(honest.a, honest.s, NOW)
    const flood = await Promise.all(Array.from({ length: 12 }, () => make(110_000)))
    for (const [i, f] of flood.entries()) store.put(f.a, f.s, NOW, { peer: `relay-${i % 4}` })
    expect(store.size).toBe(4)
    expect(store.isConfirmed(honest.a.peerId)).toBe(true)
    const listed = store.list(undefined, NOW)
    expect(listed.at(-1)).toBe(honest.s)
  })

  it('keeps an entry that served a step over a flood of keys each confirmed by a connection of its own', async () => {
    const store = new AnnouncementStore(4)
    const honest = await make(15_000) // an honest node's short lifetime: it expires first
    store.put(honest.a, honest.s, NOW)
    store.confirm(honest.a.peerId)
    store.confirm(honest.a.peerId, 'step') // a chained hop passed it its output with its receipt
    expect(store.isConfirmed(honest.a.peerId, 'step')).toBe(true)
    // 20 fresh keys, each dialling the node (a connection confirms it) and announcing with the
    // longest lifetime: before, each confirmed newcomer evicted the confirmed entry expiring first,
    // the honest one
    for (let i = 0; i < 20; i++) {
      const f = await make(110_000)
      store.confirm(f.a.peerId)
      store.put(f.a, f.s, NOW, { peer: `sybil-${i}` })
    }
    expect(store.size).toBe(4)
    expect(store.isConfirmed(honest.a.peerId, 'step')).toBe(true)
    expect(store.list(undefined, NOW).at(-1)).toEqual(honest.s) // listed last: kept by a client that keeps the last ones
    // a newcomer that served a step may take a connection-only entry's place, never the honest one's
    const other = await make(15_000, NOW + 1)
    store.confirm(other.a.peerId, 'step')
    store.put(other.a, other.s, NOW + 1)
    expect(store.isConfirmed(other.a.peerId, 'step')).toBe(true)
    expect(store.isConfirmed(honest.a.peerId, 'step')).toBe(true)
  })

  it('holds each source, and each IP, to its share of unconfirmed entries', async () => {
    const store = new AnnouncementStore(8) // a quarter per source (2), half per IP (4)
    const xs = await Promise.all(Array.from({ length: 8 }, () => make(60_000)))
    for (const x of xs.slice(0, 3)) store.put(x.a, x.s, NOW, { peer: 'p1' })
    expect(store.size).toBe(2)
    expect(store.admits(xs[3].a, { peer: 'p1' }, NOW)).toBe(false)
    for (const x of xs.slice(3, 6)) store.put(x.a, x.s, NOW, { peer: 'p2', ip: 'ip4:203.0.113.7' })
    for (const x of xs.slice(6, 8)) store.put(x.a, x.s, NOW, { peer: 'p3', ip: 'ip4:203.0.113.7' })
    expect(store.size).toBe(6) // p2: 2, p3: 2, but the IP's share is 4
    const fresh = await make(60_000)
    expect(store.admits(fresh.a, { peer: 'p4', ip: 'ip4:203.0.113.7' }, NOW)).toBe(false)
    expect(store.admits(fresh.a, { peer: 'p4', ip: 'ip4:198.51.100.1' }, NOW)).toBe(true)
    // a newer announcement of a held peer is always taken; the same one again is not news
    const again = xs[3]
    expect(store.admits(again.a, { peer: 'p1' }, NOW)).toBe(false)
    expect(store.admits({ ...again.a, issuedAtMs: NOW + 1 }, { peer: 'p1' }, NOW)).toBe(true)
  })
})
