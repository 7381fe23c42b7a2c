/**
 * One simulated swarm peer of `bench scale` (issue #38): a real libp2p host (loopback TCP, Noise,
 * yamux, gossipsub) running the node's discovery code (signed announcements on gossip, the
 * announcement exchange) and answering `info` requests for a tiny span, with no shard behind
 * it: what is measured is discovery and routing, not forward passes.
 */
import { generateKeyPair } from '@libp2p/crypto/keys'
import {
  AnnouncementStore,
  createAnnouncer,
  createHost,
  encodeInfoResponse,
  type Host,
  INFO_PROTOCOL,
  MAX_INFO_REQUEST_BYTES,
  PROTOCOL_VERSION,
  REQUEST_STREAM_LIMITS,
  serveAnnouncements,
  serveRequest,
  startAnnouncementSync,
  subscribeAnnouncements
} from '../protocol/index.js'

export const SCALE_MODEL_ID = 'lsm1-scale-bench'

export interface SimPeer {
  readonly host: Host
  readonly peerId: string
  readonly addr: string
  readonly start: number
  readonly end: number
  readonly throughput: number
  /** Announcement bytes (signed form) and messages received over gossip since start. */
  received: { bytes: number; messages: number }
  stop(): Promise<void>
}

export interface SimPeerInit {
  readonly bootstrap: string[]
  readonly start: number
  readonly end: number
  readonly nBlocks: number
  readonly throughput: number
  readonly intervalMs: number
  readonly maxConnections?: number
}

export async function startSimPeer(init: SimPeerInit): Promise<SimPeer> {
  const ac = new AbortController()
  const privateKey = await generateKeyPair('Ed25519')
  const host = await createHost({ privateKey, bootstrap: init.bootstrap, maxConnections: init.maxConnections })
  const store = new AnnouncementStore()
  const received = { bytes: 0, messages: 0 }
  await serveAnnouncements(host, store, { signal: ac.signal })
  subscribeAnnouncements(
    host,
    (a, _from, signed) => {
      received.bytes += signed.announcement.length + signed.signature.length + signed.publicKey.length
      received.messages++
      store.put(a, signed)
    },
    ac.signal
  )
  const content = {
    modelId: SCALE_MODEL_ID,
    start: init.start,
    end: init.end,
    throughput: init.throughput,
    freeCacheTokens: 4096,
    wireDtypes: [],
    version: PROTOCOL_VERSION
  }
  // as a node does (node/server.ts): pull what neighbours hold, so gossip's gaps are filled
  startAnnouncementSync(host, store, { intervalMs: init.intervalMs, signal: ac.signal })
  createAnnouncer(host, {
    privateKey,
    intervalMs: init.intervalMs,
    signal: ac.signal,
    onPublished: (a, signed) => store.put(a, signed),
    content: () => content
  })
  const info = encodeInfoResponse({
    ...content,
    nLayers: init.nBlocks,
    dim: 8,
    maxSessions: 16,
    activeSessions: 0,
    wireDtypes: ['f32'],
    x25519PublicKey: new Uint8Array(0)
  })
  await host.handle(
    INFO_PROTOCOL,
    (stream) => serveRequest(stream, () => info, { signal: ac.signal, maxMessageBytes: MAX_INFO_REQUEST_BYTES }),
    REQUEST_STREAM_LIMITS
  )
  return {
    host,
    peerId: host.peerId.toString(),
    addr: host.getMultiaddrs()[0].toString(),
    start: init.start,
    end: init.end,
    throughput: init.throughput,
    received,
    async stop() {
      ac.abort()
      await host.stop()
    }
  }
}
