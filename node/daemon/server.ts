import { setMaxListeners } from 'node:events'
import { generateKeyPair } from '@libp2p/crypto/keys'
import type { AbortOptions, PrivateKey } from '@libp2p/interface'
import { bindX25519Key } from '../../crypto/index.js'
import {
  AnnouncementStore,
  announcementSourceOf,
  type BootstrapResult,
  type ByteBudget,
  createAnnouncer,
  createByteBudget,
  createHost,
  DEFAULT_MAX_MESSAGE_BYTES,
  type DType,
  dialBootstrap,
  encodeInfoResponse,
  type Host,
  INFO_PROTOCOL,
  type InfoResponse,
  MAX_CONTROL_BYTES,
  MAX_INFO_REQUEST_BYTES,
  type NoReply,
  openProofBits,
  PROTOCOL_VERSION,
  peerSource,
  REQUEST_STREAM_LIMITS,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionRequest,
  type SessionResponseBody,
  serveAnnouncements,
  serveRequest,
  serveSessionStream,
  startAnnouncementSync,
  subscribeAnnouncements,
  WIRE_DTYPES
} from '../../protocol/index.js'
import { errorCode, readableModelName } from '../../shards/index.js'
import {
  DEFAULT_ANNOUNCE_INTERVAL_MS,
  DEFAULT_BATCH_WAIT_MS,
  DEFAULT_BYTES_IN_FLIGHT,
  DEFAULT_MAX_BATCH_ROWS,
  DEFAULT_MAX_QUEUED_STEPS,
  DEFAULT_MAX_SESSIONS,
  SESSION_SWEEP_INTERVAL_MS
} from '../options.js'
import { type BusyPoller, createBusyPoller } from './busy-poll.js'
import { watchConnections } from './connection-watch.js'
import { serveKvMove } from './kv/kv-move.js'
import { createNextHopPolicy } from './next-hop-policy.js'
import { PeerLimits } from './peer-limits.js'
import { SessionCrypto } from './session-crypto.js'
import { SessionManager } from './session-manager.js'
import { SessionRequests } from './session-requests.js'
import { NodeStepQueue } from './step-batch-run.js'
import { announcementContent, type SwarmNodeInit, sessionLimits } from './swarm-node-init.js'

export { defaultSessionsPerPeer, type SwarmNodeInit } from './swarm-node-init.js'

/**
 * A swarm peer: a libp2p host serving `info` and `session` for one span of one model, and
 * announcing itself over gossipsub. Bad requests get typed error replies; nothing a peer
 * sends can stop it serving other sessions.
 */
export class SwarmNode {
  readonly sessions: SessionManager
  /** Steps of every session, batched over the span (continuous batching, issue #18). */
  readonly steps: NodeStepQueue
  /** Hop keys, key agreement and sealed KV export/import of the sessions. */
  private readonly crypto: SessionCrypto
  private readonly requests: SessionRequests
  /** Per-peer request and byte rates, and the node-wide budget of request bytes in flight (issue #17). */
  private readonly peerLimits: PeerLimits
  private readonly budget: ByteBudget
  /** Set by drain(): no new sessions or steps, only exports and closes. */
  private leaving = false
  private readonly abort = new AbortController()
  private sweeper?: NodeJS.Timeout
  private readonly poller: BusyPoller
  /** Verified announcements of the swarm (ours included), served to peers that ask. */
  readonly announcements = new AnnouncementStore()
  /** The outcome of dialling `bootstrap` at start (the CLI reports each failure). */
  bootstrapResult: BootstrapResult = { connected: [], failed: [] }

