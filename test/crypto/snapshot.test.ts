import { describe, expect, it } from 'vitest'
import {
  encodeSnapshotHeader,
  InvalidCryptoArgumentError,
  open,
  openSnapshot,
  peekSnapshotHeader,
  randomKey,
  type SnapshotExpectation,
  type SnapshotHeader,
  SnapshotMisboundError,
  SnapshotOrderError,
  SnapshotReplayError,
  SnapshotTamperedError,
  SnapshotVersionError,
  sealedSnapshotSize,
  sealSnapshot,
  tokenPrefixHash
} from '../../crypto/index.js'

const key = randomKey()
const tokens = Array.from({ length: 48 }, (_, i) => (i * 7919) % 32000)
const header: SnapshotHeader = {
  modelId: 'sha256:model-a',
  sessionId: 'sess-1',
  span: [2, 4],
  tokenRange: [0, 48],
  prefixHash: tokenPrefixHash(tokens),
  sequence: 3,
  clientId: '12D3KooWclient',
  kind: 'full',
  dtype: 'f32'
}
const expect0: SnapshotExpectation = {
  modelId: 'sha256:model-a',
  sessionId: 'sess-1',
  span: [2, 4] as const,
  clientId: '12D3KooWclient',
  minSequence: 3
}
const payload = Uint8Array.from({ length: 4099 }, (_, i) => (i * 31) & 0xff)

function refusal(fn: () => unknown): unknown {
  try {
    fn()
  } catch (e) {
    return e
  }
  throw new Error('expected a refusal')
}

