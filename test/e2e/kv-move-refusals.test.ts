/**
 * Issue #41 item 4: a destination node process refuses KV a source sends it without a valid
 * grant, one coded error each, and stores nothing: missing, expired, replayed, foreign (another
 * destination, or a sender that is not the granted source), wrong span, forged, tampered seal.
 * A source refused KV_SOURCE_REFUSALS times is limited (KV_SOURCE_LIMITED) even with a good grant.
 * Real parts: the node is a `layerswarm node start` process, the client and the sources are
 * libp2p hosts here (TCP, Noise, yamux), the seals real AES-GCM under a key wrapped for the node.
 */
import { randomBytes } from 'node:crypto'
import { generateKeyPair } from '@libp2p/crypto/keys'
import type { PrivateKey } from '@libp2p/interface'
import { multiaddr } from '@multiformats/multiaddr'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { wrapFor } from '../../client/recovery/snapshots.js'
import { HopSession } from '../../client/session/hop.js'
import { randomKey, sealSnapshot } from '../../crypto/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import {
  createHost,
  createMessageChannel,
  decodeKvMoveResponse,
  encodeKvMoveRequest,
  type Host,
  KV_HOLD_NO_KEY,
  KV_HOLD_SESSION_ID,
  KV_MOVE_PROTOCOL,
  type KvGrantFields,
  type KvMoveResponse,
  signKvGrant,
  verifyKvReceipt,
  wrappedKeyHash
} from '../../protocol/index.js'
import { GGUF_PATH } from '../helpers/reference.js'

const SPAN = [1, 4] as const
const KV_BYTES_PER_POSITION = 768 // stories260K blocks [1, 4): 3 blocks, keys and values, kv dim 32, f32

