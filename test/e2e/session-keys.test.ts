/**
 * Issue 6 parts 1-3 through the session protocol against one real node process (stories260K,
 * blocks [1, 4)): the node's signed X25519 key, per-session hop keys, step tags in chained
 * mode, and sealed KV export/import with every refusal typed and nothing of a refused import kept.
 */
import { generateKeyPair } from '@libp2p/crypto/keys'
import type { PrivateKey } from '@libp2p/interface'
import { peerIdFromString } from '@libp2p/peer-id'
import { multiaddr } from '@multiformats/multiaddr'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  chainedStepBinding,
  generateX25519KeyPair,
  type HopKeys,
  randomKey,
  sha256,
  stepTag,
  verifyX25519Binding,
  wrapKey
} from '../../crypto/index.js'
import type { LocalNode } from '../../node/cli/local-swarm.js'
import {
  decodeTensor,
  encodeTensor,
  fetchInfo,
  type Host,
  type Receipt,
  type SessionCaller,
  type SessionRequestBody,
  signReceipt
} from '../../protocol/index.js'
import type { Shard } from '../../shards/index.js'
import { keyedSessions } from '../helpers/keyed-session.js'
import { type KeyedSpan, refusedCode, startKeyedSpan } from '../helpers/keyed-span.js'
import { f32Data } from '../helpers/raw-session.js'
import { SPAN } from '../helpers/span-node.js'

const DIM = 64

