/**
 * Issue #39, finding 2, over real gossipsub: 1,000 fresh keys, each signing a valid announcement
 * of the swarm's model with a lifetime past the honest ones', flood the node a new client
 * bootstraps to. Every honest node stays in that node's store and reaches the client, which
 * generates the reference tokens through both. Before the fix the node's store (512 entries,
 * the one expiring first evicted) held only flood entries: the client found no route.
 */
import { generateKeyPair } from '@libp2p/crypto/keys'
import type { PrivateKey } from '@libp2p/interface'
import { peerIdFromPrivateKey } from '@libp2p/peer-id'
import { multiaddr } from '@multiformats/multiaddr'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createClient } from '../../client/index.js'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import {
  ANNOUNCE_TOPIC,
  createHost,
  encodeSignedAnnouncement,
  fetchAnnouncements,
  type Host,
  PROTOCOL_VERSION,
  signAnnouncement
} from '../../protocol/index.js'
import { createReferenceKernels } from '../../shards/index.js'
import { GGUF_PATH, loadReference } from '../helpers/reference.js'

const ref = loadReference('stories260K_greedy_once_upon_a_time')
const FLOOD_KEYS = 1_000
/**
 * A pulls its neighbours' announcements every second, so it learns B at once; B announces every
 * 30 s (a 90 s lifetime), so the client cannot learn B from B's own gossip in the test's window:
 * only from what A holds.
 */
const A_ARGS = ['--kernels', 'reference', '--announce-interval', '1000']
const B_ARGS = ['--kernels', 'reference', '--announce-interval', '30000']
const N_TOKENS = 8

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

describe('a 1,000-key announcement flood (issue #39)', () => {
  let a: LocalNode
  let b: LocalNode
  let flooder: Host
  let observer: Host
  let keys: PrivateKey[]

  beforeAll(async () => {
    a = await startLocalNode({ model: GGUF_PATH, layers: '1:3', args: A_ARGS })
    b = await startLocalNode({ model: GGUF_PATH, layers: '3:4', args: B_ARGS, bootstrap: [a.addrs[0]] })
    ;[flooder, observer] = await Promise.all([createHost({ listen: [] }), createHost({ listen: [], pubsub: false })])
    keys = await Promise.all(Array.from({ length: FLOOD_KEYS }, () => generateKeyPair('Ed25519')))
  }, 90_000)

  afterAll(async () => {
    await Promise.all([flooder, observer].map((h) => h?.stop()))
    await Promise.all([a, b].map((n) => n?.stop()))
  })

  const held = async () => {
    const list = await fetchAnnouncements(observer, multiaddr(a.addrs[0]), { signal: AbortSignal.timeout(10_000) })
    return list.map((x) => x.announcement.peerId)
  }

  /** Every flood key signs a valid announcement with a lifetime past any honest one's. */
  const signFlood = async () => {
    const now = Date.now()
    return await Promise.all(
      keys.map(async (key) => {
        const peerId = peerIdFromPrivateKey(key).toString()
        const signed = await signAnnouncement(
          {
            peerId,
            modelId: a.modelId,
            start: 1,
            end: 4,
            throughput: 1e6,
            freeCacheTokens: 1e6,
            wireDtypes: ['f32'],
            version: PROTOCOL_VERSION,
            addrs: [`/ip4/127.0.0.1/tcp/9/p2p/${peerId}`], // the discard port: nothing listens
            issuedAtMs: now,
            expiresAtMs: now + 110_000
          },
          key
        )
        return encodeSignedAnnouncement(signed)
      })
    )
  }

  it('leaves every honest node visible to a new client, which generates', async () => {
    // the honest swarm first: A holds B's announcement
    for (let i = 0; i < 60 && !(await held()).includes(b.peerId); i++) await sleep(500)
    expect(await held()).toEqual(expect.arrayContaining([a.peerId, b.peerId]))

    // the flooder joins A's gossipsub mesh and floods
    flooder.services.pubsub!.subscribe(ANNOUNCE_TOPIC)
    await flooder.dial(multiaddr(a.addrs[0]))
    for (
      let i = 0;
      i < 40 && !flooder.services.pubsub!.getSubscribers(ANNOUNCE_TOPIC).some((p) => p.toString() === a.peerId);
      i++
    )
      await sleep(250)
    for (const data of await signFlood()) await flooder.services.pubsub!.publish(ANNOUNCE_TOPIC, data)
    await sleep(2_000)

    const client = await createClient({
      bootstrap: [a.addrs[0]],
      model: GGUF_PATH,
      kernels: createReferenceKernels(),
      routeTimeoutMs: 5_000,
      edgeFirst: 1,
      edgeLast: 1
    })
    try {
      const result = await client.generate(ref.prompt, { maxTokens: N_TOKENS, temperature: 0 })
      expect(result.tokens).toEqual(ref.generated_tokens.slice(0, N_TOKENS))
    } finally {
      await client.close()
    }
    // and what A holds: both honest nodes, and at most the flooder's share of the rest
    const after = await held()
    const flood = after.filter((id) => id !== a.peerId && id !== b.peerId).length
    console.log(`A holds ${after.length} announcements, ${flood} of them the flood's`)
    expect(flood).toBeLessThanOrEqual(128) // the flooder's share: a quarter of the store
    expect(after).toEqual(expect.arrayContaining([a.peerId, b.peerId]))
  }, 120_000)
})
