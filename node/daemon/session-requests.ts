/**
 * What a node does with each /layerswarm/session request (docs/design.md §2 and §6), over the
 * NodeSession records of its SessionManager. Every refusal is a typed protocol error; cheap
 * checks (caps, ownership, sizes) run before any key agreement or tensor decoding.
 */
import type { AbortOptions } from '@libp2p/interface'
import type { PeerSource } from '../../protocol/index.js'
import {
  BusyError,
  checkOpenProof,
  DEFAULT_MAX_MESSAGE_BYTES,
  type DType,
  decodeTensor,
  encodeTensor,
  type HopTiming,
  type Host,
  LeavingError,
  MAX_CONTROL_BYTES,
  MalformedMessageError,
  type NoReply,
  openProofBits,
  type Receipt,
  type SessionRequest,
  type SessionResponseBody,
  STEP_SLACK_BYTES,
  sha256,
  signReceipt,
  stepTrace,
  tensorByteLength,
  UnknownSessionError,
  UnsupportedDtypeError,
  WrongDtypeError,
  WrongModelError
} from '../../protocol/index.js'
import { DEFAULT_CHAIN_TIMEOUT_MS } from '../options.js'
import { ChainLink, requestShape } from './chain.js'
import { HeadServer } from './head-serve.js'
import type { NextHopPolicy } from './next-hop-policy.js'
import type { NodeSession } from './node-session.js'
import type { SessionCrypto } from './session-crypto.js'
import type { SessionManager } from './session-manager.js'
import type { NodeStepQueue } from './step-batch-run.js'
import type { SwarmNodeInit } from './swarm-node-init.js'
import { upstreamClientInputHash } from './upstream-step.js'

type Step = Extract<SessionRequest, { type: 'step' }>['step']

export interface SessionRequestsContext {
  readonly host: Host
  readonly init: SwarmNodeInit
  readonly sessions: SessionManager
  readonly crypto: SessionCrypto
  readonly peerId: string
  readonly wireDtypes: readonly DType[]
  readonly nextHops: NextHopPolicy
  /** Steps of all sessions, batched over the span (node/daemon/step-batch-run.ts). */
  readonly steps: NodeStepQueue
  /** Set by drain(): no new sessions or steps, only exports and closes. */
  leaving(): boolean
  /** Sessions were opened or closed: report the gauges. */
  changed(): void
}

export class SessionRequests {
  /** Issue #35: the head, for steps that ask it of the last block's hop. */
  private readonly head: HeadServer

  constructor(private readonly ctx: SessionRequestsContext) {
    const { model, shard, tamperHead } = ctx.init
    this.head = new HeadServer({ model, shard, peerId: ctx.peerId, tamper: tamperHead })
  }

  /**
   * Size caps per request body, checked before decoding (issue #17): a step carries at most its
   * session's max length of rows; steps and imports to a session `from` may not use are capped
   * like control messages, so a stranger never gets more than MAX_CONTROL_BYTES decoded.
   */
  maxBodyBytes(body: string, sessionId: string | undefined, from: string): number {
    const s = sessionId === undefined ? undefined : this.ctx.sessions.find(sessionId, from)
    if (body === 'step' && s !== undefined) {
      return tensorByteLength([s.maxLength, this.ctx.init.model.config.dim], s.wireDtype) + STEP_SLACK_BYTES
    }
    if (body === 'importKv' && s?.owner === from) return DEFAULT_MAX_MESSAGE_BYTES
    return MAX_CONTROL_BYTES
  }

