/**
 * The libp2p host shared by the node daemon and the client (docs/design.md §1: the host
 * factory lives in protocol/, not in node/): TCP + Noise + yamux + identify, gossipsub for
 * announcements, with limits sized for long-lived session streams.
 *
 * No DHT: discovery runs on bootstrap peers + gossipsub announcements, plus a request for the
 * announcements each bootstrap peer holds (announcement-exchange.ts), so one bootstrap address
 * gives a client the whole swarm; bench/discovery.ts measures how far that carries and
 * docs/networking.md says why it suffices at the sizes a swarm of friends reaches.
 * Reachability (relay, hole punching, AutoNAT, UPnP) is in reachability.ts.
 */
import './polyfills.js'
import type { Socket } from 'node:net'
import { noise } from '@chainsafe/libp2p-noise'
import { yamux } from '@chainsafe/libp2p-yamux'
import { StreamState, YamuxStream } from '@chainsafe/libp2p-yamux/stream'
import { type GossipSub, gossipsub } from '@libp2p/gossipsub'
import { type Identify, identify } from '@libp2p/identify'
import type {
  AbortOptions,
  ComponentLogger,
  Metrics,
  MultiaddrConnection,
  PeerId,
  PrivateKey,
  Transport,
  Upgrader
} from '@libp2p/interface'
import { KEEP_ALIVE } from '@libp2p/interface'
import { tcp } from '@libp2p/tcp'
import { webSockets } from '@libp2p/websockets'
import { multiaddr } from '@multiformats/multiaddr'
import { createLibp2p, type Libp2p, type ServiceFactoryMap } from 'libp2p'
import { gossipScoreParams } from './gossip-scoring.js'
import { PROTOCOL_VERSION } from './ids.js'
import { DEFAULT_MAX_MESSAGE_BYTES } from './limits.js'
import { checkLinkDelay, delayWrites, type LinkDelay, linkDelayFromEnv } from './link-delay.js'
import { allowListGater, type NetworkPolicy, networkPolicy } from './network-policy.js'
import { DEFAULT_MAX_CONNECTIONS } from './options.js'
import {
  type ReachabilityInit,
  reachabilityServices,
  relayReservationGate,
  relayTransport,
  trackReachability
} from './reachability.js'
import { swarmKeyProtector } from './swarm-key.js'

/**
 * yamux answers every data frame it receives with a window update as soon as any of the
 * receive window is used, so each session message (a step, a result) sends a 30-byte frame
 * back: a second socket write and a second wake-up of the sender, per message, which on one
 * host costs about as much as the message. This defers the update until half the window is
 * used (what go-yamux and the yamux spec's implementations do); window updates during stream
 * setup (SYN/ACK flags) and paused streams keep the stock behaviour. The sender is never
 * starved: every received frame re-checks, so an update goes out once half the window is in.
 */
function deferWindowUpdates(): void {
  const proto = YamuxStream.prototype as unknown as {
    sendWindowUpdate(): void
    layerswarmDeferred?: boolean
  }
  if (proto.layerswarmDeferred) return
  const stock = proto.sendWindowUpdate
  proto.sendWindowUpdate = function (this: { state: StreamState; recvWindow: number; recvWindowCapacity: number }) {
    if (this.state === StreamState.Established && this.recvWindowCapacity * 2 > this.recvWindow) return
    stock.call(this)
  }
  proto.layerswarmDeferred = true
}
deferWindowUpdates()

export interface HostServices extends Record<string, unknown> {
  identify: Identify
  pubsub?: GossipSub
}

export type Host = Libp2p<HostServices>

