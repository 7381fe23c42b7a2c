/**
 * Issue #39's session limits in the SessionManager: per-IP and per-subnet shares of sessions and
 * KV (fresh peer ids from one address share one), sessions that never took a step freed after
 * firstStepTimeoutMs, and unused sessions of an owner with no connection freed after orphanTimeoutMs.
 */
import { describe, expect, it } from 'vitest'
import { SessionManager } from '../../node/daemon/session-manager.js'
import { sourceShares } from '../../node/daemon/swarm-node-init.js'
import { BusyError, peerSource } from '../../protocol/index.js'
import { createShard, openModelFile } from '../../shards/index.js'
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
  return { m, open, tick: (ms: number) => (clock += ms) }
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

  it('holds one IP to half the KV positions, whatever its session count', () => {
    const { open } = setup(8, 800)
    open('a', '/ip4/203.0.113.7/tcp/1', 300)
    expect(() => open('b', '/ip4/203.0.113.7/tcp/1', 101)).toThrow(/KV positions/)
    open('b', '/ip4/203.0.113.7/tcp/1', 100)
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