  /** `options.source`: where the connection comes from (per-IP shares at open; undefined: loopback). */
  async handle(
    req: SessionRequest,
    from: string,
    options: AbortOptions & { source?: PeerSource } = {}
  ): Promise<SessionResponseBody | NoReply> {
    const { init, sessions, crypto } = this.ctx
    const { signal } = options
    if (init.traceRequests) init.log?.({ event: 'request', from, ...requestShape(req) })
    switch (req.type) {
      case 'open':
        return await this.open(req.open, from, options)
      case 'step':
        return await this.serveStep(req.step, from, options)
      case 'await': {
        // owner only: an await consumes the output, so anyone else could read it and starve the client
        const s = sessions.owned(req.await.sessionId, from)
        if (!s.chain) throw new MalformedMessageError(`session ${req.await.sessionId} was not opened for chained forwarding`)
        const got = await s.chain.await(req.await.stepId, init.chainTimeoutMs ?? DEFAULT_CHAIN_TIMEOUT_MS, { signal })
        const { sessionId, stepId } = req.await
        return { type: 'result', result: { sessionId, stepId, ...got } }
      }
      case 'awaitResults': {
        // audits of a round in one request (client/verification/audit-batch.ts): owner only, as an await
        const { sessionId, stepIds } = req.awaitResults
        const s = sessions.owned(sessionId, from)
        if (!s.chain) throw new MalformedMessageError(`session ${sessionId} was not opened for chained forwarding`)
        if (new Set(stepIds).size !== stepIds.length) throw new MalformedMessageError('await_results.step_ids repeats a step')
        const chain = s.chain
        const timeoutMs = init.chainTimeoutMs ?? DEFAULT_CHAIN_TIMEOUT_MS
        const got = await Promise.all(stepIds.map((id) => chain.await(id, timeoutMs, { signal })))
        return { type: 'results', results: got.map((g, i) => ({ sessionId, stepId: stepIds[i], ...g })) }
      }
      case 'rewind':
        sessions.rewind(sessions.owned(req.rewind.sessionId, from), req.rewind.length)
        return { type: 'rewound', rewound: { sessionId: req.rewind.sessionId, length: req.rewind.length } }
      case 'close':
        sessions.close(sessions.owned(req.close.sessionId, from))
        this.ctx.changed()
        return { type: 'closed', closed: { sessionId: req.close.sessionId } }
      case 'exportKv':
        return crypto.sealKv(sessions.owned(req.exportKv.sessionId, from), req.exportKv)
      case 'importKv': {
        const s = sessions.owned(req.importKv.sessionId, from)
        sessions.used(s) // an import fills the KV as a prefill would: the session is in use
        // at most this many positions (the sealed bytes bound the rows): held as it is filled
        const bytes = req.importKv.snapshots.reduce((n, b) => n + b.length, 0)
        const base = req.importKv.append ? this.ctx.init.shard.sessionLength(s.key) : 0
        sessions.checkGrowth(s, base + Math.ceil(bytes / this.ctx.init.shard.kvBytesPerPosition(s.key)))
        return crypto.openKv(s, req.importKv)
      }
    }
  }

  private async open(
    o: Extract<SessionRequest, { type: 'open' }>['open'],
    from: string,
    options: AbortOptions & { source?: PeerSource } = {}
  ): Promise<SessionResponseBody> {
    const { init, sessions, crypto, wireDtypes } = this.ctx
    if (this.ctx.leaving()) throw new BusyError('this peer is leaving')
    if (o.modelId !== init.modelId) throw new WrongModelError(`this peer serves model ${init.modelId}, not ${o.modelId}`)
    if (!wireDtypes.includes(o.wireDtype)) {
      throw new UnsupportedDtypeError(`this peer accepts wire dtypes ${wireDtypes.join(', ')}, not ${o.wireDtype}`)
    }
    // the proof of work first (one hash), for a source the load asks one of (loopback: none; issue #39)
    const source = options.source
    const bits = source ? openProofBits(sessions.active, sessions.capacity) : 0
    checkOpenProof({ nodePeerId: this.ctx.peerId, clientPeerId: from, sessionId: o.sessionId }, bits, o)
    const request = {
      sessionId: o.sessionId,
      start: o.start,
      end: o.end,
      maxLength: o.maxLength,
      owner: from,
      upstream: o.upstreamPeerId,
      wireDtype: o.wireDtype,
      source
    }
    // caps, duplicates, spans and the next hop's address first: X25519 only for an open that can succeed
    sessions.checkOpen(request)
    if (o.nextHops[0]) await this.ctx.nextHops.resolve(o.nextHops[0], options)
    const keys = crypto.keysFor(o, from)
    const chained = o.nextHops.length > 0 || o.upstreamPeerId !== undefined
    const chain = chained ? new ChainLink(this.ctx.host, o.nextHops[0], this.ctx.nextHops) : undefined
    const upstreamSessionId = o.upstreamSessionId
    sessions.open(request, { keys, chain, ...(upstreamSessionId ? { upstreamSessionId } : {}) })
    init.metrics?.sessionsTotal.inc()
    this.ctx.changed()
    init.log?.({ event: 'session-open', sessionId: o.sessionId, span: [o.start, o.end], chained })
    // a chained hop honours the per-hop ids (NextHop.session_id, upstream_session_id; issue #39)
    return { type: 'opened', opened: { sessionId: o.sessionId, ...(chained ? { chainedSessionIds: true } : {}) } }
  }

