/**
 * Issue 6 parts 2 and 4b against one real node process (stories260K, blocks [1, 4)):
 * - appending imports (how a standby is fed with sealed deltas every N tokens, and how large
 *   snapshots stream in frames): they continue bit-identically, and every bound field is checked
 *   as for any import (sequence, order, session, prefix, tag, key, owner), a refusal keeping nothing;
 * - in chained mode only the client that opened a session may rewind, close, await, export or
 *   import it: its upstream hop (whose steps run with the client's tag) and strangers may not.
 */
import { multiaddr } from '@multiformats/multiaddr'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generateX25519KeyPair, randomKey, wrapKey } from '../../crypto/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import {
  createHost,
  createSessionCaller,
  decodeTensor,
  fetchInfo,
  type Host,
  RemoteError,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionCaller,
  type SessionRequestBody
} from '../../protocol/index.js'
import {
  createEdge,
  createShard,
  type Kernels,
  type ModelFile,
  openModelFile,
  type Shard,
  selectKernels
} from '../../shards/index.js'
import { keyedSessions } from '../helpers/keyed-session.js'
import { f32Data } from '../helpers/raw-session.js'
import { GGUF_PATH } from '../helpers/reference.js'

const DIM = 64
const SPAN = [1, 4] as const

describe('appending imports and owner-only control messages', () => {
  let node: LocalNode
  let client: Host
  let upstream: Host
  let stranger: Host
  let model: ModelFile
  let kernels: Kernels
  let local: Shard
  let rows: Float32Array
  let nodePub: Uint8Array
  let owner: SessionCaller
  const me = generateX25519KeyPair()
  const callers: SessionCaller[] = []
  const snapshotKey = randomKey()
  const prefix = [randomKey(), randomKey(), randomKey()] // stand for the client's prefix hashes at 4, 8, 10
  let full: Uint8Array // [0, 4) seq 1
  let d48: Uint8Array // [4, 8) seq 2
  let d810: Uint8Array // [8, 10) seq 3

  const dial = async (host: Host): Promise<SessionCaller> => {
    const c = createSessionCaller(
      await host.dialProtocol(
        node.addrs.map((a) => multiaddr(a)),
        SESSION_PROTOCOL,
        SESSION_STREAM_LIMITS
      )
    )
    callers.push(c)
    return c
  }
  const kit = keyedSessions({
    node: () => ({ ...node, x25519PublicKey: nodePub }),
    clientPeerId: () => client.peerId.toString(),
    me,
    span: SPAN,
    dim: DIM
  })
  const open = (sessionId: string, o: { upstream?: string; snapshotKey?: Uint8Array } = {}): SessionRequestBody =>
    kit.open(sessionId, o)
  const input = (from: number, to: number) => rows.subarray(from * 64, to * 64)
  const step = (sessionId: string, stepId: number, pos: number, x: Float32Array): SessionRequestBody =>
    kit.step(sessionId, stepId, pos, x)
  const importBody = (
    sessionId: string,
    snapshots: Uint8Array[],
    prefixHash: Uint8Array,
    o: { append?: boolean; wrappedKey?: Uint8Array; snapshotSessionId?: string } = {}
  ): SessionRequestBody => ({
    type: 'importKv',
    importKv: {
      sessionId,
      wrappedKey: o.wrappedKey ?? wrapKey(snapshotKey, nodePub, { recipientPeerId: node.peerId, sessionId, span: SPAN }),
      snapshots,
      snapshotSessionId: o.snapshotSessionId ?? 'src',
      prefixHash,
      ...(o.append ? { append: true } : {})
    }
  })
  const refused = async (caller: SessionCaller, body: SessionRequestBody): Promise<string> => {
    const err = await caller.call(body).then(
      () => new Error(`${body.type} was accepted`),
      (e: unknown) => e
    )
    expect(err).toBeInstanceOf(RemoteError)
    return (err as RemoteError).code
  }
  const exportKv = async (from: number, to: number, sequence: number, prefixHash: Uint8Array) => {
    const res = await owner.call({
      type: 'exportKv',
      exportKv: { sessionId: 'src', from, to, sequence, prefixHash, delta: from > 0 }
    })
    if (res.type !== 'snapshot') throw new Error('no snapshot')
    return res.snapshot.snapshot.slice()
  }

  beforeAll(async () => {
    node = await startLocalNode({ model: GGUF_PATH, layers: `${SPAN[0]}:${SPAN[1]}`, args: ['--kernels', 'reference'] })
    ;[client, upstream, stranger] = await Promise.all([1, 2, 3].map(() => createHost({ listen: [], pubsub: false })))
    model = openModelFile(GGUF_PATH)
    kernels = selectKernels({ kind: 'reference' })
    local = createShard({ model, start: SPAN[0], end: SPAN[1], kernels })
    rows = createEdge({ model, kernels }).embed([1, 403, 407, 261, 5, 77, 300, 42, 9, 31, 12, 88])
    nodePub = (
      await fetchInfo(
        client,
        node.addrs.map((a) => multiaddr(a))
      )
    ).info.x25519PublicKey
    owner = await dial(client)
    await owner.call(open('src', { snapshotKey }))
    await owner.call(step('src', 1, 0, input(0, 8)))
    full = await exportKv(0, 4, 1, prefix[0])
    d48 = await exportKv(4, 8, 2, prefix[1])
    await owner.call(step('src', 2, 8, input(8, 10)))
    d810 = await exportKv(8, 10, 3, prefix[2])
  })

  afterAll(async () => {
    for (const c of callers) c.abort(new Error('test done'))
    await Promise.all([client, upstream, stranger].map((h) => h?.stop()))
    await node?.stop()
    kernels?.close?.()
    model?.close()
  })

  it('a standby session fed full, then delta, then delta continues bit-identically', async () => {
    await owner.call(open('sb'))
    expect(await owner.call(importBody('sb', [full], prefix[0]))).toMatchObject({ imported: { length: 4 } })
    expect(await owner.call(importBody('sb', [d48], prefix[1], { append: true }))).toMatchObject({ imported: { length: 8 } })
    expect(await owner.call(importBody('sb', [d810], prefix[2], { append: true }))).toMatchObject({ imported: { length: 10 } })
    const res = await owner.call(step('sb', 1, 10, input(10, 12)))
    if (res.type !== 'result' || !res.result.hidden) throw new Error('no output')
    local.openSession('ref', { maxLength: 16 })
    local.forward('ref', input(0, 10), 0)
    expect(
      Buffer.from(f32Data(decodeTensor(res.result.hidden))).equals(Buffer.from(f32Data(local.forward('ref', input(10, 12), 10))))
    ).toBe(true)
  })

  it('refuses every misbound append with a typed error and keeps nothing of the session', async () => {
    /** Open a session fed with `first`, then expect `append` refused with `code` and the session gone. */
    const case_ = async (
      id: string,
      first: Uint8Array[] | undefined,
      append: SessionRequestBody,
      code: string,
      between?: () => Promise<unknown>
    ) => {
      await owner.call(open(id))
      if (first) await owner.call(importBody(id, first, prefix[first.length - 1]))
      await between?.()
      expect(await refused(owner, append), id).toBe(code)
      expect(await refused(owner, step(id, 9, 0, input(0, 1))), `${id} kept nothing`).toBe('UNKNOWN_SESSION')
    }
    await case_('a1', [full, d48], importBody('a1', [d48], prefix[1], { append: true }), 'SNAPSHOT_REPLAY')
    await case_('a2', [full], importBody('a2', [d810], prefix[2], { append: true }), 'SNAPSHOT_ORDER') // a gap
    await case_('a3', undefined, importBody('a3', [full], prefix[0], { append: true }), 'SNAPSHOT_ORDER') // nothing to append to
    await case_('a4', [full], importBody('a4', [full], prefix[0], { append: true }), 'SNAPSHOT_REPLAY')
    await case_('a5', [full], importBody('a5', [d48], prefix[1], { append: true }), 'SNAPSHOT_ORDER', () =>
      owner.call(step('a5', 1, 4, input(4, 5)))
    )
    await case_(
      'a6',
      [full],
      importBody('a6', [d48], prefix[1], { append: true, snapshotSessionId: 'other' }),
      'SNAPSHOT_MISBOUND'
    )
    await case_('a7', [full], importBody('a7', [d48], prefix[2], { append: true }), 'SNAPSHOT_MISBOUND') // another prefix
    const tampered = d48.slice()
    tampered[tampered.length - 20] ^= 1
    await case_('a8', [full], importBody('a8', [tampered], prefix[1], { append: true }), 'SNAPSHOT_TAMPERED')
    const elsewhere = wrapKey(snapshotKey, generateX25519KeyPair().publicKey, {
      recipientPeerId: node.peerId,
      sessionId: 'a9',
      span: SPAN
    })
    await case_('a9', [full], importBody('a9', [d48], prefix[1], { append: true, wrappedKey: elsewhere }), 'KEY_NOT_FOR_US')
    // only the owner may append
    await owner.call(open('a10'))
    await owner.call(importBody('a10', [full], prefix[0]))
    // sessions are keyed by (owner, id): the stranger names no session of its own
    expect(await refused(await dial(stranger), importBody('a10', [d48], prefix[1], { append: true }))).toBe('UNKNOWN_SESSION')
    expect(await owner.call(importBody('a10', [d48], prefix[1], { append: true }))).toMatchObject({ imported: { length: 8 } })
  })

  it('chained mode: the upstream hop and strangers may not rewind, close, await, export or import the session', async () => {
    const id = 'chain-owner'
    await owner.call(open(id, { upstream: upstream.peerId.toString(), snapshotKey }))
    await owner.call(step(id, 1, 0, input(0, 6)))
    const control = (): SessionRequestBody[] => [
      { type: 'rewind', rewind: { sessionId: id, length: 2 } },
      { type: 'close', close: { sessionId: id } },
      { type: 'await', await: { sessionId: id, stepId: 2 } },
      { type: 'exportKv', exportKv: { sessionId: id, from: 0, to: 6, sequence: 1, prefixHash: prefix[0], delta: false } },
      importBody(id, [full], prefix[0])
    ]
    for (const host of [upstream, stranger]) {
      const c = await dial(host)
      // control messages name the owner's sessions only: to anyone else the session is unknown
      for (const body of control())
        expect(await refused(c, body), `${body.type} from ${host === upstream ? 'upstream' : 'a stranger'}`).toBe(
          'UNKNOWN_SESSION'
        )
    }
    // nothing changed: the owner's next step continues at position 6, bit-identically
    const res = await owner.call(step(id, 2, 6, input(6, 7)))
    if (res.type !== 'result' || !res.result.hidden) throw new Error('no output')
    local.openSession('ref-chain', { maxLength: 16 })
    local.forward('ref-chain', input(0, 6), 0)
    expect(
      Buffer.from(f32Data(decodeTensor(res.result.hidden))).equals(
        Buffer.from(f32Data(local.forward('ref-chain', input(6, 7), 6)))
      )
    ).toBe(true)
    expect(
      await owner.call({
        type: 'exportKv',
        exportKv: { sessionId: id, from: 0, to: 7, sequence: 1, prefixHash: prefix[0], delta: false }
      })
    ).toMatchObject({ type: 'snapshot' })
    expect(await owner.call({ type: 'close', close: { sessionId: id } })).toMatchObject({ type: 'closed' })
  })
})
