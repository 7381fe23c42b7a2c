/**
 * Issue #31 item 2: chained forwarding on loopback needs no flag, because a node dials a next
 * hop at the addresses it knows from the swarm's signed announcements or its own connections,
 * never at the client's (node/daemon/next-hop-policy.ts). A client-named address nothing backs is
 * refused with NEXT_HOP_FAILED naming the hop and the address, and a decoy listener there sees
 * no connection; the client surfaces that refusal, not NO_ROUTE alone. Real node processes on
 * 127.0.0.1, each with a throwaway identity, under a fresh HOME.
 */
import { mkdtempSync } from 'node:fs'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { generateKeyPair } from '@libp2p/crypto/keys'
import { peerIdFromPrivateKey } from '@libp2p/peer-id'
import { multiaddr } from '@multiformats/multiaddr'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import {
  createHost,
  createSessionCaller,
  type Host,
  RemoteError,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS
} from '../../protocol/index.js'
import { cliAsync } from '../helpers/cli-async.js'
import { openBody } from '../helpers/hostile-cases.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const ARGS = ['--announce-interval', '300']

/** A TCP listener that counts the connections it gets (where a refused next hop pointed). */
async function decoy(): Promise<{ server: Server; port: number; connections: () => number }> {
  let n = 0
  const server = createServer((s) => {
    n++
    s.destroy()
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const port = (server.address() as { port: number }).port
  return { server, port, connections: () => n }
}

/** A port free a moment ago (for a node whose announced address must differ from its real one). */
async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
  const { port } = s.address() as { port: number }
  await new Promise((r) => s.close(r))
  return port
}

describe('chained forwarding on loopback: next hops from announcements, no flag', () => {
  // a fresh HOME: nothing from an earlier run (identity, config) helps
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: mkdtempSync(join(tmpdir(), 'layerswarm-nexthop-home-')) }
  delete env.LAYERSWARM_HOME
  const nodes: LocalNode[] = []
  let a: LocalNode
  let b: LocalNode
  let trap: Awaited<ReturnType<typeof decoy>>
  let stranger: Host

  beforeAll(async () => {
    trap = await decoy()
    a = await startLocalNode({ model: GGUF_PATH, layers: '1:3', args: ARGS, env })
    nodes.push(a)
    b = await startLocalNode({ model: GGUF_PATH, layers: '3:4', bootstrap: [a.addrs[0]], args: ARGS, env })
    nodes.push(b)
    stranger = await createHost({ listen: [] })
  }, 120_000)

  afterAll(async () => {
    await stranger?.stop()
    await Promise.all(nodes.map((n) => n.stop()))
    trap?.server.close()
  })

  it('two nodes on 127.0.0.1 then generate --forwarding chain gives the reference tokens', { timeout: 120_000 }, async () => {
    const r = await cliAsync(
      [
        'generate',
        '--model',
        GGUF_PATH,
        '--bootstrap',
        a.addrs[0],
        '--prompt',
        ref.prompt,
        '--max-tokens',
        '32',
        '--temperature',
        '0',
        '--forwarding',
        'chain',
        '--json'
      ],
      90_000,
      env
    )
    expect(r.status, r.stderr).toBe(0)
    const out = JSON.parse(r.stdout) as { tokens: number[] }
    expect(out.tokens).toEqual(ref.generated_tokens.slice(0, 32))
  })

  it('an address of a known hop that nothing backs is refused, naming the hop and the address; nothing dials it', async () => {
    const caller = createSessionCaller(
      await stranger.dialProtocol(
        a.addrs.map((x) => multiaddr(x)),
        SESSION_PROTOCOL,
        SESSION_STREAM_LIMITS
      )
    )
    const named = `/ip4/127.0.0.1/tcp/${trap.port}/p2p/${b.peerId}`
    const open = openBody('aimed', { modelId: a.modelId, start: 1, end: 3 })
    const err = await caller
      .call({ ...open, open: { ...open.open, nextHops: [{ peerId: b.peerId, addrs: [named], start: 3, end: 4 }] } })
      .then(
        () => undefined,
        (e: unknown) => e
      )
    expect(err).toBeInstanceOf(RemoteError)
    expect((err as RemoteError).code).toBe('NEXT_HOP_FAILED')
    expect((err as Error).message).toContain(`next hop ${b.peerId} refused`)
    expect((err as Error).message).toContain(`/tcp/${trap.port}/`)

    // a peer nobody announced, at the same address: refused as unknown
    const nobody = peerIdFromPrivateKey(await generateKeyPair('Ed25519')).toString()
    const err2 = await caller
      .call({
        ...openBody('aimed-2', { modelId: a.modelId, start: 1, end: 3 }),
        open: {
          ...openBody('aimed-2', { modelId: a.modelId, start: 1, end: 3 }).open,
          nextHops: [{ peerId: nobody, addrs: [`/ip4/127.0.0.1/tcp/${trap.port}/p2p/${nobody}`], start: 3, end: 4 }]
        }
      })
      .then(
        () => undefined,
        (e: unknown) => e
      )
    expect((err2 as RemoteError).code).toBe('NEXT_HOP_FAILED')
    expect((err2 as Error).message).toContain(`next hop ${nobody} refused: no signed announcement or connection`)

    // the honest address of the same hop (its announcement's) opens
    const honest = `${b.addrs[0]}`
    const ok = await caller.call({
      ...openBody('honest', { modelId: a.modelId, start: 1, end: 3 }),
      open: {
        ...openBody('honest', { modelId: a.modelId, start: 1, end: 3 }).open,
        nextHops: [{ peerId: b.peerId, addrs: [honest], start: 3, end: 4 }]
      }
    })
    expect(ok.type).toBe('opened')
    caller.abort(new Error('done'))
    await new Promise((r) => setTimeout(r, 500))
    expect(trap.connections()).toBe(0)
  })

  it('the client surfaces a refused next hop (NEXT_HOP_FAILED naming it), not NO_ROUTE alone', { timeout: 120_000 }, async () => {
    // p and q know nothing of each other but what q signs: an address where nothing listens.
    // The client reaches q at its real address, which p cannot match, so p refuses it.
    const p = await startLocalNode({ model: GGUF_PATH, layers: '1:2', args: ARGS, env })
    nodes.push(p)
    const port = await freePort()
    const q = await startLocalNode({
      model: GGUF_PATH,
      layers: '2:4',
      args: [...ARGS, '--listen', `/ip4/127.0.0.1/tcp/${port}`, '--announce', `/ip4/127.0.0.1/tcp/${trap.port}`],
      env
    })
    nodes.push(q)
    const r = await cliAsync(
      [
        'generate',
        '--model',
        GGUF_PATH,
        '--bootstrap',
        `${p.addrs[0]},/ip4/127.0.0.1/tcp/${port}/p2p/${q.peerId}`,
        '--prompt',
        ref.prompt,
        '--max-tokens',
        '4',
        '--temperature',
        '0',
        '--forwarding',
        'chain'
      ],
      90_000,
      env
    )
    expect(r.status).not.toBe(0)
    expect(r.stderr).toContain('NEXT_HOP_FAILED')
    expect(r.stderr).toContain(`next hop ${q.peerId} refused`)
    expect(trap.connections()).toBe(0)
  })
})
