import { generateKeyPair } from '@libp2p/crypto/keys'
import type { PrivateKey } from '@libp2p/interface'
import {
  assertStepAuthorized,
  bindX25519Key,
  deriveHopKeys,
  generateX25519KeyPair,
  openSnapshot,
  SnapshotOrderError,
  type SnapshotHeader,
  sealedSnapshotSize,
  sealSnapshot,
  unwrapKey,
  unwrapKeyUnder,
  type X25519KeyPair,
  x25519SharedSecret
} from '../crypto/index.js'
import {
  createAnnouncer,
  createHost,
  decodeTensor,
  type DType,
  dialBootstrap,
  encodeInfoResponse,
  encodeTensor,
  type Host,
  INFO_PROTOCOL,
  type InfoResponse,
  PROTOCOL_VERSION,
  REQUEST_STREAM_LIMITS,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type HopTiming,
  type Receipt,
  type SessionRequest,
  sha256,
  signReceipt,
  type SessionResponseBody,
  serveRequest,
  serveSessionStream,
  subscribeAnnouncements,
  MalformedMessageError,
  WrongModelError
} from '../protocol/index.js'
import type { ModelFile, Shard } from '../shards/index.js'
import { ChainLink } from './chain.js'
import { BadShapeError, BusyError, LeavingError, UnauthorizedError } from './errors.js'
import { SessionManager } from './session-manager.js'
import type { Metrics } from './metrics.js'
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
  readonly wireDtypes?: DType[]
  readonly log?: (event: Record<string, unknown>) => void
  /** For measuring the canary detector: return wrong outputs on some steps (DESIGN.md §5). */
  readonly tamper?: Tamper
  /** Prometheus metrics (`--metrics`). */
  readonly metrics?: Metrics
}

/**
 * What a chained hop checks step tags against: the client cannot know a later hop's input, so
 * its step tags bind an all-zero input hash (DESIGN.md §6; layerswarm.proto Step.hop_auth).
 */
export const CHAINED_STEP_INPUT_HASH = new Uint8Array(32)

/** A session's keys on this hop (never logged), and its reusable export buffers. */
interface SessionKeys {
  readonly clientId: string
  readonly span: readonly [number, number]
  readonly stepMacKey: Uint8Array
  readonly snapshotKey?: Uint8Array
  plain: Uint8Array
  sealed: Uint8Array
}

