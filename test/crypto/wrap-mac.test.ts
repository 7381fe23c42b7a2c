import { describe, expect, it } from 'vitest'
import {
  assertStepAuthorized,
  chainedStepBinding,
  controlTag,
  deriveHopKeys,
  generateX25519KeyPair,
  KeyNotForUsError,
  KeyUnwrapError,
  randomKey,
  sha256,
  stepTag,
  UnauthorizedStepError,
  unwrapKey,
  unwrapKeyUnder,
  verifyControlTag,
  verifyStepTag,
  WRAPPED_KEY_BYTES,
  wrapKey,
  wrapKeyUnder,
  x25519SharedSecret
} from '../../crypto/index.js'

describe('snapshot-key wrapping to an importing peer', () => {
  const peerB = generateX25519KeyPair()
  const peerC = generateX25519KeyPair()
  const ctx = { recipientPeerId: '12D3KooWpeerB', sessionId: 'sess-1', span: [2, 4] as const }

  it('the addressed peer unwraps the key; each wrap is fresh', () => {
    const key = randomKey()
    const w = wrapKey(key, peerB.publicKey, ctx)
    expect(w.length).toBe(WRAPPED_KEY_BYTES)
    expect(unwrapKey(w, peerB.secretKey, ctx)).toEqual(key)
    expect(wrapKey(key, peerB.publicKey, ctx)).not.toEqual(w)
  })
  it('refuses: key wrapped for another peer (KeyNotForUsError)', () => {
    const w = wrapKey(randomKey(), peerB.publicKey, ctx)
    expect(() => unwrapKey(w, peerC.secretKey, { ...ctx, recipientPeerId: '12D3KooWpeerC' })).toThrow(KeyNotForUsError)
    expect(() => unwrapKey(w, peerC.secretKey, ctx)).toThrow(KeyNotForUsError)
  })
  it('refuses: another session, span or peer id, or an altered byte (KeyUnwrapError)', () => {
    const w = wrapKey(randomKey(), peerB.publicKey, ctx)
    expect(() => unwrapKey(w, peerB.secretKey, { ...ctx, sessionId: 'sess-2' })).toThrow(KeyUnwrapError)
    expect(() => unwrapKey(w, peerB.secretKey, { ...ctx, span: [2, 5] })).toThrow(KeyUnwrapError)
    expect(() => unwrapKey(w, peerB.secretKey, { ...ctx, recipientPeerId: '12D3KooWpeerX' })).toThrow(KeyUnwrapError)
    for (const i of [0, 9, 40, 45, 60, WRAPPED_KEY_BYTES - 1]) {
      const bad = w.slice()
      bad[i] ^= 1
      expect(() => unwrapKey(bad, peerB.secretKey, ctx)).toThrow(KeyUnwrapError)
    }
    expect(() => unwrapKey(w.subarray(0, 90), peerB.secretKey, ctx)).toThrow(KeyUnwrapError)
  })
  it('wrapKeyUnder: the hop key path round-trips and refuses other contexts', () => {
    const kek = randomKey()
    const key = randomKey()
    const w = wrapKeyUnder(kek, key, ctx)
    expect(unwrapKeyUnder(kek, w, ctx)).toEqual(key)
    expect(() => unwrapKeyUnder(randomKey(), w, ctx)).toThrow(KeyUnwrapError)
    expect(() => unwrapKeyUnder(kek, w, { ...ctx, sessionId: 'other' })).toThrow(KeyUnwrapError)
  })
})

describe('step authorization in chained forwarding', () => {
  const client = generateX25519KeyPair()
  const hop = generateX25519KeyPair()
  const ctx = { sessionId: 'sess-1', span: [2, 4] as const, clientPeerId: '12D3KooWclient', hopPeerId: '12D3KooWhop' }
  const clientKeys = deriveHopKeys({ ...ctx, sharedSecret: x25519SharedSecret(client.secretKey, hop.publicKey) })
  const hopKeys = deriveHopKeys({ ...ctx, sharedSecret: x25519SharedSecret(hop.secretKey, client.publicKey) })
  const input = new Uint8Array(256).map((_, i) => i)
  const step = { sessionId: 'sess-1', stepId: 7, startPosition: 12, inputHash: sha256(input) }

  it('a step the client authorized verifies at the hop', () => {
    const tag = stepTag(clientKeys.stepMacKey, step)
    expect(tag.length).toBe(32)
    expect(verifyStepTag(hopKeys.stepMacKey, step, tag)).toBe(true)
    expect(() => assertStepAuthorized(hopKeys.stepMacKey, step, tag)).not.toThrow()
  })
  it('refuses unauthorized steps: bad MAC, missing tag, other fields, other hop key', () => {
    const tag = stepTag(clientKeys.stepMacKey, step)
    const bad = tag.slice()
    bad[31] ^= 1
    expect(verifyStepTag(hopKeys.stepMacKey, step, bad)).toBe(false)
    expect(() => assertStepAuthorized(hopKeys.stepMacKey, step, bad)).toThrow(UnauthorizedStepError)
    expect(() => assertStepAuthorized(hopKeys.stepMacKey, step, undefined)).toThrow(UnauthorizedStepError)
    expect(verifyStepTag(hopKeys.stepMacKey, step, tag.subarray(0, 16))).toBe(false)
    const altered = input.slice()
    altered[0] ^= 1
    for (const f of [{ stepId: 8 }, { startPosition: 11 }, { sessionId: 'sess-2' }, { inputHash: sha256(altered) }]) {
      expect(verifyStepTag(hopKeys.stepMacKey, { ...step, ...f }, tag)).toBe(false)
    }
    // A previous hop (which has its own key, not this hop's) cannot forge one.
    expect(verifyStepTag(hopKeys.stepMacKey, step, stepTag(hopKeys.controlMacKey, step))).toBe(false)
  })
  it('control tags bind op, counter and arguments', () => {
    const f = { sessionId: 'sess-1', op: 'rewind' as const, counter: 3, args: Uint8Array.of(0, 0, 0, 9) }
    const tag = controlTag(clientKeys.controlMacKey, f)
    expect(verifyControlTag(hopKeys.controlMacKey, f, tag)).toBe(true)
    expect(verifyControlTag(hopKeys.controlMacKey, { ...f, op: 'close' }, tag)).toBe(false)
    expect(verifyControlTag(hopKeys.controlMacKey, { ...f, counter: 4 }, tag)).toBe(false)
    expect(verifyControlTag(hopKeys.controlMacKey, { ...f, args: Uint8Array.of(0, 0, 0, 8) }, tag)).toBe(false)
  })

  it("chainedStepBinding binds the row count and the client's input hash (issue #17)", () => {
    const input = sha256(Uint8Array.of(1, 2, 3))
    const other = sha256(Uint8Array.of(1, 2, 4))
    const b = chainedStepBinding(2, input)
    expect(b.length).toBe(32)
    expect(Buffer.from(chainedStepBinding(2, input)).equals(Buffer.from(b))).toBe(true)
    expect(Buffer.from(chainedStepBinding(3, input)).equals(Buffer.from(b))).toBe(false)
    expect(Buffer.from(chainedStepBinding(2, other)).equals(Buffer.from(b))).toBe(false)
    expect(() => chainedStepBinding(2, new Uint8Array(31))).toThrow()
    expect(() => chainedStepBinding(-1, input)).toThrow()
  })
})
