import { setMaxListeners } from 'node:events'
import { generateKeyPair } from '@libp2p/crypto/keys'
import type { PrivateKey } from '@libp2p/interface'
import { bindX25519Key } from '../crypto/index.js'
import {
  createAnnouncer,
  createHost,
  type DType,
  decodeTensor,
  dialBootstrap,
  encodeInfoResponse,
  encodeTensor,
  type HopTiming,
  type Host,
  INFO_PROTOCOL,
  type InfoResponse,
  MalformedMessageError,
  type NoReply,
  PROTOCOL_VERSION,
  REQUEST_STREAM_LIMITS,
  type Receipt,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionRequest,
  type SessionResponseBody,
  serveRequest,
  serveSessionStream,
  sha256,
  signReceipt,
  stepTrace,
  subscribeAnnouncements,
  UnsupportedDtypeError,
  WrongDtypeError,
  WrongModelError
} from '../protocol/index.js'
import type { ModelFile, Shard } from '../shards/index.js'
import { type BusyPoller, createBusyPoller } from './busy-poll.js'
import { ChainLink, requestShape } from './chain.js'
import { BusyError, LeavingError } from './errors.js'
import type { Metrics } from './metrics.js'
import { SessionCrypto } from './session-crypto.js'
import { SessionManager } from './session-manager.js'
import type { Tamper } from './tamper.js'

export interface SwarmNodeInit {
  readonly model: ModelFile
  readonly modelId: string
  readonly shard: Shard
  readonly listen?: string[]
  readonly bootstrap?: string[]
  readonly privateKey?: PrivateKey
  readonly maxSessions?: number
  /** KV positions over all sessions (default: maxSessions × context length). */
  readonly maxCacheTokens?: number
  readonly idleTimeoutMs?: number
  /** How long the last hop waits for a chained step the client awaits. */
  readonly chainTimeoutMs?: number
  readonly announceIntervalMs?: number
  /** Measured decode tokens/s of the span, announced to clients for routing. */
  readonly throughput: number
  /** Wire dtypes this node accepts and announces (`--wire`; default all). */
  readonly wireDtypes?: DType[]
  readonly log?: (event: Record<string, unknown>) => void
  /** For measuring the canary detector: return wrong outputs on some steps (DESIGN.md §5). */
  readonly tamper?: Tamper
  /** Log every session request's source and shape (`--log-level trace`): what this peer sees of its traffic. */
  readonly traceRequests?: boolean
  /** Prometheus metrics (`--metrics`). */
  readonly metrics?: Metrics
  /** Keep the event loop polling this long after each session request (`--busy-poll`; node/busy-poll.ts). */
  readonly busyPollMs?: number
}

/**
 * A swarm peer: a libp2p host serving `info` and `session` for one span of one model, and
 * announcing itself over gossipsub. Bad requests get typed error replies; nothing a peer
 * sends can stop it serving other sessions.
 */
export class SwarmNode {
  readonly sessions: SessionManager
  private readonly chains = new Map<string, ChainLink>()
  private readonly wire = new Map<string, DType>()
  /** Hop keys, key agreement and sealed KV export/import of the sessions. */
  private readonly crypto: SessionCrypto
  /** Set by drain(): no new sessions or steps, only exports and closes. */
  private leaving = false
  private readonly abort = new AbortController()
  private sweeper?: NodeJS.Timeout
  private readonly poller: BusyPoller

  private constructor(
    readonly host: Host,
    private readonly init: SwarmNodeInit,
    private readonly identity: PrivateKey
  ) {
    const maxSessions = init.maxSessions ?? 16
    this.poller = createBusyPoller(init.busyPollMs ?? 0)
    this.sessions = new SessionManager({
      shard: init.shard,
      maxSessions,
      maxCacheTokens: init.maxCacheTokens ?? maxSessions * init.model.config.seqLen,
      idleTimeoutMs: init.idleTimeoutMs ?? 5 * 60_000
    })
    this.crypto = new SessionCrypto({
      peerId: host.peerId.toString(),
      modelId: init.modelId,
      shard: init.shard,
      sessions: this.sessions,
      onRefused: (sessionId, from, code) => {
        if (this.sessions.has(sessionId)) this.sessions.close(sessionId, from)
        this.dropChain(sessionId)
        this.reportSessions()
        this.init.log?.({ event: 'import-refused', sessionId, code })
      }
    })
  }

