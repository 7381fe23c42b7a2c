/**
 * Issue 6, "no key material or plaintext KV is ever logged or written to disk": one real node
 * process at `--log-level trace` (every request it receives is logged), HOME and TMPDIR in an
 * empty directory, driven through keyed sessions, sealed KV export and import, an appending
 * import, a refused (tampered) import and a close. Afterwards its whole log and that directory
 * must hold none of the secrets — the client's X25519 secret, the shared secret, every hop key,
 * the snapshot key — nor any 16-byte piece of the plaintext KV, in hex or base64, nor the KV's
 * values as decimals.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { multiaddr } from '@multiformats/multiaddr'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { generateX25519KeyPair, randomKey, wrapKey, x25519SharedSecret } from '../../crypto/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import {
  createHost,
  createSessionCaller,
  fetchInfo,
  type Host,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionRequestBody
} from '../../protocol/index.js'
import { createEdge, createShard, openModelFile, selectKernels } from '../../shards/index.js'
import { keyedSessions } from '../helpers/keyed-session.js'
import { GGUF_PATH } from '../helpers/reference.js'

const DIM = 64
const SPAN = [1, 4] as const

/**
 * Every way a byte string could show up in a log line: hex, base64, base64url, a JSON array of
 * its bytes, and how JSON.stringify (and so pino) writes a Uint8Array: {"0":b0,"1":b1,...}.
 */
const spellings = (bytes: Uint8Array): string[] => {
  const b = Buffer.from(bytes)
  const asObject = Array.from(b.subarray(0, 6), (v, i) => `"${i}":${v}`).join(',')
  return [b.toString('hex'), b.toString('base64').replace(/=+$/, ''), b.toString('base64url'), Array.from(b).join(','), asObject]
}