  /** The session a step is for: the sender's own, or one it feeds whose client tag verifies. */
  private async stepSession(s: Step, from: string): Promise<{ session: NodeSession; tags: Uint8Array[]; fromUpstream: boolean }> {
    const { sessions, crypto } = this.ctx
    const own = sessions.find(s.sessionId, from)
    if (own?.owner === from) return { session: sessions.owned(s.sessionId, from), tags: s.hopAuth ?? [], fromUpstream: false }
    const fed = sessions.fedBy(s.sessionId, from)
    if (fed.length === 0) throw new UnknownSessionError(`no session ${s.sessionId} of yours here`)
    const rows = s.hidden.shape.length === 2 ? s.hidden.shape[0] : 0
    // the upstream's receipt is signed for its own session id: with per-hop ids (issue #39) not
    // the one the step came under. One check per id the candidates name (almost always one).
    const upstreamId = (f: NodeSession): string => f.upstreamSessionId ?? s.sessionId
    let refusal: unknown
    for (const id of new Set(fed.map(upstreamId))) {
      try {
        const hash = await upstreamClientInputHash(s, from, this.ctx.init.modelId, id)
        const { session, tags } = crypto.upstreamStep(
          fed.filter((f) => upstreamId(f) === id),
          s,
          rows,
          hash
        )
        return { session, tags, fromUpstream: true }
      } catch (err) {
        refusal ??= err
      }
    }
    throw refusal
  }