  static async create(init: SwarmNodeInit): Promise<SwarmNode> {
    const identity = init.privateKey ?? (await generateKeyPair('Ed25519'))
    const host = await createHost({ listen: init.listen, privateKey: identity })
    const node = new SwarmNode(host, init, identity)
    await node.start()
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
      maxSessions: this.init.maxSessions ?? 16,
      activeSessions: this.sessions.active,
      wireDtypes: this.wireDtypes,
      x25519PublicKey: this.crypto.x25519.publicKey,
      x25519Binding: this.crypto.binding,
      kvDtype: shard.kvDType
    }
  }

  private get wireDtypes(): DType[] {
    return this.init.wireDtypes ?? ['f32', 'f16', 'q8_0']
  }

  private async start(): Promise<void> {
    const { host } = this
    const signal = this.abort.signal
    // Every open session stream waits on this one node-wide signal (a listener per pending
    // read, removed when the read ends), so more than 10 live streams is normal, not a leak.
    setMaxListeners(Infinity, signal)
    this.crypto.binding = await bindX25519Key(this.crypto.x25519.publicKey, async (b) => await this.identity.sign(b))
    // An InfoRequest is empty: cap it as decodeInfoRequest does, so no peer can make us buffer 64 MiB per info stream
    const infoLimits = { signal, maxMessageBytes: 1024 }
    await host.handle(
      INFO_PROTOCOL,
      (stream) => serveRequest(stream, () => encodeInfoResponse(this.info()), infoLimits),
      REQUEST_STREAM_LIMITS
    )
    await host.handle(
      SESSION_PROTOCOL,
      (stream, connection) => {
        const from = connection.remotePeer.toString()
        const handler = async (req: SessionRequest, sig?: AbortSignal): Promise<SessionResponseBody | NoReply> => {
          this.poller.touch()
          try {
            return await this.handle(req, from, sig)
          } finally {
            this.poller.touch() // the window runs from the end of the request: a step computes longer than it
          }
        }
        return serveSessionStream(stream, handler, {
          peerId: this.peerId,
          signal,
          onError: (err, req) => {
            const code = (err as { code?: string }).code ?? 'INTERNAL'
            this.init.metrics?.error(code)
            this.init.log?.({ event: 'request-error', code, type: req?.type, message: err.message })
          }
        })
      },
      SESSION_STREAM_LIMITS
    )
    this.sweeper = setInterval(() => {
      // every session has a wire entry (chained ones a link too): drop both once it expired
      for (const id of this.wire.keys()) if (!this.sessions.has(id)) this.dropChain(id)
      const n = this.sessions.sweep()
      if (n > 0) {
        this.reportSessions()
        this.init.log?.({ event: 'sessions-expired', count: n })
      }
    }, 5_000)
    this.sweeper.unref()
    if (this.init.bootstrap?.length) await dialBootstrap(host, this.init.bootstrap, signal)
    // Subscribing makes this peer relay others' announcements (gossipsub forwards only
    // topics it is subscribed to), so a client bootstrapped to one peer learns them all.
    if (host.services.pubsub) subscribeAnnouncements(host, () => {}, signal)
    if (host.services.pubsub && this.init.privateKey) {
      createAnnouncer(host, {
        privateKey: this.init.privateKey,
        intervalMs: this.init.announceIntervalMs ?? 5_000,
        signal,
        content: () => ({
          modelId: this.init.modelId,
          start: this.init.shard.start,
          end: this.init.shard.end,
          throughput: this.init.throughput,
          freeCacheTokens: this.sessions.freeCacheTokens,
          wireDtypes: this.wireDtypes,
          version: PROTOCOL_VERSION,
          x25519PublicKey: this.crypto.x25519.publicKey,
          x25519Binding: this.crypto.binding,
          kvDtype: this.init.shard.kvDType
        }),
        onError: () => {}
      })
    }
  }

  private async handle(req: SessionRequest, from: string, signal?: AbortSignal): Promise<SessionResponseBody | NoReply> {
    const dim = this.init.model.config.dim
    if (this.init.traceRequests) this.init.log?.({ event: 'request', from, ...requestShape(req) })
    switch (req.type) {
      case 'open': {
        const o = req.open
        if (this.leaving) throw new BusyError('this peer is leaving')
        if (o.modelId !== this.init.modelId)
          throw new WrongModelError(`this peer serves model ${this.init.modelId}, not ${o.modelId}`)
        if (!this.wireDtypes.includes(o.wireDtype)) {
          throw new UnsupportedDtypeError(`this peer accepts wire dtypes ${this.wireDtypes.join(', ')}, not ${o.wireDtype}`)
        }
        const keys = this.crypto.keysFor(o, from)
        this.sessions.open({
          sessionId: o.sessionId,
          start: o.start,
          end: o.end,
          maxLength: o.maxLength,
          owner: from,
          upstream: o.upstreamPeerId
        })
        this.wire.set(o.sessionId, o.wireDtype)
        if (keys) this.crypto.set(o.sessionId, keys)
        this.init.metrics?.sessionsTotal.inc()
        this.reportSessions()
        if (o.nextHops.length > 0 || o.upstreamPeerId) this.chains.set(o.sessionId, new ChainLink(this.host, o.nextHops[0]))
        this.init.log?.({
          event: 'session-open',
          sessionId: o.sessionId,
          span: [o.start, o.end],
          chained: this.chains.has(o.sessionId)
        })
        return { type: 'opened', opened: { sessionId: o.sessionId } }
      }
      case 'step': {
        const s = req.step
        if (this.leaving) throw new LeavingError(`this peer is leaving: export session ${s.sessionId} and move it`)
        const hopAuth = this.crypto.authorizeStep(s, from)
        const hidden = decodeTensor(s.hidden, { shape: [undefined, dim] })
        // the dtype negotiated at open, on both ends of every link of the session (a chain shares
        // one); checked after the decode, so a malformed tensor is MALFORMED whatever its dtype
        const wire = this.wire.get(s.sessionId)
        if (wire !== undefined && s.hidden.dtype !== wire) {
          throw new WrongDtypeError(
            `session ${s.sessionId} was opened with wire dtype ${wire}, this step carries ${s.hidden.dtype}`
          )
        }
        const out = this.sessions.step(s.sessionId, from, s.stepId, s.startPosition, hidden)
        stepTrace('computed', s.stepId)
        const rows = hidden.length / dim
        // A tampering peer still signs what it sends: its receipt becomes the evidence.
        const output = this.init.tamper
          ? this.init.tamper.apply({
              sessionId: s.sessionId,
              stepId: s.stepId,
              input: hidden,
              output: out.output,
              startPosition: s.startPosition,
              rows
            })
          : out.output
        const tensor = encodeTensor(output, [rows, dim], this.wire.get(s.sessionId) ?? 'f32')
        const timing = { peerId: this.peerId, computeMs: out.computeMs }
        this.init.metrics?.step(rows > 1 ? 'prefill' : 'decode', rows, out.computeMs / 1000)
        this.init.metrics?.bytes('in', s.hidden.data.byteLength)
        this.init.metrics?.bytes('out', tensor.data.byteLength)
        const link = this.chains.get(s.sessionId)
        const result = (extra: { hidden?: typeof tensor; timings: HopTiming[]; receipts: Receipt[] }): SessionResponseBody => ({
          type: 'result',
          result: { sessionId: s.sessionId, stepId: s.stepId, ...extra }
        })
        if (s.oneWay && s.chain && link) {
          // One-way chained step: our receipt travels on with the step (signed before forwarding,
          // so no acknowledgement has to come back), and the last hop hands every hop's receipts
          // and timings to the client with the output. Upstream hears only of failures.
          const receipt = await this.receipt(s.sessionId, s.stepId, s.hidden.data, tensor.data)
          const timings = [...(s.timings ?? []), timing]
          const receipts = [...(s.receipts ?? []), receipt]
          if (!link.next) {
            link.deliver(s.stepId, tensor, timings, receipts)
            return { type: 'noReply', failure: Promise.resolve() }
          }
          const failure = link.send({ ...s, hidden: tensor, hopAuth, timings, receipts }, signal)
          // kept for the client's audit (an AwaitResult to a middle hop): canaries check middle hops this way
          link.deliver(s.stepId, tensor, [timing], [receipt])
          return { type: 'noReply', failure: failure.then((f) => f) }
        }
        if (s.chain && link?.next) {
          // Forward first (the step is on the socket when forward() first yields) and sign our
          // receipt while the next hops compute.
          const forwarded = link.forward({ ...s, hidden: tensor, chain: true, hopAuth }, signal)
          forwarded.catch(() => {}) // awaited below
          const receipt = await this.receipt(s.sessionId, s.stepId, s.hidden.data, tensor.data)
          // kept for the client's audit (an AwaitResult to a middle hop): canaries check middle hops this way
          link.deliver(s.stepId, tensor, [timing], [receipt])
          const after = await forwarded
          return result({ timings: [timing, ...after.timings], receipts: [receipt, ...after.receipts] })
        }
        const receipt = await this.receipt(s.sessionId, s.stepId, s.hidden.data, tensor.data)
        if (!s.chain || !link) return result({ hidden: tensor, timings: [timing], receipts: [receipt] })
        link.deliver(s.stepId, tensor, [timing], [receipt])
        return result({ timings: [timing], receipts: [receipt] })
      }
      case 'await': {
        const link = this.chains.get(req.await.sessionId)
        // owner only: an await consumes the output, so anyone else could read it and starve the client
        this.sessions.checkOwner(req.await.sessionId, from)
        if (!link) throw new MalformedMessageError(`session ${req.await.sessionId} was not opened for chained forwarding`)
        const got = await link.await(req.await.stepId, this.init.chainTimeoutMs ?? 30_000, signal)
        return {
          type: 'result',
          result: {
            sessionId: req.await.sessionId,
            stepId: req.await.stepId,
            hidden: got.hidden,
            timings: got.timings,
            receipts: got.receipts
          }
        }
      }
      case 'rewind':
        this.sessions.rewind(req.rewind.sessionId, from, req.rewind.length)
        return { type: 'rewound', rewound: { sessionId: req.rewind.sessionId, length: req.rewind.length } }
      case 'close':
        this.sessions.close(req.close.sessionId, from)
        this.dropChain(req.close.sessionId)
        this.reportSessions()
        return { type: 'closed', closed: { sessionId: req.close.sessionId } }
      case 'exportKv':
        return this.crypto.exportKv(req.exportKv, from)
      case 'importKv':
        return this.crypto.importKv(req.importKv, from)
    }
  }

  /** Our signed receipt for a step: the span this session runs and the hashes of what we got and sent. */
  private async receipt(sessionId: string, stepId: number, input: Uint8Array, output: Uint8Array): Promise<Receipt> {
    const [start, end] = this.init.shard.sessionSpan(sessionId)
    const fields = { sessionId, stepId, start, end, inputHash: sha256(input), outputHash: sha256(output) }
    if (!this.init.privateKey)
      return {
        peerId: this.peerId,
        start,
        end,
        inputHash: fields.inputHash,
        outputHash: fields.outputHash,
        signature: new Uint8Array(64)
      }
    return await signReceipt(fields, this.peerId, this.init.privateKey)
  }

  private reportSessions(): void {
    const free = this.sessions.freeCacheTokens
    this.init.metrics?.sessionState(this.sessions.active, this.sessions.reservedTokens, free)
  }

  private dropChain(sessionId: string): void {
    this.chains.get(sessionId)?.close()
    this.chains.delete(sessionId)
    this.wire.delete(sessionId)
    this.crypto.drop(sessionId)
  }

  /**
   * Planned leave (SIGTERM): refuse new sessions and steps with LEAVING, so each client exports
   * its sessions' KV (sealed under keys only it can hand on) and moves them to other peers;
   * resolves once every session was closed or after `graceMs`.
   */
  async drain(graceMs: number): Promise<void> {
    this.leaving = true
    const until = Date.now() + graceMs
    while (this.sessions.active > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 50))
  }

  async stop(): Promise<void> {
    this.poller.stop()
    this.abort.abort()
    if (this.sweeper) clearInterval(this.sweeper)
    for (const id of [...this.chains.keys()]) this.dropChain(id)
    this.sessions.closeAll()
    await this.host.stop()
  }
}
