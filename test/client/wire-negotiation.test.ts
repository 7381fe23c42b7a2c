import { describe, expect, it } from 'vitest'
import { InvalidWireError, NoRouteError, UnsupportedWireError } from '../../client/errors.js'

import { WireLedger } from '../../client/session/wire-ledger.js'
import {
  negotiateWire,
  parseWireList,
  parseWirePreference,
  pickWire,
  planWireRoute,
  type WireCandidate
} from '../../client/session/wire-negotiation.js'
import { type DType, dtypeFromName } from '../../protocol/index.js'

const peer = (peerId: string, start: number, end: number, wireDtypes?: DType[], throughput = 100): WireCandidate => ({
  peerId,
  start,
  end,
  rttMs: 1,
  throughput,
  wireDtypes
})

describe('wire dtype names', () => {
  it('q8_0 is the one name; int8 is accepted only where users type a dtype (deprecated), never on the wire', () => {
    expect(parseWirePreference('int8')).toBe('q8_0')
    expect(parseWirePreference('q8_0')).toBe('q8_0')
    expect(parseWirePreference('auto')).toBe('auto')
    expect(parseWirePreference('f16')).toBe('f16')
    expect(dtypeFromName('q8_0')).toBe('q8_0')
    expect(dtypeFromName('int8')).toBeUndefined()
    expect(dtypeFromName('bf16')).toBeUndefined()
    expect(() => parseWirePreference('bf16')).toThrow(InvalidWireError)
  })

  it('a node list is deduplicated, keeps its order and refuses auto and unknown names', () => {
    expect(parseWireList('f16, int8,q8_0')).toEqual(['f16', 'q8_0'])
    expect(() => parseWireList('auto')).toThrow(InvalidWireError)
    expect(() => parseWireList(',')).toThrow(InvalidWireError)
  })
})

describe('per-hop negotiation', () => {
  it('auto prefers f16, then f32, then q8_0', () => {
    expect(pickWire('auto', ['f32', 'f16', 'q8_0'])).toBe('f16')
    expect(pickWire('auto', ['q8_0', 'f32'])).toBe('f32')
    expect(pickWire('auto', ['q8_0'])).toBe('q8_0')
    // a peer that announced nothing speaks the proto default
    expect(pickWire('auto', [])).toBe('f32')
    expect(pickWire('f16', [])).toBeUndefined()
  })

  it('relayed, each hop gets its own dtype; an explicit dtype a hop lacks is a typed error', () => {
    const hops = [
      { peerId: 'a', wireDtypes: ['f32', 'f16'] as DType[] },
      { peerId: 'b', wireDtypes: ['f32'] as DType[] }
    ]
    expect(negotiateWire('auto', hops, false)).toEqual(['f16', 'f32'])
    expect(negotiateWire('f32', hops, false)).toEqual(['f32', 'f32'])
    const err = (() => {
      try {
        negotiateWire('f16', hops, false)
      } catch (e) {
        return e as UnsupportedWireError
      }
    })()
    expect(err).toBeInstanceOf(UnsupportedWireError)
    expect(err?.code).toBe('WIRE_UNSUPPORTED')
    expect(err?.message).toMatch(/hop b accepts wire f32, not f16/)
  })

  it('chained, every link shares one dtype all hops accept', () => {
    const hops = [
      { peerId: 'a', wireDtypes: ['f16', 'q8_0'] as DType[] },
      { peerId: 'b', wireDtypes: ['q8_0', 'f32'] as DType[] }
    ]
    expect(negotiateWire('auto', hops, true)).toEqual(['q8_0', 'q8_0'])
    expect(() =>
      negotiateWire(
        'auto',
        [
          { peerId: 'a', wireDtypes: ['f16'] },
          { peerId: 'b', wireDtypes: ['f32'] }
        ],
        true
      )
    ).toThrow(UnsupportedWireError)
    // one hop is a chain of one: its own choice
    expect(negotiateWire('auto', [{ peerId: 'a', wireDtypes: ['f16'] }], true)).toEqual(['f16'])
  })
})

