/**
 * The exact-size encoders of the snapshot-carrying messages (protocol/bulk-codec.ts) write the
 * same bytes as protobufjs does for the same message, and decode back through the validating codecs.
 */
import { randomBytes } from 'node:crypto'
import { describe, expect, it } from 'vitest'
import { encodeImportKvRequest, encodeSnapshotResponse } from '../../protocol/bulk-codec.js'
import { decodeSessionRequest, decodeSessionResponse, encodeSessionRequest, encodeSessionResponse } from '../../protocol/index.js'
import { encodeWire } from '../../protocol/messages.js'
import { schema } from '../../protocol/schema.js'

const bytes = (n: number) => new Uint8Array(randomBytes(n))
/** Big byte arrays compared as buffers (a deep toEqual walks them element by element). */
const same = (a: Uint8Array, b: Uint8Array) =>
  Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength))

describe('bulk codec for sealed KV messages', () => {
  for (const append of [false, true]) {
    it(`ImportKv request (append ${append}): protobufjs bytes, decodes to the same request`, () => {
      const importKv = {
        sessionId: 'session-x-1.2',
        wrappedKey: bytes(101),
        snapshots: [bytes(300_000), bytes(5), bytes(70)],
        snapshotSessionId: 'session-x-1.1',
        prefixHash: bytes(32),
        ...(append ? { append: true } : {})
      }
      for (const requestId of [1, 127, 128, 300, 2 ** 40 + 3]) {
        const fast = encodeImportKvRequest(requestId, importKv)
        expect(same(fast, encodeWire(schema.SessionRequest, { requestId, importKv }))).toBe(true)
        expect(same(encodeSessionRequest({ requestId, type: 'importKv', importKv }), fast)).toBe(true)
        const back = decodeSessionRequest(fast)
        if (back.type !== 'importKv') throw new Error(`decoded a ${back.type}`)
        const { snapshots, ...rest } = back.importKv
        expect({ ...rest, requestId: back.requestId }).toEqual({ ...importKv, snapshots: undefined, requestId })
        expect(snapshots.map((b, i) => same(b, importKv.snapshots[i]))).toEqual([true, true, true])
      }
    })
  }

  it('KvSnapshot response: protobufjs bytes, decodes to the same response', () => {
    const snapshot = { sessionId: 's.1', snapshot: bytes(1 << 20) }
    for (const requestId of [1, 200, 2 ** 35]) {
      const fast = encodeSnapshotResponse(requestId, snapshot)
      expect(same(fast, encodeWire(schema.SessionResponse, { requestId, snapshot }))).toBe(true)
      expect(same(encodeSessionResponse({ requestId, type: 'snapshot', snapshot }), fast)).toBe(true)
      const back = decodeSessionResponse(fast)
      if (back.type !== 'snapshot') throw new Error(`decoded a ${back.type}`)
      expect([back.requestId, back.snapshot.sessionId, same(back.snapshot.snapshot, snapshot.snapshot)]).toEqual([
        requestId,
        's.1',
        true
      ])
    }
  })
})
