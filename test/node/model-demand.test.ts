import { describe, expect, it } from 'vitest'
import { type ModelSupply, rankModelsByDemand } from '../../node/daemon/index.js'
import { DemandMeter } from '../../node/daemon/placement/demand-meter.js'
import { announcementContent } from '../../node/daemon/swarm-node-init.js'
import { type Announcement, decodeAnnouncement, encodeAnnouncement, MalformedMessageError } from '../../protocol/index.js'

// Issue 33 item 3: `join --model-id auto` picks the model by demand against supply
// (node/daemon/placement/model-demand.ts); nodes announce their content id and the demand they see.

const id = (c: string): string => `lsw1-${c.repeat(64)}`
const peer = (start: number, end: number, throughput: number, demand = 0) => ({
  start,
  end,
  throughput,
  demandTokensPerMinute: demand
})
const model = (c: string, nBlocks: number, peers: ModelSupply['peers']): ModelSupply => ({
  contentId: id(c),
  modelId: `lsm1-${c}`,
  nBlocks,
  peers
})

describe('which model a joiner serves', () => {
  it('a model with a block nobody serves comes before any whole one, however busy', () => {
    const whole = model('a', 4, [peer(0, 4, 10, 100_000)])
    const gap = model('b', 4, [peer(0, 3, 10)])
    expect(rankModelsByDemand([whole, gap]).map((r) => r.contentId)).toEqual([id('b'), id('a')])
  })

  it('among models with gaps: more demand first, else the smaller share served', () => {
    const fewServed = model('a', 5, [peer(1, 2, 10)])
    const moreServed = model('b', 5, [peer(1, 4, 10, 0)])
    expect(rankModelsByDemand([moreServed, fewServed])[0].contentId).toBe(id('a'))
    const asked = model('b', 5, [peer(1, 4, 10, 600)])
    expect(rankModelsByDemand([fewServed, asked])[0].contentId).toBe(id('b'))
  })

  it('among whole models: the one whose demand most outruns its bottleneck', () => {
    // a: 600 tokens/min (10/s) on a 2 tokens/s bottleneck (5×); b: 60/min (1/s) on 0.5 tokens/s (2×)
    const a = model('a', 2, [peer(0, 1, 2, 600), peer(1, 2, 50, 600)])
    const b = model('b', 2, [peer(0, 2, 0.5, 60)])
    const [first, second] = rankModelsByDemand([a, b])
    expect(first.contentId).toBe(id('a'))
    expect(first.bottleneck).toBe(2)
    expect(first.pressure).toBeCloseTo(601 / 60 / 2)
    expect(second.pressure).toBeCloseTo(61 / 60 / 0.5)
    // no demand anywhere: the least served model (smallest bottleneck) first
    const idle = rankModelsByDemand([model('a', 2, [peer(0, 2, 5)]), model('b', 2, [peer(0, 2, 1)])])
    expect(idle[0].contentId).toBe(id('b'))
    // replicas add supply: two peers of 1 token/s on a block are a bottleneck of 2
    expect(rankModelsByDemand([model('c', 1, [peer(0, 1, 1), peer(0, 1, 1)])])[0].bottleneck).toBe(2)
  })

  it('the same swarm gives every joiner the same choice (ties by content id)', () => {
    const x = model('c', 2, [peer(0, 2, 1)])
    const y = model('d', 2, [peer(0, 2, 1)])
    expect(rankModelsByDemand([y, x])[0].contentId).toBe(id('c'))
    expect(rankModelsByDemand([x, y])[0].contentId).toBe(id('c'))
  })
})

describe('the demand a node announces', () => {
  it('counts tokens asked over the last minute only', () => {
    const m = new DemandMeter()
    m.add(10, 0)
    m.add(5, 30_000)
    expect(m.perMinute(30_000)).toBe(15)
    expect(m.perMinute(62_000)).toBe(5)
    expect(m.perMinute(200_000)).toBe(0)
  })

  const a: Announcement = {
    peerId: '12D3KooWexample',
    modelId: 'model-1',
    start: 0,
    end: 4,
    throughput: 10,
    freeCacheTokens: 512,
    wireDtypes: ['f32'],
    version: '1',
    addrs: ['/ip4/127.0.0.1/tcp/1'],
    issuedAtMs: 1_000,
    expiresAtMs: 2_000
  }

  it('content id and demand round-trip; a malformed content id is refused', () => {
    const full = { ...a, contentId: id('e'), demandTokensPerMinute: 1234 }
    expect(decodeAnnouncement(encodeAnnouncement(full))).toEqual(full)
    expect(decodeAnnouncement(encodeAnnouncement(a))).toEqual(a)
    expect(() => encodeAnnouncement({ ...a, contentId: 'lsm1-abc' })).toThrow(MalformedMessageError)
  })

  it('a node announces its info less the info-only fields, with its content id and demand', () => {
    const c = announcementContent(
      {
        modelId: 'model-1',
        version: '1',
        nLayers: 8,
        dim: 64,
        start: 2,
        end: 6,
        throughput: 42,
        freeCacheTokens: 1000,
        maxSessions: 4,
        activeSessions: 3,
        wireDtypes: ['f32'],
        x25519PublicKey: new Uint8Array(0),
        openProofBits: 0
      },
      id('f'),
      7
    )
    expect(c).not.toHaveProperty('nLayers')
    expect(c).not.toHaveProperty('activeSessions')
    expect(c).toMatchObject({ modelId: 'model-1', start: 2, end: 6, contentId: id('f'), demandTokensPerMinute: 7 })
  })
})