describe('routes that respect wire dtypes', () => {
  it('an explicit dtype routes around peers that do not accept it', () => {
    const fast = peer('fast', 0, 4, ['f32'], 1000)
    const slow = peer('slow', 0, 4, ['f32', 'f16'], 10)
    expect(planWireRoute([fast, slow], 0, 4, 'f32', false).map((h) => [h.peerId, h.wireDtype])).toEqual([['fast', 'f32']])
    expect(planWireRoute([fast, slow], 0, 4, 'f16', false).map((h) => [h.peerId, h.wireDtype])).toEqual([['slow', 'f16']])
    expect(planWireRoute([fast, slow], 0, 4, 'auto', false).map((h) => [h.peerId, h.wireDtype])).toEqual([['fast', 'f32']])
  })

  it('says the dtype is missing when peers cover the span, and that nobody serves it when they do not', () => {
    const only = [peer('a', 0, 2, ['f32', 'f16']), peer('b', 2, 4, ['f32'])]
    expect(() => planWireRoute(only, 0, 4, 'f16', false)).toThrow(/accepts wire f16: b \[2, 4\) accepts f32/)
    expect(() => planWireRoute(only, 0, 4, 'f16', false)).toThrow(UnsupportedWireError)
    const gap = [peer('a', 0, 2, ['f32'])]
    const err = (() => {
      try {
        planWireRoute(gap, 0, 4, 'f32', false)
      } catch (e) {
        return e as Error
      }
    })()
    expect(err).toBeInstanceOf(NoRouteError)
    expect(err).not.toBeInstanceOf(UnsupportedWireError)
  })

  it('chained auto falls back to a route whose hops share a dtype', () => {
    // the fastest chain (a f16-only → b f32-only) shares nothing; c+d share f32
    const cands = [
      peer('a', 0, 2, ['f16'], 1000),
      peer('b', 2, 4, ['f32'], 1000),
      peer('c', 0, 2, ['f32'], 10),
      peer('d', 2, 4, ['f32', 'f16'], 10)
    ]
    const route = planWireRoute(cands, 0, 4, 'auto', true)
    expect(new Set(route.map((h) => h.wireDtype)).size).toBe(1)
    expect(route.map((h) => h.start)).toEqual([0, 2])
    expect(
      negotiateWire(
        'auto',
        route.map((h) => cands.find((c) => c.peerId === h.peerId)!),
        true
      )
    ).toEqual(route.map((h) => h.wireDtype))
  })
})

describe('wire ledger', () => {
  it('counts each transfer once, per hop, and positions at the first remote block', () => {
    const a = { peerId: 'a', start: 1, end: 3 }
    const b = { peerId: 'b', start: 3, end: 4 }
    const ledger = new WireLedger(1, 'auto')
    // relayed, 5 prompt rows then 1: client → a → client → b → client
    for (const rows of [5, 1]) {
      ledger.transfer(undefined, a, 'f16', rows * 128, rows)
      ledger.transfer(a, undefined, 'f16', rows * 128, rows)
      ledger.transfer(undefined, b, 'f32', rows * 256, rows)
      ledger.transfer(b, undefined, 'f32', rows * 256, rows)
    }
    const r = ledger.report()
    expect(r.positions).toBe(6)
    expect(r.activationBytes).toBe(6 * (2 * 128 + 2 * 256))
    expect(r.bytesPerToken).toBe(768)
    expect(r.hops).toEqual([
      { peerId: 'a', start: 1, end: 3, wireDtype: 'f16', bytesIn: 768, bytesOut: 768 },
      { peerId: 'b', start: 3, end: 4, wireDtype: 'f32', bytesIn: 1536, bytesOut: 1536 }
    ])
    expect(new WireLedger(1, 'q8_0').report().requested).toBe('q8_0')
  })
})