  private constructor(
    readonly host: Host,
    private readonly init: SwarmNodeInit,
    private readonly identity: PrivateKey
  ) {
    this.poller = createBusyPoller(init.busyPollMs ?? 0)
    this.sessions = new SessionManager(sessionLimits(init))
    this.steps = new NodeStepQueue({
      shard: init.shard,
      sessions: this.sessions,
      maxQueued: init.maxQueuedSteps ?? DEFAULT_MAX_QUEUED_STEPS,
      maxBatchRows: init.maxBatchRows ?? DEFAULT_MAX_BATCH_ROWS,
      gatherMs: init.batchWaitMs ?? DEFAULT_BATCH_WAIT_MS,
      onBatch: (jobs, rows) => init.metrics?.batch(jobs, rows)
    })
    this.crypto = new SessionCrypto({
      peerId: host.peerId.toString(),
      modelId: init.modelId,
      shard: init.shard,
      sessions: this.sessions,
      onRefused: (session, code) => {
        this.sessions.close(session)
        this.reportSessions()
        this.init.log?.({ event: 'import-refused', sessionId: session.id, code })
      }
    })
    this.peerLimits = new PeerLimits(init.peerLimits)
    this.budget = createByteBudget(init.bytesInFlight ?? DEFAULT_BYTES_IN_FLIGHT)
    this.requests = new SessionRequests({
      host,
      init,
      sessions: this.sessions,
      crypto: this.crypto,
      peerId: host.peerId.toString(),
      wireDtypes: this.wireDtypes,
      nextHops: createNextHopPolicy({ host, announcements: this.announcements }),
      steps: this.steps,
      leaving: () => this.leaving,
      changed: () => this.reportSessions()
    })
  }

  /** Start a node; `signal` aborts the start (the host is stopped again), not the running node: stop() does that. */
  static async create(init: SwarmNodeInit, options: AbortOptions = {}): Promise<SwarmNode> {
    options.signal?.throwIfAborted()
    const identity = init.privateKey ?? (await generateKeyPair('Ed25519'))
    const host = await createHost(
      { listen: init.listen, privateKey: identity, announce: init.announce, reachability: init.reachability },
      options
    )
    const node = new SwarmNode(host, init, identity)
    try {
      await node.start(options)
    } catch (err) {
      await node.stop()
      throw err
    }
    return node
  }

  get peerId(): string {
    return this.host.peerId.toString()
  }

  /** Milliseconds this node's event loop spent busy polling (`--busy-poll`). */
  get busyPolledMs(): number {
    return Math.round(this.poller.polledMs)
  }

  get addrs(): string[] {
    return this.host.getMultiaddrs().map((m) => m.toString())
  }

  info(): InfoResponse {
    const { shard, model } = this.init
    return {
      modelId: this.init.modelId,
      version: PROTOCOL_VERSION,
      nLayers: model.config.nLayers,
      dim: model.config.dim,
      start: shard.start,
      end: shard.end,
      throughput: this.init.throughput,
      freeCacheTokens: this.sessions.freeCacheTokens,
      maxSessions: this.init.maxSessions ?? DEFAULT_MAX_SESSIONS,
      activeSessions: this.sessions.active,
      queuedSteps: this.steps.queued,
      wireDtypes: this.wireDtypes,
      x25519PublicKey: this.crypto.x25519.publicKey,
      x25519Binding: this.crypto.binding,
      kvDtype: shard.kvDType,
      ...this.init.hardware,
      modelName: readableModelName(model),
      openProofBits: openProofBits(this.sessions.active, this.sessions.capacity)
    }
  }

  private get wireDtypes(): DType[] {
    return this.init.wireDtypes ?? [...WIRE_DTYPES]
  }