export interface HostInit {
  /** Listen multiaddrs (default ['/ip4/127.0.0.1/tcp/0']; use [] for a dial-only client). */
  listen?: string[]
  /** Multiaddrs (with /p2p/<id>) dialled right after start and kept connected. */
  bootstrap?: string[]
  /** The peer's identity (Ed25519); a fresh one is generated when omitted. */
  privateKey?: PrivateKey
  /** gossipsub for announcements (default true). */
  pubsub?: boolean
  /** Connection cap (default 256). */
  maxConnections?: number
  /** Largest frame our streams accept; sizes the muxer's read buffers (default 64 MiB). */
  maxMessageBytes?: number
  /** Delay (and pace) every byte this host sends, for WAN benchmarks (default: LAYERSWARM_LINK_DELAY_MS, else none). */
  linkDelay?: LinkDelay
  /**
   * Addresses to announce instead of the listen addresses (a public address the machine cannot
   * bind, a port its router forwards). Relayed addresses are added once a relay reserves a slot.
   */
  announce?: string[]
  /** Relay serving, hole punching, AutoNAT, UPnP (protocol/reachability.ts). */
  reachability?: ReachabilityInit
  /**
   * Transports (default ['tcp', 'ws']: a node listens on WebSockets when a listen address ends
   * in /ws). A browser passes ['ws'] (it has no TCP; @libp2p/tcp's browser build throws).
   */
  transports?: ReadonlyArray<'tcp' | 'ws'>
  /**
   * Dial plain ws:// and private addresses (default false: libp2p's browser connection gater
   * refuses both). The browser client sets it for the bootstrap list its own gateway served.
   */
  dialInsecure?: boolean
  /** Swarm key and allow-lists (issue #38; default: the process's, network-policy.ts). */
  policy?: NetworkPolicy
}

export async function createHost(init: HostInit = {}, { signal }: AbortOptions = {}): Promise<Host> {
  signal?.throwIfAborted()
  const maxMessageBytes = init.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES
  const services: ServiceFactoryMap<HostServices> = {
    identify: identify(),
    ...(reachabilityServices(init.reachability ?? {}) as ServiceFactoryMap<Record<string, unknown>>)
  }
  if (init.pubsub !== false) {
    services.pubsub = gossipsub({
      // a lone first peer still announces; it simply reaches nobody yet
      allowPublishToZeroTopicPeers: true,
      emitSelf: false,
      // relayed connections carry data and duration limits (reachability.ts), which makes them
      // "limited" to libp2p: gossip runs over them as it did before those limits (issue #39)
      runOnLimitedConnection: true,
      // who may be penalised, for what and how long: see gossip-scoring.ts
      scoreParams: gossipScoreParams()
    })
  }

  const policy = init.policy ?? networkPolicy()
  let started: Host | undefined
  const node = await createLibp2p<HostServices>({
    privateKey: init.privateKey,
    nodeInfo: { name: 'layerswarm', version: PROTOCOL_VERSION },
    addresses: {
      listen: init.listen ?? ['/ip4/127.0.0.1/tcp/0'],
      ...(init.announce?.length ? { announce: init.announce } : {})
    },
    // every host dials /p2p-circuit addresses (peers behind NAT announce those); listening on
    // `/p2p-circuit` reserves a slot on a relay (protocol/reachability.ts)
    transports: [
      ...(init.transports ?? ['tcp', 'ws']).map((t) =>
        t === 'tcp'
          ? coalescingTcp(checkLinkDelay(init.linkDelay) ?? linkDelayFromEnv())
          : (webSockets() as unknown as (components: TcpComponents) => Transport)
      ),
      relayTransport()
    ],
    // a private swarm (issue #38): pnet under Noise, and the allow-lists at the gater
    ...(policy.swarmKey ? { connectionProtector: swarmKeyProtector(policy.swarmKey, { onRefused: policy.onRefused }) } : {}),
    connectionGater: {
      ...allowListGater(policy),
      ...(init.dialInsecure ? { denyDialMultiaddr: () => false } : {}),
      // a relay refuses reservations past its per-IP share (issue #39)
      ...(init.reachability?.relayServer
        ? { denyInboundRelayReservation: relayReservationGate(() => started, init.reachability.relayMaxReservationsPerIp) }
        : {})
    },
    connectionEncrypters: [noise()],
    streamMuxers: [
      yamux({
        maxInboundStreams: 4096,
        maxOutboundStreams: 4096,
        // Data that arrives before a stream's reader attaches (during protocol negotiation)
        // is held by the stream; the 4 MiB default would reset streams with larger frames.
        streamOptions: { maxReadBufferLength: 2 * maxMessageBytes + 1024 * 1024 }
      })
    ],
    connectionManager: {
      maxConnections: init.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
      // local swarms open many connections from one address at once (tests, demo)
      inboundConnectionThreshold: 100,
      maxIncomingPendingConnections: 64,
      dialTimeout: 10_000
    },
    connectionMonitor: {
      // Forward passes may block the event loop for seconds; a missed ping must not cut
      // the connection a session lives on. Dead peers still surface as closed sockets and
      // as step timeouts, which drive failover (docs/design.md §2).
      abortConnectionOnPingFailure: false
    },
    services
  })
  started = node
  trackReachability(node)

  try {
    signal?.throwIfAborted()
    await dialBootstrap(node, init.bootstrap ?? [], { signal })
    signal?.throwIfAborted()
  } catch (err) {
    await node.stop()
    throw err
  }
  return node
}

