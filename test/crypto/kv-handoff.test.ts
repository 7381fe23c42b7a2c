import { afterAll, describe, expect, it } from 'vitest'
import {
  generateX25519KeyPair,
  KeyNotForUsError,
  openSnapshot,
  randomKey,
  SnapshotTamperedError,
  sealSnapshot,
  tokenPrefixHash,
  unwrapKey,
  wrapKey
} from '../../crypto/index.js'
import { createShard, openModelFile } from '../../shards/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

// The whole handoff flow in process: peer A exports and seals its span's KV, the client wraps
// the snapshot key to peer B's X25519 key, B unwraps, opens (tag, then bindings) and imports,
// then continues the session with outputs bit-identical to A never having stopped.

describe('sealed KV handoff between two shards', () => {
  const model = openModelFile(GGUF_PATH)
  afterAll(() => model.close())
  const { dim } = model.config
  const input = (T: number, pos: number) => Float32Array.from({ length: T * dim }, (_, i) => Math.sin(i * 0.37 + pos))
  const tokens = [1, 403, 407, 261, 378, 14, 291, 262]

  it('export → seal → wrap → unwrap → open → import → continue', () => {
    const a = createShard({ model, start: 0, end: 3, kvDType: 'f16' })
    const b = createShard({ model, start: 0, end: 3, kvDType: 'f16' })
    const ref = createShard({ model, start: 0, end: 3, kvDType: 'f16' })
    for (const s of [a, b, ref]) s.openSession('sess', { maxLength: 16 })
    ref.forward('sess', input(8, 0), 0)
    const expected = ref.forward('sess', input(1, 8), 8)
    a.forward('sess', input(8, 0), 0)

    const snapshotKey = randomKey()
    const header = {
      modelId: 'stories260K',
      sessionId: 'sess',
      span: [0, 3] as const,
      tokenRange: [0, 8] as const,
      prefixHash: tokenPrefixHash(tokens),
      sequence: 1,
      clientId: '12D3KooWclient',
      kind: 'full' as const,
      dtype: 'f16' as const
    }
    const sealed = sealSnapshot({ key: snapshotKey, header, payload: a.exportKv('sess', 0, 8) })
    a.close() // peer A leaves

    const peerB = generateX25519KeyPair()
    const ctx = { recipientPeerId: '12D3KooWpeerB', sessionId: 'sess', span: [0, 3] as const }
    const wrapped = wrapKey(snapshotKey, peerB.publicKey, ctx)
    expect(() => unwrapKey(wrapped, generateX25519KeyPair().secretKey, ctx)).toThrow(KeyNotForUsError)
    const key = unwrapKey(wrapped, peerB.secretKey, ctx)

    const expectB = {
      modelId: 'stories260K',
      sessionId: 'sess',
      span: [0, 3] as const,
      clientId: '12D3KooWclient',
      minSequence: 1
    }
    const bad = sealed.slice()
    bad[bad.length - 100] ^= 4
    expect(() => openSnapshot(bad, key, expectB)).toThrow(SnapshotTamperedError)
    expect(b.sessionLength('sess')).toBe(0)

    const { payload, header: h } = openSnapshot(sealed, key, { ...expectB, prefixHash: tokenPrefixHash(tokens), dtype: 'f16' })
    b.importKv('sess', h.tokenRange[0], payload, h.dtype)
    expect(b.forward('sess', input(1, 8), 8)).toEqual(expected)
  })
})