  private async start(options: AbortOptions): Promise<void> {
    const { host } = this
    const signal = this.abort.signal
    options.signal?.throwIfAborted()
    // Every open session stream waits on this one node-wide signal (a listener per pending read, removed when it ends): no leak.
    setMaxListeners(Infinity, signal)
    this.crypto.binding = await bindX25519Key(this.crypto.x25519.publicKey, async (b) => await this.identity.sign(b))
    // An InfoRequest is empty: cap it as decodeInfoRequest does, so no peer can make us buffer 64 MiB per info stream
    const infoLimits = { signal, maxMessageBytes: MAX_INFO_REQUEST_BYTES }
    await host.handle(
      INFO_PROTOCOL,
      (stream) => serveRequest(stream, () => encodeInfoResponse(this.info()), infoLimits),
      REQUEST_STREAM_LIMITS
    )
    await host.handle(
      SESSION_PROTOCOL,
      (stream, connection) => {
        const from = connection.remotePeer.toString()
        const source = peerSource(connection.remoteAddr.toString())
        const handler = async (req: SessionRequest, options?: AbortOptions): Promise<SessionResponseBody | NoReply> => {
          this.poller.touch()
          try {
            return await this.requests.handle(req, from, { ...options, source })
          } finally {
            this.poller.touch() // the window runs from the end of the request: a step computes longer than it
          }
        }
        return serveSessionStream(stream, handler, {
          peerId: this.peerId,
          signal,
          frameCap: () => (this.sessions.holdsAny(from) ? DEFAULT_MAX_MESSAGE_BYTES : MAX_CONTROL_BYTES),
          budget: this.budget,
          admit: (bytes) => this.peerLimits.take(from, bytes),
          maxBodyBytes: (body, sessionId) => this.requests.maxBodyBytes(body, sessionId, from),
          onError: (err, req) => {
            const code = errorCode(err) ?? 'INTERNAL'
            this.init.metrics?.error(code)
            this.init.log?.({ event: 'request-error', code, type: req?.type, message: err.message })
          }
        })
      },
      SESSION_STREAM_LIMITS
    )
    this.init.metrics?.watchRecords({ stopSignal: signal, peerLimits: this.peerLimits, host, budget: this.budget })
    this.sweeper = setInterval(() => {
      const n = this.sessions.sweep()
      if (n > 0) {
        this.reportSessions()
        this.init.log?.({ event: 'sessions-expired', count: n })
      }
    }, SESSION_SWEEP_INTERVAL_MS)
    this.sweeper.unref()
    watchConnections(host, this.sessions, this.announcements, signal)
    await serveAnnouncements(host, this.announcements, { signal })
    const { identity, sessions, crypto, budget, announcements } = this // issue #41: KV moved node to node
    await serveKvMove({ ...this.init, host, identity, sessions, crypto, budget, announcements, signal })
    if (this.init.bootstrap?.length) {
      const dialSignal = options.signal ? AbortSignal.any([signal, options.signal]) : signal
      this.bootstrapResult = await dialBootstrap(host, this.init.bootstrap, { signal: dialSignal })
    }
    options.signal?.throwIfAborted()
    // Subscribing makes this peer relay others' announcements (gossipsub forwards only topics it is subscribed to), so a
    // client bootstrapped to one peer learns them all; it also keeps them, for clients that ask (announcement-exchange.ts).
    // per-source shares of unconfirmed entries: what a relay is over is neither kept nor relayed on (issue #39)
    if (host.services.pubsub)
      subscribeAnnouncements(
        host,
        (a, _from, signed, via) =>
          this.announcements.put(a, signed, Date.now(), via ? announcementSourceOf(host, via) : undefined),
        signal,
        { admit: (a, via) => this.announcements.admits(a, announcementSourceOf(host, via)) }
      )
    // and pull what neighbours hold, for what gossip did not deliver (protocol/announcement-sync.ts)
    startAnnouncementSync(host, this.announcements, {
      intervalMs: this.init.announceIntervalMs ?? DEFAULT_ANNOUNCE_INTERVAL_MS,
      signal
    })
    if (host.services.pubsub && this.init.privateKey) {
      createAnnouncer(host, {
        privateKey: this.init.privateKey,
        intervalMs: this.init.announceIntervalMs ?? DEFAULT_ANNOUNCE_INTERVAL_MS,
        signal,
        onPublished: (a, signed) => {
          this.announcements.confirm(this.peerId) // ours: never evicted by strangers'
          this.announcements.put(a, signed)
        },
        content: () => announcementContent(this.info(), this.init.contentId, this.steps.demand.perMinute()),
        onError: () => {}
      })
    }
  }

  private reportSessions(): void {
    const free = this.sessions.freeCacheTokens
    this.init.metrics?.sessionState(this.sessions.active, this.sessions.reservedTokens, free)
  }

  /**
   * Planned leave (SIGTERM): refuse new sessions and steps with LEAVING, so each client exports
   * its sessions' KV (sealed under keys only it can hand on) and moves them to other peers;
   * resolves once every session was closed or after `graceMs`.
   */
  async drain(graceMs: number, { signal }: AbortOptions = {}): Promise<void> {
    this.leaving = true
    const until = Date.now() + graceMs
    while (this.sessions.active > 0 && Date.now() < until) {
      signal?.throwIfAborted()
      await new Promise((r) => setTimeout(r, 50))
    }
  }

  async stop(): Promise<void> {
    this.poller.stop()
    this.abort.abort()
    if (this.sweeper) clearInterval(this.sweeper)
    this.sessions.closeAll()
    await this.host.stop()
  }
}