/** A buffer of at least n bytes: `buf` when it is big enough, else a new one with headroom. */
function atLeast(buf: Uint8Array, n: number): Uint8Array {
  return buf.length >= n ? buf : new Uint8Array(Math.max(n, Math.floor(buf.length * 1.5)))
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
  private readonly keys = new Map<string, SessionKeys>()
  /** This peer's X25519 key for key agreement, and its identity's signature over it. */
  private readonly x25519: X25519KeyPair = generateX25519KeyPair()
  private x25519Binding: Uint8Array = new Uint8Array(0)
  /** Scratch plaintext of imports (reused: fresh large allocations are slow). */
  private importScratch: Uint8Array = new Uint8Array(0)
  /** Set by drain(): no new sessions or steps, only exports and closes. */
  private leaving = false
  private readonly abort = new AbortController()
  private sweeper?: NodeJS.Timeout

  private constructor(
    readonly host: Host,
    private readonly init: SwarmNodeInit,
    private readonly identity: PrivateKey
  ) {
    const maxSessions = init.maxSessions ?? 16
    this.sessions = new SessionManager({
      shard: init.shard,
      maxSessions,
      maxCacheTokens: init.maxCacheTokens ?? maxSessions * init.model.config.seqLen,
      idleTimeoutMs: init.idleTimeoutMs ?? 5 * 60_000
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
      wireDtypes: this.init.wireDtypes ?? ['f32', 'f16', 'q8_0'],
      x25519PublicKey: this.x25519.publicKey,
      x25519Binding: this.x25519Binding
    }
  }

  private async start(): Promise<void> {
    const { host } = this
    const signal = this.abort.signal
    this.x25519Binding = await bindX25519Key(this.x25519.publicKey, async (b) => await this.identity.sign(b))
    // An InfoRequest is empty: cap it as decodeInfoRequest does, so no peer can make us buffer 64 MiB per info stream
    const infoLimits = { signal, maxMessageBytes: 1024 }
    await host.handle(INFO_PROTOCOL, (stream) => serveRequest(stream, () => encodeInfoResponse(this.info()), infoLimits), REQUEST_STREAM_LIMITS)
    await host.handle(
      SESSION_PROTOCOL,
      (stream, connection) => {
        const from = connection.remotePeer.toString()
        return serveSessionStream(stream, (req, sig) => this.handle(req, from, sig), {
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
          wireDtypes: this.init.wireDtypes ?? ['f32', 'f16', 'q8_0'],
          version: PROTOCOL_VERSION,
          x25519PublicKey: this.x25519.publicKey,
          x25519Binding: this.x25519Binding
        }),
        onError: () => {}
      })
    }
  }

  private async handle(req: SessionRequest, from: string, signal?: AbortSignal): Promise<SessionResponseBody> {
    const dim = this.init.model.config.dim
    switch (req.type) {
      case 'open': {
        const o = req.open
        if (this.leaving) throw new BusyError('this peer is leaving')
        if (o.modelId !== this.init.modelId) throw new WrongModelError(`this peer serves model ${this.init.modelId}, not ${o.modelId}`)
        const keys = this.sessionKeys(o, from)
        this.sessions.open({ sessionId: o.sessionId, start: o.start, end: o.end, maxLength: o.maxLength, owner: from, upstream: o.upstreamPeerId })
        this.wire.set(o.sessionId, o.wireDtype)
        if (keys) this.keys.set(o.sessionId, keys)
        this.init.metrics?.sessionsTotal.inc()
        this.reportSessions()
        if (o.nextHops.length > 0 || o.upstreamPeerId) this.chains.set(o.sessionId, new ChainLink(this.host, o.nextHops[0]))
        this.init.log?.({ event: 'session-open', sessionId: o.sessionId, span: [o.start, o.end], chained: this.chains.has(o.sessionId) })
        return { type: 'opened', opened: { sessionId: o.sessionId } }
      }
      case 'step': {
        const s = req.step
        if (this.leaving) throw new LeavingError(`this peer is leaving: export session ${s.sessionId} and move it`)
        const hopAuth = this.authorizeStep(s, from)
        const hidden = decodeTensor(s.hidden, { shape: [undefined, dim] })
        const out = this.sessions.step(s.sessionId, from, s.stepId, s.startPosition, hidden)
        const rows = hidden.length / dim
        // A tampering peer still signs what it sends: its receipt becomes the evidence.
        const output = this.init.tamper ? this.init.tamper.apply({ sessionId: s.sessionId, stepId: s.stepId, input: hidden, output: out.output }) : out.output
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
        if (s.chain && link?.next) {
          // Forward first (the step is on the socket when forward() first yields) and sign our
          // receipt while the next hops compute.
          const forwarded = link.forward({ ...s, hidden: tensor, chain: true, hopAuth }, signal)
          forwarded.catch(() => {}) // awaited below
          const receipt = await this.receipt(s.sessionId, s.stepId, s.hidden.data, tensor.data)
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
          result: { sessionId: req.await.sessionId, stepId: req.await.stepId, hidden: got.hidden, timings: got.timings, receipts: got.receipts }
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
        return this.exportKv(req.exportKv, from)
      case 'importKv':
        return this.importKv(req.importKv, from)
    }
  }

  /** The session's hop keys from the client's X25519 key (none without one), and its snapshot key. */
  private sessionKeys(o: Extract<SessionRequest, { type: 'open' }>['open'], from: string): SessionKeys | undefined {
    const span = [o.start, o.end] as const
    if (!o.clientX25519PublicKey?.length) {
      if (o.wrappedSnapshotKey?.length) throw new UnauthorizedError('a snapshot key needs the client X25519 key')
      return undefined
    }
    const sharedSecret = x25519SharedSecret(this.x25519.secretKey, o.clientX25519PublicKey)
    const hop = deriveHopKeys({ sharedSecret, sessionId: o.sessionId, span, clientPeerId: from, hopPeerId: this.peerId })
    sharedSecret.fill(0)
    const snapshotKey = o.wrappedSnapshotKey?.length
      ? unwrapKeyUnder(hop.snapshotKeyWrapKey, o.wrappedSnapshotKey, { recipientPeerId: this.peerId, sessionId: o.sessionId, span })
      : undefined
    return { clientId: from, span, stepMacKey: hop.stepMacKey, snapshotKey, plain: new Uint8Array(0), sealed: new Uint8Array(0) }
  }

  /**
   * A step from the owner needs nothing more; one from elsewhere (the chained upstream) must
   * carry the client's tag for this hop first in hop_auth. Returns the tags for the hops after us.
   */
  private authorizeStep(s: Extract<SessionRequest, { type: 'step' }>['step'], from: string): Uint8Array[] {
    const tags = s.hopAuth ?? []
    if (!this.sessions.has(s.sessionId) || this.sessions.isOwner(s.sessionId, from)) return tags
    const k = this.keys.get(s.sessionId)
    if (!k) throw new UnauthorizedError(`session ${s.sessionId} has no client key: a step from ${from} cannot be authorized`)
    const fields = { sessionId: s.sessionId, stepId: s.stepId, startPosition: s.startPosition, inputHash: CHAINED_STEP_INPUT_HASH }
    assertStepAuthorized(k.stepMacKey, fields, tags[0])
    return tags.slice(1)
  }

  /** ExportKv: the session's KV for [from, to) sealed under its snapshot key (owner only). */
  private exportKv(e: Extract<SessionRequest, { type: 'exportKv' }>['exportKv'], from: string): SessionResponseBody {
    this.sessions.checkOwner(e.sessionId, from)
    const k = this.keys.get(e.sessionId)
    if (!k?.snapshotKey) throw new UnauthorizedError(`session ${e.sessionId} was opened without a snapshot key`)
    const { shard } = this.init
    const n = (e.to - e.from) * shard.kvBytesPerPosition(e.sessionId)
    k.plain = atLeast(k.plain, n)
    const payload = shard.exportKv(e.sessionId, e.from, e.to, k.plain.subarray(0, n))
    const header: SnapshotHeader = {
      modelId: this.init.modelId,
      sessionId: e.sessionId,
      span: k.span,
      tokenRange: [e.from, e.to],
      prefixHash: e.prefixHash,
      sequence: e.sequence,
      clientId: k.clientId,
      kind: e.delta ? 'delta' : 'full',
      dtype: shard.kvDType
    }
    k.sealed = atLeast(k.sealed, sealedSnapshotSize(header, n))
    const snapshot = sealSnapshot({ key: k.snapshotKey, header, payload, out: k.sealed })
    payload.fill(0)
    return { type: 'snapshot', snapshot: { sessionId: e.sessionId, snapshot } }
  }

  /**
   * ImportKv into a fresh session: unwrap the snapshot key (it must be wrapped to our X25519
   * key), open every snapshot (tag, then every bound field, sequence and order) and only then
   * write the KV. Any refusal closes the session: nothing of it is kept.
   */
  private importKv(im: Extract<SessionRequest, { type: 'importKv' }>['importKv'], from: string): SessionResponseBody {
    this.sessions.checkOwner(im.sessionId, from)
    const { shard } = this.init
    const k = this.keys.get(im.sessionId)
    let key: Uint8Array | undefined
    let used = 0
    try {
      if (!k) throw new UnauthorizedError(`session ${im.sessionId} was opened without a client key`)
      if (shard.sessionLength(im.sessionId) !== 0) throw new BadShapeError(`session ${im.sessionId} already holds KV: import only into a fresh session`)
      key = unwrapKey(im.wrappedKey, this.x25519.secretKey, { recipientPeerId: this.peerId, sessionId: im.sessionId, span: k.span })
      let total = 0
      for (const b of im.snapshots) total += b.length
      this.importScratch = atLeast(this.importScratch, total)
      const opened: Array<{ from: number; payload: Uint8Array }> = []
      let sequence = -1
      let end = 0
      for (let i = 0; i < im.snapshots.length; i++) {
        const last = i === im.snapshots.length - 1
        const expect = {
          modelId: this.init.modelId,
          sessionId: im.snapshotSessionId,
          span: k.span,
          clientId: k.clientId,
          minSequence: sequence + 1,
          ...(i > 0 ? { expectedFrom: end } : {}),
          ...(last ? { prefixHash: im.prefixHash } : {}),
          dtype: shard.kvDType
        }
        const o = openSnapshot(im.snapshots[i], key, expect, this.importScratch.subarray(used))
        used += o.payload.length
        if ((i === 0) !== (o.header.kind === 'full')) throw new SnapshotOrderError('snapshot refused: a full snapshot must come first, then deltas')
        sequence = o.header.sequence
        end = o.header.tokenRange[1]
        opened.push({ from: o.header.tokenRange[0], payload: o.payload })
      }
      for (const o of opened) shard.importKv(im.sessionId, o.from, o.payload, shard.kvDType)
      this.sessions.reset(im.sessionId)
      return { type: 'imported', imported: { sessionId: im.sessionId, length: shard.sessionLength(im.sessionId) } }
    } catch (err) {
      if (this.sessions.has(im.sessionId)) this.sessions.close(im.sessionId, from)
      this.dropChain(im.sessionId)
      this.reportSessions()
      this.init.log?.({ event: 'import-refused', sessionId: im.sessionId, code: (err as { code?: string }).code })
      throw err
    } finally {
      key?.fill(0)
      this.importScratch.fill(0, 0, used)
    }
  }

  /** Our signed receipt for a step: the span this session runs and the hashes of what we got and sent. */
  private async receipt(sessionId: string, stepId: number, input: Uint8Array, output: Uint8Array): Promise<Receipt> {
    const [start, end] = this.init.shard.sessionSpan(sessionId)
    const fields = { sessionId, stepId, start, end, inputHash: sha256(input), outputHash: sha256(output) }
    if (!this.init.privateKey) return { peerId: this.peerId, start, end, inputHash: fields.inputHash, outputHash: fields.outputHash, signature: new Uint8Array(64) }
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
    const keys = this.keys.get(sessionId)
    keys?.snapshotKey?.fill(0)
    keys?.stepMacKey.fill(0)
    this.keys.delete(sessionId)
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
    this.abort.abort()
    if (this.sweeper) clearInterval(this.sweeper)
    for (const id of [...this.chains.keys()]) this.dropChain(id)
    this.sessions.closeAll()
    await this.host.stop()
  }
}
