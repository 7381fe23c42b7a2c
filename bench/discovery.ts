/**
 * `npm run bench -- discovery [--peers 16,32,64] [--interval-ms 5000] [--links 1] [--timeout-ms 60000]`:
 * how far discovery by gossip plus the announcement exchange carries (issue #19, item 3: the DHT
 * or gossip, measured). For each swarm size N it starts N announcing peers in this process on
 * 127.0.0.1, each bootstrapped to `--links` random earlier peers (1: a sparse tree, the worst
 * case for gossip), announcing every --interval-ms (node start's default; an announcement lives
 * 3 intervals, so an interval far below the default lets announcements expire on the way
 * when one process hosts many peers), and reports:
 * - convergedMs: from the last peer's start until every peer holds all N announcements;
 * - oneAddressMs: a new client that knows only the newest peer's address asks it once
 *   (protocol/announcement-exchange.ts) and gets all N (polled until it does);
 * - responseBytes: that answer's size (it grows linearly; MAX_HELD_ANNOUNCEMENTS caps the count);
 * - gossipBytesPerPeerPerS: announcement bytes each peer receives per second at that size.
 * Peers are bare hosts (no shards), so only discovery is measured. Prints one JSON object.
 */
import { generateKeyPair } from '@libp2p/crypto/keys'
import { multiaddr } from '@multiformats/multiaddr'
import {
  AnnouncementStore,
  createAnnouncer,
  createHost,
  encodeAnnouncementsResponse,
  fetchAnnouncements,
  type Host,
  MAX_HELD_ANNOUNCEMENTS,
  PROTOCOL_VERSION,
  serveAnnouncements,
  subscribeAnnouncements
} from '../protocol/index.js'

interface Peer {
  host: Host
  store: AnnouncementStore
  received: number
}

const MODEL_ID = 'lsm1-discovery-bench'

async function startPeer(bootstrap: string[], intervalMs: number, signal: AbortSignal): Promise<Peer> {
  const privateKey = await generateKeyPair('Ed25519')
  const host = await createHost({ privateKey, bootstrap })
  const peer: Peer = { host, store: new AnnouncementStore(), received: 0 }
  await serveAnnouncements(host, peer.store, { signal })
  subscribeAnnouncements(
    host,
    (a, _from, signed) => {
      peer.received += signed.announcement.length + signed.signature.length + signed.publicKey.length
      peer.store.put(a, signed)
    },
    signal
  )
  const start = Math.floor(Math.random() * 8)
  createAnnouncer(host, {
    privateKey,
    intervalMs,
    signal,
    onPublished: (a, signed) => peer.store.put(a, signed),
    content: () => ({
      modelId: MODEL_ID,
      start,
      end: start + 1,
      throughput: 100,
      freeCacheTokens: 4096,
      wireDtypes: [],
      version: PROTOCOL_VERSION
    })
  })
  return peer
}

async function until(test: () => boolean | Promise<boolean>, timeoutMs: number): Promise<number | null> {
  const t0 = performance.now()
  while (performance.now() - t0 < timeoutMs) {
    if (await test()) return Math.round(performance.now() - t0)
    await new Promise((r) => setTimeout(r, 100))
  }
  return null
}

async function measure(n: number, links: number, intervalMs: number, timeoutMs: number) {
  const ac = new AbortController()
  const peers: Peer[] = []
  let client: Host | undefined
  try {
    for (let i = 0; i < n; i++) {
      const to = new Set<Peer>()
      for (let k = 0; k < Math.min(i, links); k++) to.add(peers[Math.floor(Math.random() * i)])
      peers.push(
        await startPeer(
          [...to].map((p) => p.host.getMultiaddrs()[0].toString()),
          intervalMs,
          ac.signal
        )
      )
    }
    const convergedMs = await until(() => peers.every((p) => p.store.list(MODEL_ID).length >= n), timeoutMs)
    const last = peers[n - 1]
    client = await createHost({ listen: [], pubsub: false })
    const addr = last.host.getMultiaddrs()[0]
    const c = client
    const oneAddressMs = await until(async () => {
      const got = await fetchAnnouncements(c, multiaddr(addr), { modelId: MODEL_ID }).catch(() => [])
      return got.length >= n
    }, timeoutMs)
    const responseBytes = encodeAnnouncementsResponse(last.store.list(MODEL_ID)).length
    // gossip load at steady state: bytes of announcements received per peer per second
    const before = peers.map((p) => p.received)
    const windowMs = 3 * intervalMs
    await new Promise((r) => setTimeout(r, windowMs))
    const perPeer = peers.map((p, i) => ((p.received - before[i]) * 1000) / windowMs)
    return {
      peers: n,
      convergedMs,
      oneAddressMs,
      responseBytes,
      gossipBytesPerPeerPerS: Math.round(perPeer.reduce((a, b) => a + b, 0) / n)
    }
  } finally {
    ac.abort()
    await Promise.allSettled([client?.stop(), ...peers.map((p) => p.host.stop())])
  }
}

export async function main(argv: string[]): Promise<void> {
  const arg = (name: string, dflt: string) => {
    const i = argv.indexOf(name)
    return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : dflt
  }
  const sizes = arg('--peers', '16,32,64')
    .split(',')
    .map((x) => Number.parseInt(x, 10))
  const intervalMs = Number.parseInt(arg('--interval-ms', '5000'), 10)
  const timeoutMs = Number.parseInt(arg('--timeout-ms', '60000'), 10)
  const links = Number.parseInt(arg('--links', '1'), 10)
  for (const n of sizes)
    if (!Number.isInteger(n) || n < 2 || n > MAX_HELD_ANNOUNCEMENTS)
      throw new RangeError(`--peers: each size is an integer in [2, ${MAX_HELD_ANNOUNCEMENTS}]`)
  const results = []
  for (const n of sizes) results.push(await measure(n, links, intervalMs, timeoutMs))
  process.stdout.write(
    `${JSON.stringify({ bench: 'discovery', topology: `each peer bootstrapped to ${links} random earlier peer(s)`, intervalMs, maxHeldAnnouncements: MAX_HELD_ANNOUNCEMENTS, results }, null, 2)}\n`
  )
}