  private async serveStep(s: Step, from: string, options: AbortOptions = {}): Promise<SessionResponseBody | NoReply> {
    const { init } = this.ctx
    const dim = init.model.config.dim
    if (this.ctx.leaving()) throw new LeavingError(`this peer is leaving: export session ${s.sessionId} and move it`)
    const { session, tags: hopAuth, fromUpstream } = await this.stepSession(s, from)
    this.ctx.sessions.used(session)
    // an upstream hop passed its output with its checked receipt: it served a step (issue #39)
    if (fromUpstream) this.ctx.nextHops.servedStep(from)
    const hidden = decodeTensor(s.hidden, { shape: [undefined, dim] })
    // KV is held as it is filled (issue #39): a step that grows it past what is free is BUSY
    this.ctx.sessions.checkGrowth(session, s.startPosition + hidden.length / dim)
    // the dtype negotiated at open, on both ends of every link of the session (a chain shares
    // one); checked after the decode, so a malformed tensor is MALFORMED whatever its dtype
    if (s.hidden.dtype !== session.wireDtype) {
      throw new WrongDtypeError(
        `session ${s.sessionId} was opened with wire dtype ${session.wireDtype}, this step carries ${s.hidden.dtype}`
      )
    }
    const step = { session, stepId: s.stepId, startPosition: s.startPosition, hidden, fromUpstream }
    const out = await this.ctx.steps.enqueue(step, options)
    stepTrace('computed', s.stepId)
    const rows = hidden.length / dim
    // issue #35: the last block's hop runs the head too; its output then travels in the check dtype
    const head = s.head && this.head.serves(session) ? s.head : undefined
    const tensor = encodeTensor(out.output, [rows, dim], head?.checkDtype ?? session.wireDtype)
    const sealedHead = head && this.head.reply(session, { ...s, head }, out.output)
    const timing = { peerId: this.ctx.peerId, computeMs: out.computeMs }
    init.metrics?.recordStep(rows > 1 ? 'prefill' : 'decode', rows, out.computeMs / 1000)
    init.metrics?.bytes('in', s.hidden.data.byteLength)
    init.metrics?.bytes('out', tensor.data.byteLength)
    const link = session.chain
    const receipt = () => this.receipt(session, s.stepId, s.startPosition, s.hidden.data, tensor.data)
    const result = (extra: { hidden?: typeof tensor; timings: HopTiming[]; receipts: Receipt[] }): SessionResponseBody => ({
      type: 'result',
      result: { sessionId: s.sessionId, stepId: s.stepId, ...extra, ...(sealedHead ? { sealedHead } : {}) }
    })
    if (s.oneWay && s.chain && link) {
      // One-way chained step: our receipt travels on with the step (signed before forwarding,
      // so no acknowledgement has to come back), and the last hop hands every hop's receipts
      // and timings to the client with the output. Upstream hears only of failures.
      const mine = await receipt()
      const timings = [...(s.timings ?? []), timing]
      const receipts = [...(s.receipts ?? []), mine]
      if (!link.next) {
        link.deliver(s.stepId, tensor, timings, receipts, sealedHead)
        return { type: 'noReply', failure: Promise.resolve() }
      }
      // under the next hop's own id where the client gave one (per-hop ids, issue #39)
      const failure = link.send(
        { ...s, sessionId: link.next.sessionId ?? session.id, hidden: tensor, hopAuth, timings, receipts },
        options
      )
      // kept for the client's audit (an AwaitResult to a middle hop): canaries check middle hops this way
      link.deliver(s.stepId, tensor, [timing], [mine])
      return { type: 'noReply', failure: failure.then((f) => f) }
    }
    if (s.chain && link?.next) {
      // our receipt goes with the step: the next hop's tag binds the client's input hash, which
      // the receipts chain to the bytes it gets (issue #17)
      const mine = await receipt()
      const receipts = [...(s.receipts ?? []), mine]
      const forwarded = link.forward(
        { ...s, sessionId: link.next.sessionId ?? session.id, hidden: tensor, chain: true, hopAuth, receipts },
        options
      )
      forwarded.catch(() => {}) // awaited below
      // kept for the client's audit (an AwaitResult to a middle hop): canaries check middle hops this way
      link.deliver(s.stepId, tensor, [timing], [mine])
      const after = await forwarded
      return result({ timings: [timing, ...after.timings], receipts: [mine, ...after.receipts] })
    }
    const mine = await receipt()
    if (!s.chain || !link) return result({ hidden: tensor, timings: [timing], receipts: [mine] })
    link.deliver(s.stepId, tensor, [timing], [mine], sealedHead)
    return result({ timings: [timing], receipts: [mine] })
  }

  /**
   * Our signed receipt for a step: the span this session runs, the step's position, the model we
   * serve (issue #39: a receipt is good for this step only) and the hashes of what we got and sent.
   */
  private async receipt(
    session: NodeSession,
    stepId: number,
    position: number,
    input: Uint8Array,
    output: Uint8Array
  ): Promise<Receipt> {
    const { start, end } = session
    const { modelId } = this.ctx.init
    const fields = {
      sessionId: session.id,
      stepId,
      position,
      modelId,
      start,
      end,
      inputHash: sha256(input),
      outputHash: sha256(output)
    }
    const key = this.ctx.init.privateKey
    if (!key) {
      const { inputHash, outputHash } = fields
      return { peerId: this.ctx.peerId, start, end, inputHash, outputHash, signature: new Uint8Array(64) }
    }
    return await signReceipt(fields, this.ctx.peerId, key)
  }
}