describe('KV moved node to node: the destination refuses what the client did not grant', () => {
  let node: LocalNode
  let client: Host
  let clientKey: PrivateKey
  const sources: Host[] = []

  beforeAll(async () => {
    node = await startLocalNode({ model: GGUF_PATH, layers: `${SPAN[0]}:${SPAN[1]}`, args: ['--kernels', 'reference'] })
    clientKey = await generateKeyPair('Ed25519')
    client = await createHost({ listen: [], pubsub: false, privateKey: clientKey })
  })
  afterAll(async () => {
    await Promise.all([client, ...sources].map((h) => h.stop()))
    await node.stop()
  })

  /** A fresh source (its own peer id: refusals count per source) and a fresh destination session of the client. */
  async function setup(positions = 4) {
    const source = await createHost({ listen: [], pubsub: false })
    sources.push(source)
    const target = { peerId: node.peerId, start: SPAN[0], end: SPAN[1], addrs: node.addrs }
    const dest = await HopSession.open(client, target, 64, {
      sessionId: randomBytes(16).toString('hex'),
      modelId: node.modelId,
      maxLength: 64,
      wireDtype: 'f32'
    })
    const snapshotKey = randomKey()
    const wrappedKey = wrapFor(dest, snapshotKey)
    const prefixHash = new Uint8Array(randomBytes(32))
    const sourceSessionId = 'live-session'
    const fields: KvGrantFields = {
      grantId: new Uint8Array(randomBytes(16)),
      clientPeerId: client.peerId.toString(),
      sourcePeerId: source.peerId.toString(),
      destinationPeerId: node.peerId,
      modelId: node.modelId,
      sourceSessionId,
      destinationSessionId: dest.sessionId,
      start: SPAN[0],
      end: SPAN[1],
      fromPosition: 0,
      toPosition: positions,
      prefixHash,
      expiresAtMs: Date.now() + 30_000,
      wrappedKeyHash: wrappedKeyHash(wrappedKey)
    }
    const seal = () =>
      sealSnapshot({
        key: snapshotKey,
        header: {
          modelId: node.modelId,
          sessionId: sourceSessionId,
          span: SPAN,
          tokenRange: [0, positions],
          prefixHash,
          sequence: 1,
          clientId: client.peerId.toString(),
          kind: 'full',
          dtype: 'f32'
        },
        payload: new Uint8Array(randomBytes(positions * KV_BYTES_PER_POSITION))
      })
    return { source, dest, wrappedKey, prefixHash, fields, seal }
  }

  /** The source's stream to the node: the grant frame, then the sealed frames; the node's reply. */
  async function send(
    from: Host,
    first: { grant?: Awaited<ReturnType<typeof signKvGrant>>; wrappedKey?: Uint8Array; prefixHash: Uint8Array },
    snapshots: Uint8Array[]
  ): Promise<KvMoveResponse> {
    const stream = await from.dialProtocol(
      node.addrs.map((a) => multiaddr(a)),
      KV_MOVE_PROTOCOL
    )
    const channel = createMessageChannel(stream)
    await channel.write(
      encodeKvMoveRequest({ type: 'transfer', transfer: { ...first, snapshots: first.grant ? [] : snapshots } })
    )
    const reply = channel.read()
    reply.catch(() => {})
    if (first.grant)
      await channel
        .write(encodeKvMoveRequest({ type: 'transfer', transfer: { snapshots, prefixHash: first.prefixHash } }))
        .catch(() => {})
    await channel.close().catch(() => {})
    return decodeKvMoveResponse((await reply)!)
  }

  const code = (r: KvMoveResponse) => (r.type === 'error' ? r.error.code : 'RECEIPT')

  /** After a refusal the session holds nothing: a good grant from position 0 is still accepted. */
  async function storesNothing(s: Awaited<ReturnType<typeof setup>>): Promise<void> {
    const source = await createHost({ listen: [], pubsub: false })
    sources.push(source)
    const grant = await signKvGrant(
      { ...s.fields, grantId: new Uint8Array(randomBytes(16)), sourcePeerId: source.peerId.toString() },
      clientKey
    )
    const r = await send(source, { grant, wrappedKey: s.wrappedKey, prefixHash: s.prefixHash }, [s.seal()])
    expect(r.type === 'receipt' && r.receipt.length).toBe(4)
  }

  it('a valid grant is accepted: the node signs a receipt for exactly the granted positions', async () => {
    const s = await setup()
    const grant = await signKvGrant(s.fields, clientKey)
    const r = await send(s.source, { grant, wrappedKey: s.wrappedKey, prefixHash: s.prefixHash }, [s.seal()])
    expect(r.type).toBe('receipt')
    if (r.type !== 'receipt') return
    expect(r.receipt).toMatchObject({
      destinationPeerId: node.peerId,
      destinationSessionId: s.dest.sessionId,
      length: 4,
      sequence: 1
    })
    expect(await verifyKvReceipt(r.receipt)).toBe(true)
  })

  it('a hold (item 3): a kv-hold grant is kept unopened with a receipt; a range not continuing it is KV_GRANT_WRONG_SPAN', async () => {
    const s = await setup()
    const fields = { ...s.fields, destinationSessionId: KV_HOLD_SESSION_ID, wrappedKeyHash: wrappedKeyHash(KV_HOLD_NO_KEY) }
    const first = { wrappedKey: KV_HOLD_NO_KEY, prefixHash: s.prefixHash }
    const r = await send(s.source, { ...first, grant: await signKvGrant(fields, clientKey) }, [s.seal()])
    expect(r.type === 'receipt' && r.receipt).toMatchObject({ destinationSessionId: KV_HOLD_SESSION_ID, length: 4, sequence: 1 })
    const gap = { ...fields, grantId: new Uint8Array(randomBytes(16)), fromPosition: 2, toPosition: 6 }
    expect(code(await send(s.source, { ...first, grant: await signKvGrant(gap, clientKey) }, [s.seal()]))).toBe(
      'KV_GRANT_WRONG_SPAN'
    )
  })

  it('missing grant: KV_GRANT_MISSING, nothing stored', async () => {
    const s = await setup()
    expect(code(await send(s.source, { prefixHash: s.prefixHash }, [s.seal()]))).toBe('KV_GRANT_MISSING')
    await storesNothing(s)
  })

  it('expired grant: KV_GRANT_EXPIRED, and so is one valid for longer than a grant may be', async () => {
    const s = await setup()
    const past = await signKvGrant({ ...s.fields, expiresAtMs: Date.now() - 1000 }, clientKey)
    expect(code(await send(s.source, { grant: past, wrappedKey: s.wrappedKey, prefixHash: s.prefixHash }, [s.seal()]))).toBe(
      'KV_GRANT_EXPIRED'
    )
    const far = await signKvGrant(
      { ...s.fields, grantId: new Uint8Array(randomBytes(16)), expiresAtMs: Date.now() + 3_600_000 },
      clientKey
    )
    expect(code(await send(s.source, { grant: far, wrappedKey: s.wrappedKey, prefixHash: s.prefixHash }, [s.seal()]))).toBe(
      'KV_GRANT_EXPIRED'
    )
    await storesNothing(s)
  })

  it('replayed grant: the second use of one grant id is KV_GRANT_REPLAYED', async () => {
    const s = await setup()
    const grant = await signKvGrant(s.fields, clientKey)
    expect(code(await send(s.source, { grant, wrappedKey: s.wrappedKey, prefixHash: s.prefixHash }, [s.seal()]))).toBe('RECEIPT')
    expect(code(await send(s.source, { grant, wrappedKey: s.wrappedKey, prefixHash: s.prefixHash }, [s.seal()]))).toBe(
      'KV_GRANT_REPLAYED'
    )
  })

  it('foreign grant: for another destination, or sent by a peer it does not name, is KV_GRANT_FOREIGN', async () => {
    const s = await setup()
    const other = (await createHost({ listen: [], pubsub: false })).peerId.toString()
    const elsewhere = await signKvGrant({ ...s.fields, destinationPeerId: other }, clientKey)
    expect(code(await send(s.source, { grant: elsewhere, wrappedKey: s.wrappedKey, prefixHash: s.prefixHash }, [s.seal()]))).toBe(
      'KV_GRANT_FOREIGN'
    )
    const notYours = await signKvGrant({ ...s.fields, sourcePeerId: other }, clientKey)
    expect(code(await send(s.source, { grant: notYours, wrappedKey: s.wrappedKey, prefixHash: s.prefixHash }, [s.seal()]))).toBe(
      'KV_GRANT_FOREIGN'
    )
    await storesNothing(s)
  })

  it('wrong span: a grant for other blocks or other positions than the session holds is KV_GRANT_WRONG_SPAN', async () => {
    const s = await setup()
    const blocks = await signKvGrant({ ...s.fields, start: 1, end: 3 }, clientKey)
    expect(code(await send(s.source, { grant: blocks, wrappedKey: s.wrappedKey, prefixHash: s.prefixHash }, [s.seal()]))).toBe(
      'KV_GRANT_WRONG_SPAN'
    )
    const later = await signKvGrant({ ...s.fields, grantId: new Uint8Array(randomBytes(16)), fromPosition: 2 }, clientKey)
    expect(code(await send(s.source, { grant: later, wrappedKey: s.wrappedKey, prefixHash: s.prefixHash }, [s.seal()]))).toBe(
      'KV_GRANT_WRONG_SPAN'
    )
    await storesNothing(s)
  })

  it('forged grant: signed by another key, or carrying another wrapped key, is KV_GRANT_FORGED', async () => {
    const s = await setup()
    const forged = await signKvGrant(s.fields, await generateKeyPair('Ed25519'))
    expect(code(await send(s.source, { grant: forged, wrappedKey: s.wrappedKey, prefixHash: s.prefixHash }, [s.seal()]))).toBe(
      'KV_GRANT_FORGED'
    )
    const grant = await signKvGrant(s.fields, clientKey)
    const otherKey = wrapFor(s.dest, randomKey())
    expect(code(await send(s.source, { grant, wrappedKey: otherKey, prefixHash: s.prefixHash }, [s.seal()]))).toBe(
      'KV_GRANT_FORGED'
    )
  })

  it('tampered seal under a valid grant: SNAPSHOT_TAMPERED, and the session keeps nothing', async () => {
    const s = await setup()
    const grant = await signKvGrant(s.fields, clientKey)
    const sealed = s.seal()
    sealed[sealed.length - 40] ^= 1
    expect(code(await send(s.source, { grant, wrappedKey: s.wrappedKey, prefixHash: s.prefixHash }, [sealed]))).toBe(
      'SNAPSHOT_TAMPERED'
    )
    // the refused session was dropped whole: the node holds no session of that id for the client
    await expect(s.dest.exportKv({ from: 0, to: 1, sequence: 1, prefixHash: s.prefixHash, delta: false })).rejects.toMatchObject({
      code: 'UNKNOWN_SESSION'
    })
  })

  it('a source refused three times is limited: KV_SOURCE_LIMITED, even with a good grant', async () => {
    const s = await setup()
    for (let i = 0; i < 3; i++)
      expect(code(await send(s.source, { prefixHash: s.prefixHash }, [s.seal()]))).toBe('KV_GRANT_MISSING')
    const grant = await signKvGrant(s.fields, clientKey)
    expect(code(await send(s.source, { grant, wrappedKey: s.wrappedKey, prefixHash: s.prefixHash }, [s.seal()]))).toBe(
      'KV_SOURCE_LIMITED'
    )
  })
})
