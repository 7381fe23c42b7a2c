import { describe, expect, it } from 'vitest'
import {
  deriveHopKeys,
  HeadMisboundError,
  HeadReplayError,
  HeadTamperedError,
  headReplyKey,
  openHeadReply,
  sealHeadReply
} from '../../crypto/index.js'

// Issue #35 tamper evidence: a sealed head reply opens only for the step, position, rows,
// session and hop it was sealed for; a flipped bit anywhere, a replay and a reply for another
// position are each refused with a code (real AES-256-GCM, keys derived as a session derives them).

const keys = deriveHopKeys({
  sharedSecret: new Uint8Array(32).fill(7),
  sessionId: 's1',
  span: [3, 5],
  clientPeerId: 'client',
  hopPeerId: 'hop'
})
const binding = { sessionId: 's1', hopPeerId: 'hop', stepId: 4, position: 17, rows: 1 }
const plaintext = Uint8Array.from({ length: 100 }, (_, i) => i)

describe('sealed head replies', () => {
  it('open to the plaintext for the step they were sealed for', () => {
    const sealed = sealHeadReply(headReplyKey(keys), binding, plaintext)
    expect(openHeadReply(headReplyKey(keys), binding, sealed)).toEqual(plaintext)
  })

  it('refuse a flipped bit anywhere (header, nonce, ciphertext, tag) as HEAD_* and never return plaintext', () => {
    const sealed = sealHeadReply(headReplyKey(keys), binding, plaintext)
    for (let byte = 0; byte < sealed.length; byte++) {
      const bad = Uint8Array.from(sealed)
      bad[byte] ^= 1 << (byte % 8)
      let code = ''
      try {
        openHeadReply(headReplyKey(keys), binding, bad)
      } catch (err) {
        code = (err as { code: string }).code
      }
      // a flip in the clear step id / position / rows reads as another step or position first
      expect(['HEAD_TAMPERED', 'HEAD_REPLAY', 'HEAD_MISBOUND'], `byte ${byte}`).toContain(code)
      if (byte >= 20) expect(code, `byte ${byte}`).toBe('HEAD_TAMPERED')
    }
  })

  it('refuse a replayed reply (an earlier step) with HEAD_REPLAY', () => {
    const old = sealHeadReply(headReplyKey(keys), { ...binding, stepId: 3 }, plaintext)
    expect(() => openHeadReply(headReplyKey(keys), binding, old)).toThrow(HeadReplayError)
  })

  it('refuse a reply for another position or row count with HEAD_MISBOUND', () => {
    const other = sealHeadReply(headReplyKey(keys), { ...binding, position: 18 }, plaintext)
    expect(() => openHeadReply(headReplyKey(keys), binding, other)).toThrow(HeadMisboundError)
    const rows = sealHeadReply(headReplyKey(keys), { ...binding, rows: 2 }, plaintext)
    expect(() => openHeadReply(headReplyKey(keys), binding, rows)).toThrow(HeadMisboundError)
  })

  it('refuse a header rewritten to the expected step and position (the AAD binds it) with HEAD_TAMPERED', () => {
    const other = sealHeadReply(headReplyKey(keys), { ...binding, stepId: 3, position: 16 }, plaintext)
    const forged = Uint8Array.from(other)
    const dv = new DataView(forged.buffer)
    dv.setBigUint64(4, 4n)
    dv.setUint32(12, 17)
    expect(() => openHeadReply(headReplyKey(keys), binding, forged)).toThrow(HeadTamperedError)
  })

  it('refuse a reply of another session or another hop, and a truncated one, with HEAD_TAMPERED', () => {
    const sealed = sealHeadReply(headReplyKey(keys), binding, plaintext)
    expect(() => openHeadReply(headReplyKey(keys), { ...binding, sessionId: 's2' }, sealed)).toThrow(HeadTamperedError)
    expect(() => openHeadReply(headReplyKey(keys), { ...binding, hopPeerId: 'other' }, sealed)).toThrow(HeadTamperedError)
    expect(() => openHeadReply(headReplyKey(keys), binding, sealed.subarray(0, 30))).toThrow(HeadTamperedError)
    const otherKeys = deriveHopKeys({
      sharedSecret: new Uint8Array(32).fill(8),
      sessionId: 's1',
      span: [3, 5],
      clientPeerId: 'client',
      hopPeerId: 'hop'
    })
    expect(() => openHeadReply(headReplyKey(otherKeys), binding, sealed)).toThrow(HeadTamperedError)
  })
})