describe('sealed KV snapshots', () => {
  it('round-trips, into a reused output buffer too, with the documented layout', () => {
    const sealed = sealSnapshot({ key, header, payload })
    expect(sealed.length).toBe(sealedSnapshotSize(header, payload.length))
    const opened = openSnapshot(sealed, key, { ...expect0, prefixHash: tokenPrefixHash(tokens) })
    expect(opened.payload).toEqual(payload)
    expect(opened.header).toMatchObject({ ...header, payloadBytes: payload.length })
    const out = new Uint8Array(10_000)
    expect(openSnapshot(sealed, key, expect0, out).payload).toEqual(payload)
    const buf = new Uint8Array(sealed.length + 50)
    expect(sealSnapshot({ key, header, payload: [payload.subarray(0, 100), payload.subarray(100)], out: buf }).length).toBe(
      sealed.length
    )

    // magic "LSKV" ‖ version 1 ‖ u32 header length ‖ header (= AAD together with the preamble) ‖ nonce ‖ ct ‖ tag
    const h = encodeSnapshotHeader(header, payload.length)
    expect(Buffer.from(sealed.subarray(0, 4)).toString()).toBe('LSKV')
    expect(sealed[4]).toBe(1)
    expect(new DataView(sealed.buffer, sealed.byteOffset).getUint32(5)).toBe(h.length)
    expect(sealed.subarray(9, 9 + h.length)).toEqual(h)
    const aadEnd = 9 + h.length
    expect(open(key, sealed.subarray(aadEnd, aadEnd + 12), sealed.subarray(aadEnd + 12), sealed.subarray(0, aadEnd))).toEqual(
      payload
    )
    expect(peekSnapshotHeader(sealed).sessionId).toBe('sess-1')
  })

  it('is deterministic for a fixed nonce (regression vector of the header encoding)', () => {
    const nonce = new Uint8Array(12)
    const a = sealSnapshot({ key, header, payload, nonce })
    expect(sealSnapshot({ key, header, payload, nonce })).toEqual(a)
    const h = encodeSnapshotHeader({ ...header, prefixHash: new Uint8Array(32) }, 16)
    expect(Buffer.from(h).toString('hex')).toBe(
      '00' +
        '01' +
        '00000002' +
        '00000004' +
        '00000000' +
        '00000030' +
        '0000000000000003' +
        '0000000000000010' +
        '00'.repeat(32) +
        '0000000e' +
        Buffer.from('sha256:model-a').toString('hex') +
        '00000006' +
        Buffer.from('sess-1').toString('hex') +
        '0000000e' +
        Buffer.from('12D3KooWclient').toString('hex')
    )
  })

  it('refuses a tampered byte anywhere (header, nonce, ciphertext, tag) and returns nothing', () => {
    const sealed = sealSnapshot({ key, header, payload })
    const positions = [
      0,
      4,
      5,
      9,
      10,
      20,
      40,
      60,
      100,
      sealed.length - 4200,
      sealed.length - 2000,
      sealed.length - 17,
      sealed.length - 1
    ]
    for (let i = 9; i < 9 + 120; i += 7) positions.push(i)
    for (const i of positions) {
      const bad = sealed.slice()
      bad[i] ^= 0x01
      const out = new Uint8Array(payload.length).fill(0x55)
      const e = refusal(() => openSnapshot(bad, key, expect0, out))
      expect(e, `byte ${i}`).toBeInstanceOf(SnapshotTamperedError)
      expect(out.every((b) => b === 0 || b === 0x55)).toBe(true)
    }
    const v2 = sealed.slice()
    v2[4] = 2
    expect(refusal(() => openSnapshot(v2, key, expect0))).toBeInstanceOf(SnapshotVersionError)
    // The wrong key is indistinguishable from tampering.
    expect(refusal(() => openSnapshot(sealed, randomKey(), expect0))).toBeInstanceOf(SnapshotTamperedError)
  })

  it('refuses a truncated or extended snapshot', () => {
    const sealed = sealSnapshot({ key, header, payload })
    for (const n of [0, 8, 30, 200, sealed.length - 16, sealed.length - 1]) {
      expect(
        refusal(() => openSnapshot(sealed.subarray(0, n), key, expect0)),
        `length ${n}`
      ).toBeInstanceOf(SnapshotTamperedError)
    }
    const longer = new Uint8Array(sealed.length + 1)
    longer.set(sealed)
    expect(refusal(() => openSnapshot(longer, key, expect0))).toBeInstanceOf(SnapshotTamperedError)
  })

  const misbound: [string, Partial<SnapshotExpectation>][] = [
    ['sessionId', { sessionId: 'sess-2' }],
    ['span', { span: [2, 5] }],
    ['span', { span: [1, 4] }],
    ['modelId', { modelId: 'sha256:model-b' }],
    ['clientId', { clientId: '12D3KooWintruder' }],
    ['prefixHash', { prefixHash: tokenPrefixHash([...tokens.slice(0, 47), 1]) }],
    ['dtype', { dtype: 'f16' }]
  ]
  for (const [field, change] of misbound) {
    it(`refuses an authentic snapshot for another ${field} (${JSON.stringify(change).slice(0, 40)}) and zeroes the output`, () => {
      const sealed = sealSnapshot({ key, header, payload })
      const out = new Uint8Array(payload.length)
      const e = refusal(() => openSnapshot(sealed, key, { ...expect0, ...change }, out))
      expect(e).toBeInstanceOf(SnapshotMisboundError)
      expect((e as SnapshotMisboundError).field).toBe(field)
      expect((e as SnapshotMisboundError).code).toBe('SNAPSHOT_MISBOUND')
      expect(out.every((b) => b === 0)).toBe(true)
    })
  }

  it('refuses a replayed old snapshot (sequence below the minimum)', () => {
    const old = sealSnapshot({ key, header: { ...header, sequence: 2 }, payload })
    const e = refusal(() => openSnapshot(old, key, { ...expect0, minSequence: 3 }))
    expect(e).toBeInstanceOf(SnapshotReplayError)
    expect((e as SnapshotReplayError).code).toBe('SNAPSHOT_REPLAY')
  })

  it('refuses a reordered delta (must start where the last one ended)', () => {
    const delta = sealSnapshot({ key, header: { ...header, kind: 'delta', tokenRange: [56, 64], sequence: 5 }, payload })
    expect(openSnapshot(delta, key, { ...expect0, minSequence: 5, expectedFrom: 56 }).header.tokenRange).toEqual([56, 64])
    const e = refusal(() => openSnapshot(delta, key, { ...expect0, minSequence: 5, expectedFrom: 48 }))
    expect(e).toBeInstanceOf(SnapshotOrderError)
  })

  it('errors carry no key or plaintext bytes', () => {
    const sealed = sealSnapshot({ key, header, payload })
    const e = refusal(() => openSnapshot(sealed, key, { ...expect0, sessionId: 'x' })) as Error
    const keyHex = Buffer.from(key).toString('hex')
    expect(e.message).not.toContain(keyHex.slice(0, 8))
    expect(JSON.stringify({ ...e })).not.toContain(keyHex.slice(0, 8))
  })

  it('validates inputs', () => {
    expect(() => sealSnapshot({ key: new Uint8Array(16), header, payload })).toThrow(InvalidCryptoArgumentError)
    expect(() => sealSnapshot({ key, header: { ...header, tokenRange: [4, 48] }, payload })).toThrow(InvalidCryptoArgumentError)
    expect(() => sealSnapshot({ key, header: { ...header, prefixHash: new Uint8Array(31) }, payload })).toThrow(
      InvalidCryptoArgumentError
    )
    expect(() => sealSnapshot({ key, header: { ...header, dtype: 'q4' as 'f32' }, payload })).toThrow(InvalidCryptoArgumentError)
    expect(() => sealSnapshot({ key, header, payload, out: new Uint8Array(10) })).toThrow(InvalidCryptoArgumentError)
    expect(() => openSnapshot(sealSnapshot({ key, header, payload }), key, { ...expect0, minSequence: -1 })).toThrow(
      InvalidCryptoArgumentError
    )
  })
})