describe('no key material or plaintext KV on record', () => {
  let node: LocalNode
  let client: Host
  let home: string
  const me = generateX25519KeyPair()
  const snapshotKey = randomKey()
  const secrets: Array<{ name: string; bytes: Uint8Array }> = []
  let plainKv: Uint8Array
  let kvValues: Float32Array

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), 'layerswarm-nosecrets-'))
    const env = { ...process.env, HOME: home, TMPDIR: home, LAYERSWARM_CONFIG: '' }
    node = await startLocalNode({
      model: GGUF_PATH,
      layers: `${SPAN[0]}:${SPAN[1]}`,
      args: ['--kernels', 'reference', '--log-level', 'trace'],
      env
    })
    client = await createHost({ listen: [], pubsub: false })
  })

  afterAll(async () => {
    await client?.stop()
    await node?.stop()
    rmSync(home, { recursive: true, force: true })
  })

  it('drives keyed sessions, sealed export/import and a refused import, then finds no secret in the log or on disk', async () => {
    const caller = createSessionCaller(
      await client.dialProtocol(
        node.addrs.map((a) => multiaddr(a)),
        SESSION_PROTOCOL,
        SESSION_STREAM_LIMITS
      )
    )
    const { info } = await fetchInfo(
      client,
      node.addrs.map((a) => multiaddr(a))
    )
    const shared = x25519SharedSecret(me.secretKey, info.x25519PublicKey)
    const kit = keyedSessions({
      node: () => ({ ...node, x25519PublicKey: info.x25519PublicKey }),
      clientPeerId: () => client.peerId.toString(),
      me,
      span: SPAN,
      dim: DIM
    })
    const keysFor = kit.keysFor
    const open = (sessionId: string, keyed: boolean): SessionRequestBody => kit.open(sessionId, keyed ? { snapshotKey } : {})
    const model = openModelFile(GGUF_PATH)
    const kernels = selectKernels({ kind: 'reference' })
    const rows = createEdge({ model, kernels }).embed([1, 403, 407, 261, 5, 77, 300, 42, 9, 31])
    const step = (sessionId: string, stepId: number, from: number, to: number): SessionRequestBody =>
      kit.step(sessionId, stepId, from, rows.subarray(from * DIM, to * DIM))
    const exportKv = async (from: number, to: number, sequence: number, delta: boolean): Promise<Uint8Array> => {
      const res = await caller.call({
        type: 'exportKv',
        exportKv: { sessionId: 'src', from, to, sequence, prefixHash: new Uint8Array(32).fill(sequence), delta }
      })
      if (res.type !== 'snapshot') throw new Error('no snapshot')
      return res.snapshot.snapshot.slice()
    }
    const importKv = (sessionId: string, snapshots: Uint8Array[], sequence: number, append = false): SessionRequestBody => ({
      type: 'importKv',
      importKv: {
        sessionId,
        wrappedKey: wrapKey(snapshotKey, info.x25519PublicKey, { recipientPeerId: node.peerId, sessionId, span: SPAN }),
        snapshots,
        snapshotSessionId: 'src',
        prefixHash: new Uint8Array(32).fill(sequence),
        ...(append ? { append: true } : {})
      }
    })

    await caller.call(open('src', true))
    await caller.call(step('src', 1, 0, 8))
    const full = await exportKv(0, 8, 1, false)
    await caller.call(step('src', 2, 8, 10))
    const delta = await exportKv(8, 10, 2, true)
    await caller.call(open('dst', false))
    await caller.call(importKv('dst', [full], 1))
    await caller.call(importKv('dst', [delta], 2, true))
    const tampered = full.slice()
    tampered[tampered.length - 20] ^= 1
    await caller.call(open('bad', false))
    await expect(caller.call(importKv('bad', [tampered], 1))).rejects.toMatchObject({ code: 'SNAPSHOT_TAMPERED' })
    for (const id of ['src', 'dst']) await caller.call({ type: 'close', close: { sessionId: id } })
    caller.abort(new Error('test done'))

    // the plaintext the snapshots carried: the same span computed here, bit for bit
    const local = createShard({ model, start: SPAN[0], end: SPAN[1], kernels })
    local.openSession('ref', { maxLength: 16 })
    local.forward('ref', rows.subarray(0, 10 * DIM), 0)
    plainKv = local.exportKv('ref', 0, 10)
    kvValues = new Float32Array(plainKv.buffer.slice(plainKv.byteOffset, plainKv.byteOffset + plainKv.byteLength))
    kernels.close?.()
    model.close()

    const keys = keysFor('src')
    secrets.push(
      { name: 'client X25519 secret', bytes: me.secretKey },
      { name: 'shared secret', bytes: shared },
      { name: 'snapshot key', bytes: snapshotKey }
    )
    for (const [name, value] of Object.entries(keys))
      if (value instanceof Uint8Array) secrets.push({ name: `hop key ${name}`, bytes: value })
    expect(secrets.length).toBeGreaterThanOrEqual(5)

    await node.stop()
    const log = node.logs.join('\n')
    // the log is real: the trace level recorded the requests that moved the sealed KV
    expect(log).toMatch(/importKv/)
    expect(log).toMatch(/exportKv/)
    for (const s of secrets)
      for (const text of spellings(s.bytes)) expect(log.includes(text), `${s.name} in the node log`).toBe(false)
    for (let i = 0; i + 16 <= plainKv.length; i += 16)
      for (const text of spellings(plainKv.subarray(i, i + 16)))
        expect(log.includes(text), `plaintext KV bytes ${i}.. in the node log`).toBe(false)
    // decimals: no run of three consecutive KV values as JSON would print them
    const decimals = Array.from({ length: 64 }, (_, i) => kvValues.slice(i * 7, i * 7 + 3).join(','))
    for (const d of decimals) expect(log.includes(d), `KV values ${d} in the node log`).toBe(false)
    // and nothing on disk: the node wrote no file under its HOME or TMPDIR
    expect(readdirSync(home, { recursive: true })).toEqual([])
  })
})