describe('session keys, step tags and sealed KV through the session protocol', () => {
  let ks: KeyedSpan
  let node: LocalNode
  let client: Host
  let upstream: Host
  let upstreamKey: PrivateKey
  let local: Shard
  let rows: Float32Array
  let nodePub: Uint8Array
  const me = generateX25519KeyPair()
  const dial = (host: Host): Promise<SessionCaller> => ks.dial(host)
  const refused = refusedCode
  const kit = keyedSessions({
    node: () => ({ ...node, x25519PublicKey: nodePub }),
    clientPeerId: () => client.peerId.toString(),
    me,
    span: SPAN,
    dim: DIM
  })
  const keysFor = (sessionId: string): HopKeys => kit.keysFor(sessionId)
  const open = (
    sessionId: string,
    o: { upstream?: string; keyed?: boolean; snapshotKey?: Uint8Array } = {}
  ): SessionRequestBody => kit.open(sessionId, o)
  const input = (from: number, to: number) => rows.subarray(from * DIM, to * DIM)
  const step = (
    sessionId: string,
    stepId: number,
    pos: number,
    x: Float32Array,
    chain = false,
    hopAuth?: Uint8Array[]
  ): SessionRequestBody => kit.step(sessionId, stepId, pos, x, chain, hopAuth)
  const same = (a: Float32Array, b: Float32Array) => Buffer.from(f32Data(a)).equals(Buffer.from(f32Data(b)))

  beforeAll(async () => {
    // the upstream hop signs receipts with a key this test holds
    ks = await startKeyedSpan([1, 403, 407, 261, 5, 77, 300, 42, 9, 31, 12, 88])
    ;({ client, upstream, upstreamKey, nodePub } = ks)
    ;({ node, local, rows } = ks.fx)
  })

  afterAll(async () => {
    await ks?.close()
  })

  it("announces an X25519 key signed by its peer id's key", async () => {
    const { info } = await fetchInfo(
      client,
      node.addrs.map((a) => multiaddr(a))
    )
    expect(info.x25519PublicKey.length).toBe(32)
    const identity = peerIdFromString(node.peerId).publicKey!
    const verify = async (m: Uint8Array, s: Uint8Array) => await identity.verify(m, s)
    expect(await verifyX25519Binding(info.x25519PublicKey, info.x25519Binding!, verify)).toBe(true)
    const other = generateX25519KeyPair().publicKey
    expect(await verifyX25519Binding(other, info.x25519Binding!, verify)).toBe(false)
  })

  it('chained mode: a step from upstream runs only with the client tag for this hop, bound to its rows and the client input', async () => {
    const [owner, ownerWait, up] = [await dial(client), await dial(client), await dial(upstream)]
    const id = 'chain-auth'
    await owner.call(open(id, { upstream: upstream.peerId.toString() }))
    local.openSession(id, { maxLength: 16 })
    const keys = keysFor(id)
    // stands for the SHA-256 of the client's input bytes to the first hop (the upstream here)
    const clientIn = (stepId: number) => sha256(new TextEncoder().encode(`client input of step ${stepId}`))
    const tag = (stepId: number, pos: number, rows = 2, input = clientIn(stepId)) =>
      stepTag(keys.stepMacKey, { sessionId: id, stepId, startPosition: pos, inputHash: chainedStepBinding(rows, input) })
    /** A step as the upstream hop sends it: its signed receipt (client input -> the bytes sent) goes with it. */
    const fromUp = async (
      stepId: number,
      pos: number,
      x: Float32Array,
      hopAuth: Uint8Array[] | undefined,
      o: {
        input?: Uint8Array
        signedFor?: Float32Array
        key?: PrivateKey
        receipts?: Receipt[]
        /** the position and model the upstream's receipt is signed for (default: this step's, the node's) */
        signedAt?: { position?: number; modelId?: string }
      } = {}
    ): Promise<SessionRequestBody> => {
      const body = step(id, stepId, pos, x, true, hopAuth)
      if (body.type !== 'step') throw new Error('not a step')
      const sent = o.signedFor ? encodeTensor(o.signedFor, [o.signedFor.length / DIM, DIM], 'f32').data : body.step.hidden.data
      const fields = {
        sessionId: id,
        stepId,
        position: o.signedAt?.position ?? pos,
        modelId: o.signedAt?.modelId ?? node.modelId,
        start: 0,
        end: SPAN[0],
        inputHash: o.input ?? clientIn(stepId),
        outputHash: sha256(sent)
      }
      const receipt = await signReceipt(fields, upstream.peerId.toString(), o.key ?? upstreamKey)
      return { type: 'step', step: { ...body.step, receipts: o.receipts ?? [receipt] } }
    }
    const x = input(0, 2)
    expect(await refused(up, await fromUp(1, 0, x, undefined))).toBe('UNAUTHORIZED')
    expect(await refused(up, await fromUp(1, 0, x, [randomKey()]))).toBe('UNAUTHORIZED')
    expect(await refused(up, await fromUp(1, 0, x, [tag(2, 0)]))).toBe('UNAUTHORIZED') // another step's tag
    expect(await refused(up, await fromUp(1, 0, x, [tag(1, 1)]))).toBe('UNAUTHORIZED') // another position
    expect(await refused(up, await fromUp(1, 0, x, [tag(1, 0, 1)]))).toBe('UNAUTHORIZED') // another row count
    // the tag of another client input: the upstream cannot reuse a tag with other data
    expect(await refused(up, await fromUp(1, 0, x, [tag(1, 0, 2, clientIn(7))]))).toBe('UNAUTHORIZED')
    expect(await refused(up, await fromUp(1, 0, x, [tag(1, 0)], { receipts: [] }))).toBe('UNAUTHORIZED') // no receipt
    // altered bytes: the upstream signed other bytes than it sent
    expect(await refused(up, await fromUp(1, 0, x, [tag(1, 0)], { signedFor: input(2, 4) }))).toBe('UNAUTHORIZED')
    // issue #39: a receipt signed for another position or another model (receipt v2)
    expect(await refused(up, await fromUp(1, 0, x, [tag(1, 0)], { signedAt: { position: 1 } }))).toBe('UNAUTHORIZED')
    expect(await refused(up, await fromUp(1, 0, x, [tag(1, 0)], { signedAt: { modelId: 'another-model' } }))).toBe('UNAUTHORIZED')
    // a receipt signed by another key (not the upstream's own)
    const stranger = await generateKeyPair('Ed25519')
    expect(await refused(up, await fromUp(1, 0, x, [tag(1, 0)], { key: stranger }))).toBe('UNAUTHORIZED')
    // a tag made under another session's keys
    const otherKeys = keysFor('another-session')
    const foreign = stepTag(otherKeys.stepMacKey, {
      sessionId: id,
      stepId: 1,
      startPosition: 0,
      inputHash: chainedStepBinding(2, clientIn(1))
    })
    expect(await refused(up, await fromUp(1, 0, x, [foreign]))).toBe('UNAUTHORIZED')
    // after every refusal the honest step gives the output of one process
    const waiting = ownerWait.call({ type: 'await', await: { sessionId: id, stepId: 1 } })
    expect(await up.call(await fromUp(1, 0, x, [tag(1, 0)]))).toMatchObject({ type: 'result' })
    const res = await waiting
    if (res.type !== 'result' || !res.result.hidden) throw new Error('await answered without output')
    expect(same(decodeTensor(res.result.hidden), local.forward(id, x, 0))).toBe(true)
    // step ids from upstream must go up: step 2 runs, then step 1's valid tag is a replay (it would rewind the KV)
    expect(await up.call(await fromUp(2, 2, input(2, 3), [tag(2, 2, 1)]))).toMatchObject({ type: 'result' })
    await ownerWait.call({ type: 'await', await: { sessionId: id, stepId: 2 } })
    local.forward(id, input(2, 3), 2)
    expect(await refused(up, await fromUp(1, 0, x, [tag(1, 0)]))).toBe('UNAUTHORIZED')
    // and the replay changed nothing: step 3 continues from position 3 with the bits of one process
    const waiting3 = ownerWait.call({ type: 'await', await: { sessionId: id, stepId: 3 } })
    expect(await up.call(await fromUp(3, 3, input(3, 4), [tag(3, 3, 1)]))).toMatchObject({ type: 'result' })
    const res3 = await waiting3
    if (res3.type !== 'result' || !res3.result.hidden) throw new Error('await answered without output')
    expect(same(decodeTensor(res3.result.hidden), local.forward(id, input(3, 4), 3))).toBe(true)
    // the owner's own steps need no tag
    expect(await owner.call(step(id, 4, 4, input(4, 5)))).toMatchObject({ type: 'result' })
    await owner.call({ type: 'close', close: { sessionId: id } })
    local.closeSession(id)
  })

  it('chained mode: a session opened without a client key refuses every step from upstream', async () => {
    const [owner, up] = [await dial(client), await dial(upstream)]
    await owner.call(open('chain-nokey', { upstream: upstream.peerId.toString(), keyed: false }))
    expect(await refused(up, step('chain-nokey', 1, 0, input(0, 1), true, [randomKey()]))).toBe('UNAUTHORIZED')
    await owner.call({ type: 'close', close: { sessionId: 'chain-nokey' } })
  })

  describe('sealed KV export and import', () => {
    const snapshotKey = randomKey()
    const prefix = randomKey() // stands for the client's prefix hash
    const prefix2 = randomKey()
    let full: Uint8Array
    let delta: Uint8Array
    let owner: SessionCaller

    const exportKv = async (
      sessionId: string,
      from: number,
      to: number,
      sequence: number,
      prefixHash: Uint8Array,
      delta: boolean
    ) => {
      const res = await owner.call({ type: 'exportKv', exportKv: { sessionId, from, to, sequence, prefixHash, delta } })
      if (res.type !== 'snapshot') throw new Error('no snapshot')
      return res.snapshot.snapshot.slice()
    }
    const importBody = (
      sessionId: string,
      snapshots: Uint8Array[],
      o: { wrappedKey?: Uint8Array; snapshotSessionId?: string; prefixHash?: Uint8Array } = {}
    ): SessionRequestBody => ({
      type: 'importKv',
      importKv: {
        sessionId,
        wrappedKey: o.wrappedKey ?? wrapKey(snapshotKey, nodePub, { recipientPeerId: node.peerId, sessionId, span: SPAN }),
        snapshots,
        snapshotSessionId: o.snapshotSessionId ?? 'kv-src',
        prefixHash: o.prefixHash ?? prefix2
      }
    })
    /** Open a fresh session, expect the import refused with `code`, and the session gone. */
    const refusedImport = async (
      sessionId: string,
      snapshots: Uint8Array[],
      code: string,
      o: Parameters<typeof importBody>[2] = {}
    ) => {
      await owner.call(open(sessionId))
      expect(await refused(owner, importBody(sessionId, snapshots, o)), sessionId).toBe(code)
      expect(await refused(owner, step(sessionId, 1, 0, input(0, 1))), `${sessionId} kept nothing`).toBe('UNKNOWN_SESSION')
    }

    beforeAll(async () => {
      owner = await dial(client)
      await owner.call(open('kv-src', { snapshotKey }))
      await owner.call(step('kv-src', 1, 0, input(0, 8)))
      full = await exportKv('kv-src', 0, 8, 1, prefix, false)
      await owner.call(step('kv-src', 2, 8, input(8, 10)))
      delta = await exportKv('kv-src', 8, 10, 2, prefix2, true)
      local.openSession('kv-ref', { maxLength: 16 })
      local.forward('kv-ref', input(0, 10), 0)
    })

    it('only the owner may export, and only a session opened with a snapshot key', async () => {
      const other = await dial(upstream)
      expect(
        await refused(other, {
          type: 'exportKv',
          exportKv: { sessionId: 'kv-src', from: 0, to: 8, sequence: 3, prefixHash: prefix, delta: false }
        })
      ).toBe('UNKNOWN_SESSION') // sessions are keyed by (owner, id): not the other peer's to name
      await owner.call(open('kv-nokey'))
      expect(
        await refused(owner, {
          type: 'exportKv',
          exportKv: { sessionId: 'kv-nokey', from: 0, to: 0, sequence: 1, prefixHash: prefix, delta: false }
        })
      ).toBe('UNAUTHORIZED')
      await owner.call({ type: 'close', close: { sessionId: 'kv-nokey' } })
    })

    it('imports full + delta into a fresh session, which continues bit-identically', async () => {
      await owner.call(open('kv-dst'))
      expect(await owner.call(importBody('kv-dst', [full, delta]))).toMatchObject({ type: 'imported', imported: { length: 10 } })
      const res = await owner.call(step('kv-dst', 1, 10, input(10, 12)))
      if (res.type !== 'result' || !res.result.hidden) throw new Error('no output')
      expect(same(decodeTensor(res.result.hidden), local.forward('kv-ref', input(10, 12), 10))).toBe(true)
    })

    it('refuses a tampered, misbound, replayed, reordered or foreign-keyed import and keeps nothing', async () => {
      const tampered = full.slice()
      tampered[tampered.length - 40] ^= 1
      await refusedImport('kv-t1', [tampered, delta], 'SNAPSHOT_TAMPERED')
      await refusedImport('kv-t2', [full, delta.subarray(0, delta.length - 1)], 'SNAPSHOT_TAMPERED')
      await refusedImport('kv-t3', [full, delta], 'SNAPSHOT_MISBOUND', { snapshotSessionId: 'another-session' })
      await refusedImport('kv-t4', [full, delta], 'SNAPSHOT_MISBOUND', { prefixHash: prefix })
      await refusedImport('kv-t5', [full, full], 'SNAPSHOT_REPLAY', { prefixHash: prefix })
      await refusedImport('kv-t6', [delta], 'SNAPSHOT_ORDER')
      const elsewhere = wrapKey(snapshotKey, generateX25519KeyPair().publicKey, {
        recipientPeerId: node.peerId,
        sessionId: 'kv-t7',
        span: SPAN
      })
      await refusedImport('kv-t7', [full, delta], 'KEY_NOT_FOR_US', { wrappedKey: elsewhere })
      const otherSession = wrapKey(snapshotKey, nodePub, { recipientPeerId: node.peerId, sessionId: 'kv-src', span: SPAN })
      await refusedImport('kv-t8', [full, delta], 'KEY_UNWRAP', { wrappedKey: otherSession })
      const wrongKey = wrapKey(randomKey(), nodePub, { recipientPeerId: node.peerId, sessionId: 'kv-t9', span: SPAN })
      await refusedImport('kv-t9', [full, delta], 'SNAPSHOT_TAMPERED', { wrappedKey: wrongKey })
      // another peer may not import into the client's session
      await owner.call(open('kv-t10'))
      expect(await refused(await dial(upstream), importBody('kv-t10', [full, delta]))).toBe('UNKNOWN_SESSION')
    })
  })
})
