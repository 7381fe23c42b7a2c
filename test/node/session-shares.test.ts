/**
 * Issue #39's session limits in the SessionManager: per-IP and per-subnet shares of sessions and
 * KV (fresh peer ids from one address share one), sessions that never took a step freed after
 * firstStepTimeoutMs, and unused sessions of an owner with no connection freed after orphanTimeoutMs.
 */
import { describe, expect, it } from 'vitest'
import type { NodeSession } from '../../node/daemon/node-session.js'
import { SessionManager } from '../../node/daemon/session-manager.js'
import { sourceShares } from '../../node/daemon/swarm-node-init.js'
import { BusyError, peerSource } from '../../protocol/index.js'
import { createShard, KV_INITIAL_POSITIONS, openModelFile } from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

const model = openModelFile(GGUF_PATH)

function setup(maxSessions = 8, maxCacheTokens = 800) {
  let clock = 1_000
  const shard = createShard({ model, start: 1, end: 4 })
  const m = new SessionManager({
    shard,
    maxSessions,
    maxSessionsPerOwner: maxSessions,
    maxCacheTokens,
    idleTimeoutMs: 60_000,
    ...sourceShares(maxSessions, maxCacheTokens),
    firstStepTimeoutMs: 2_000,
    orphanTimeoutMs: 1_000,
    now: () => clock
  })
  let n = 0
  const open = (owner: string, addr: string | undefined, maxLength = 10) =>
    m.open({ sessionId: `s${n++}`, start: 1, end: 4, maxLength, owner, source: addr ? peerSource(addr) : undefined })
  return { m, open, shard, tick: (ms: number) => (clock += ms) }
}

describe('per-source shares and reclaims (issue #39)', () => {
  it('gives fresh ids from one IP half the slots; another IP, and loopback, still open', () => {
    const { m, open } = setup()
    for (let i = 0; i < 4; i++) open(`sybil-${i}`, '/ip4/203.0.113.7/tcp/4001')
    expect(() => open('sybil-new', '/ip4/203.0.113.7/tcp/4002')).toThrow(BusyError)
    expect(() => open('sybil-new', '/ip4/203.0.113.7/tcp/4002')).toThrow(/per-IP share/)
    open('honest', '/ip4/198.51.100.1/tcp/4001')
    open('local', '/ip4/127.0.0.1/tcp/4001') // loopback: the node's own machine, not counted
    expect(m.active).toBe(6)
  })

  it('holds a /24 to three quarters of the slots, across its addresses', () => {
    const { open } = setup()
    for (let i = 0; i < 6; i++) open(`p${i}`, `/ip4/203.0.113.${i + 1}/tcp/4001`)
    expect(() => open('p6', '/ip4/203.0.113.99/tcp/4001')).toThrow(/per-subnet share/)
    open('other', '/ip4/203.0.114.1/tcp/4001')
  })

  it('counts one IPv6 /48 as one subnet, and a relayed connection under its relay', () => {
    expect(peerSource('/ip6/2001:db8:1:2::5/tcp/1')?.subnet).toBe(peerSource('/ip6/2001:db8:1:ffff::9/tcp/1')?.subnet)
    expect(peerSource('/ip6/2001:db8:1:2::5/tcp/1')?.subnet).not.toBe(peerSource('/ip6/2001:db8:2::5/tcp/1')?.subnet)
    expect(peerSource('/ip6/::1/tcp/1')).toBeUndefined()
    const relayed = '/ip4/198.51.100.9/tcp/4001/p2p/12D3KooWRelay/p2p-circuit/p2p/12D3KooWPeer'
    expect(peerSource(relayed)?.ip).toBe('ip4:198.51.100.9')
    expect(peerSource('/dns4/example.com/tcp/1')?.ip).toBe('other')
  })

  it('holds one IP to half the KV positions as they are filled, not as they are asked for', () => {
    const { m, open, shard } = setup(8, 800)
    const ip = '/ip4/203.0.113.7/tcp/1'
    // each asks for the whole context and holds KV_INITIAL_POSITIONS until it fills more (before:
    // the second open was BUSY, 512 + 512 positions reserved of 800)
    const a = open('a', ip, 512)
    const b = open('b', ip, 512)
    const c = open('c', undefined, 512)
    expect(m.reservedTokens).toBe(3 * KV_INITIAL_POSITIONS)
    // a step fills a: its KV grows (doubling) as the node checked it could
    const fill = (s: NodeSession, to: number) => {
      const from = shard.sessionLength(s.key)
      m.checkGrowth(s, to)
      shard.forward(s.key, new Float32Array((to - from) * model.config.dim), from)
    }
    fill(a, 200)
    expect(shard.kvPositionsHeld(a.key)).toBe(256)
    expect(m.reservedTokens).toBe(256 + 2 * KV_INITIAL_POSITIONS)
    // the IP holds 256 + 64 of its 400: b may grow to 128 (64 more), not to 256 (192 more)
    expect(() => m.checkGrowth(b, 200)).toThrow(/per-IP share/)
    expect(shard.kvPositionsHeld(b.key)).toBe(KV_INITIAL_POSITIONS) // a refused growth holds nothing more
    fill(b, 100)
    // the node's whole KV: c (loopback, no share) grows to what is free, no further
    fill(c, 256)
    expect(m.freeCacheTokens).toBe(800 - 256 - 128 - 256)
    expect(() => m.checkGrowth(c, 300)).toThrow(/KV is full/)
    expect(() => m.checkGrowth(c, 300)).toThrow(BusyError)
  })

  it('frees a session that took no step within firstStepTimeoutMs, keeps one that did', () => {
    const { m, open, tick } = setup()
    const idle = open('a', '/ip4/203.0.113.7/tcp/1')
    const used = open('a', '/ip4/203.0.113.7/tcp/1')
    m.used(used)
    tick(1_999)
    expect(m.sweep()).toBe(0)
    tick(1)
    expect(m.sweep()).toBe(1)
    expect(m.isOpen(idle)).toBe(false)
    expect(m.isOpen(used)).toBe(true)
  })

  it("frees an owner's unused sessions orphanTimeoutMs after its last connection closed, unless it came back", () => {
    const { m, open, tick } = setup()
    const s = open('a', undefined)
    const t = open('b', undefined)
    m.used(s)
    m.used(t)
    m.ownerGone('a')
    m.ownerGone('b')
    tick(500)
    m.ownerBack('b')
    m.used(s) // a chained step from upstream still uses it: counted from then
    tick(999)
    expect(m.sweep()).toBe(0)
    tick(1)
    expect(m.sweep()).toBe(1)
    expect(m.isOpen(s)).toBe(false)
    expect(m.isOpen(t)).toBe(true)
  })
})