type TcpComponents = { logger: ComponentLogger; metrics?: Metrics }

/** What we touch of @libp2p/tcp's MultiaddrConnection: its socket and its per-chunk sendData. */
interface TcpConnection {
  socket?: Socket
  sendData(data: Iterable<Uint8Array> & { byteLength: number; subarray(): Uint8Array }): {
    sentBytes: number
    canSendMore: boolean
  }
}

/**
 * @libp2p/tcp writes every chunk of an outgoing list with its own socket.write: a Noise frame
 * (length, one ciphertext piece per chunk of the yamux frame, tag) costs five syscalls and,
 * with TCP_NODELAY, up to five segments. This writes each list as one buffer (one copy of a
 * frame, one syscall), still synchronously: corking until the end of the tick saved a little
 * more but delays writes, which makes a libp2p shutdown race (a stream reset sent on a closing
 * connection throws) likely. Bytes and their order on the wire are unchanged.
 */
function coalesceWrites(maConn: MultiaddrConnection): MultiaddrConnection {
  const conn = maConn as unknown as TcpConnection
  const socket = conn.socket
  if (socket === undefined || typeof socket.write !== 'function') return maConn
  conn.sendData = (data) => ({ sentBytes: data.byteLength, canSendMore: socket.write(data.subarray()) })
  // libp2p resets a stream the remote opens while our connection is closing (stop()), and that
  // reset frame reaches a TCP connection that throws on 'closing' from inside an event handler:
  // an uncaught exception that kills the process on exit. Such a frame has nowhere to go; drop it.
  const ma = maConn as MultiaddrConnection & { writeStatus?: string }
  const send = maConn.send.bind(maConn)
  maConn.send = (data) => (ma.writeStatus === 'closing' || ma.writeStatus === 'closed' ? true : send(data))
  return maConn
}

/** tcp() whose connections (dialled and accepted) coalesce their writes (and are delayed, when asked: link-delay.ts). */
function coalescingTcp(delay?: LinkDelay): (components: TcpComponents) => Transport {
  const prepare = (maConn: MultiaddrConnection): MultiaddrConnection =>
    delay ? delayWrites(coalesceWrites(maConn), delay) : coalesceWrites(maConn)
  const factory = tcp() as unknown as (components: TcpComponents) => Transport
  return (components) => {
    const transport = factory(components)
    const wrap = (upgrader: Upgrader): Upgrader => {
      const wrapped = Object.create(upgrader) as Upgrader
      wrapped.upgradeInbound = (maConn, opts) => upgrader.upgradeInbound(prepare(maConn), opts)
      wrapped.upgradeOutbound = (maConn, opts) => upgrader.upgradeOutbound(prepare(maConn), opts)
      return wrapped
    }
    const dial = transport.dial.bind(transport)
    const createListener = transport.createListener.bind(transport)
    transport.dial = (ma, options) => dial(ma, { ...options, upgrader: wrap(options.upgrader) })
    transport.createListener = (options) => createListener({ ...options, upgrader: wrap(options.upgrader) })
    return transport
  }
}

export interface BootstrapResult {
  connected: PeerId[]
  failed: Array<{ addr: string; error: Error }>
}

/**
 * Dials each bootstrap multiaddr directly (the @libp2p/bootstrap module is not needed for
 * a fixed list) and tags reachable peers KEEP_ALIVE, so libp2p's reconnect queue redials
 * them if the connection drops. Failures are returned, not thrown: a node may start
 * before its bootstrap peers do.
 */
export async function dialBootstrap(node: Libp2p, addrs: string[], { signal }: AbortOptions = {}): Promise<BootstrapResult> {
  const result: BootstrapResult = { connected: [], failed: [] }
  await Promise.all(
    addrs.map(async (addr) => {
      try {
        const conn = await node.dial(multiaddr(addr), { signal })
        await node.peerStore.merge(conn.remotePeer, { tags: { [`${KEEP_ALIVE}-layerswarm-bootstrap`]: { value: 50 } } })
        result.connected.push(conn.remotePeer)
      } catch (err) {
        result.failed.push({ addr, error: err as Error })
      }
    })
  )
  return result
}
