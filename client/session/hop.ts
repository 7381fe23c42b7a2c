import type { AbortOptions } from '@libp2p/interface'
import { multiaddr } from '@multiformats/multiaddr'
import { chainedStepBinding, type HopKeys, sha256, stepTag } from '../../crypto/index.js'
import {
  createSessionCaller,
  DEFAULT_MAX_MESSAGE_BYTES,
  type DType,
  decodeTensor,
  encodeTensor,
  fetchInfo,
  type HeadRequest,
  type HopTiming,
  type Host,
  MAX_AWAITED_STEPS,
  MAX_CONTROL_BYTES,
  MalformedMessageError,
  type Receipt,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionCaller,
  STEP_SLACK_BYTES,
  solveOpenProof,
  tensorByteLength
} from '../../protocol/index.js'
import { HopAbandonedError } from '../errors.js'
import { hopSessionKeys } from './hop-keys.js'
import type { HopTarget } from './hop-target.js'
import { chainOpenFields } from './next-hop.js'
import type { WireLedger } from './wire-ledger.js'

export { nextHopAddrs } from './next-hop.js'
export type { HopTarget }

export interface HopStepOutcome {
  readonly hidden: Float32Array
  readonly timings: HopTiming[]
  readonly receipts: Receipt[]
  /** Tensor data bytes sent and received, as the hop's receipt hashes them. */
  readonly sent: Uint8Array
  readonly received: Uint8Array
  /** Issue #35: the head's sealed top-k, when the step asked it (head-channel.ts). */
  readonly sealedHead?: Uint8Array
}

/** A step's options: its deadline, and (issue #35) the head request for the last block's hop. */
export type HopStepOptions = AbortOptions & { head?: HeadRequest }

export interface HopOpenInit {
  readonly sessionId: string
  readonly modelId: string
  readonly maxLength: number
  readonly wireDtype: DType
  readonly next?: HopTarget
  readonly upstream?: string
  /** Chained, per-hop ids (issue #39, chain-ids.ts): the next hop's session id, which this hop forwards under. */
  readonly nextSessionId?: string
  /** Chained, per-hop ids: the upstream hop's session id, which its receipts are signed for. */
  readonly upstreamSessionId?: string
  /** Counts the session's activation bytes per hop (the generate report); canary decoys pass none. */
  readonly ledger?: WireLedger
}

/** A range of a hop's KV to seal (ExportKv): positions [from, to), its sequence and prefix binding. */
export interface KvExportRange {
  readonly from: number
  readonly to: number
  readonly sequence: number
  readonly prefixHash: Uint8Array
  /** A delta after earlier snapshots (from > 0), else a full snapshot. */
  readonly delta: boolean
}

/** Sealed snapshots to import into a hop's session (ImportKv). */
export interface KvImport {
  readonly wrappedKey: Uint8Array
  readonly snapshots: Uint8Array[]
  /** The session id the snapshots were sealed for. */
  readonly snapshotSessionId: string
  readonly prefixHash: Uint8Array
  /** Append after the session's earlier imports (a standby being fed), else a fresh restore. */
  readonly append?: boolean
}

/**
 * The client's one record of a session on one hop: the hop, the session's id on it, its keys and
 * its stream (open, step, await, export, import, close). Every request names this session.
 */
export class HopSession {
  private constructor(
    readonly target: HopTarget,
    /** The session's id on this hop (each route of a pipeline has its own, see RemotePipeline). */
    readonly sessionId: string,
    private readonly caller: SessionCaller,
    private readonly dim: number,
    /** The dtype of this hop's input and output tensors, as negotiated at open. */
    readonly wireDtype: DType,
    /** Keys shared with the hop for this session (never logged). */
    readonly keys: HopKeys,
    /** The hop's verified X25519 public key. */
    readonly hopX25519PublicKey: Uint8Array,
    /** The session's snapshot key: the hop seals exports under it; only the client keeps it. */
    readonly snapshotKey: Uint8Array,
    private readonly ledger?: WireLedger,
    /** Positions the session holds (its open's max length): what one answer may carry at most. */
    readonly maxLength = 0
  ) {}

  /** The hop acknowledged per-hop ids on a chain (Opened.chained_session_ids; chain-ids.ts). */
  chainedSessionIds = false

  static async open(host: Host, target: HopTarget, dim: number, o: HopOpenInit, options: AbortOptions = {}): Promise<HopSession> {
    const { signal } = options
    const addrs = target.addrs.map((a) => multiaddr(a))
    const { keys, hopPub, clientPublicKey, snapshotKey, wrappedSnapshotKey } = await hopSessionKeys(
      host,
      target,
      o.sessionId,
      options
    )
    const stream = await host.dialProtocol(addrs, SESSION_PROTOCOL, { ...SESSION_STREAM_LIMITS, signal })
    // a result carries at most max length rows of f32 (the widest dtype); snapshots are bulk;
    // every other reply is a control message (issue #17: caps on every reply, before decoding)
    // (audits of a round, `results`, carry at most max length rows in all: awaitResults)
    const resultCap = tensorByteLength([o.maxLength, dim], 'f32') + STEP_SLACK_BYTES
    const caps = new Map([
      ['result', resultCap],
      ['results', resultCap + MAX_AWAITED_STEPS * STEP_SLACK_BYTES],
      ['snapshot', DEFAULT_MAX_MESSAGE_BYTES]
    ])
    const caller = createSessionCaller(stream, { maxBodyBytes: (body) => caps.get(body) ?? MAX_CONTROL_BYTES })
    const hop = new HopSession(target, o.sessionId, caller, dim, o.wireDtype, keys, hopPub, snapshotKey, o.ledger, o.maxLength)
    const open = {
      sessionId: o.sessionId,
      modelId: o.modelId,
      start: target.start,
      end: target.end,
      maxLength: o.maxLength,
      wireDtype: o.wireDtype,
      ...chainOpenFields(o),
      clientX25519PublicKey: clientPublicKey,
      wrappedSnapshotKey
    }
    try {
      const res = await caller.call({ type: 'open', open }, { signal }).catch(async (err: { code?: string }) => {
        // a busy node asks a proof of work (protocol/open-proof.ts, issue #39): its info says how much
        if (err.code !== 'PROOF_REQUIRED') throw err
        const { info } = await fetchInfo(host, addrs, { signal })
        const input = { nodePeerId: target.peerId, clientPeerId: host.peerId.toString(), sessionId: o.sessionId }
        return await caller.call(
          { type: 'open', open: { ...open, ...solveOpenProof(input, info.openProofBits ?? 0) } },
          { signal }
        )
      })
      hop.chainedSessionIds = res.type === 'opened' && res.opened.chainedSessionIds === true
    } catch (err) {
      caller.abort(err as Error)
      throw err
    }
    return hop
  }

  /**
   * Run [T, dim] hidden states at startPos through this hop and return its output, with the
   * tensor bytes that went out and came back (what its receipt must hash).
   */
  async sendStep(
    stepId: number,
    startPosition: number,
    hidden: Float32Array,
    { signal, head }: HopStepOptions = {}
  ): Promise<HopStepOutcome> {
    const step = { ...this.stepMessage(stepId, startPosition, hidden, false), ...(head ? { head } : {}) }
    const rows = hidden.length / this.dim
    this.ledger?.transfer(undefined, this.target, this.wireDtype, step.hidden.data.byteLength, rows)
    const res = await this.caller.call({ type: 'step', step }, { signal })
    if (res.type !== 'result' || !res.result.hidden)
      throw new MalformedMessageError(`hop ${this.target.peerId} answered a step without output`)
    this.ledger?.transfer(this.target, undefined, res.result.hidden.dtype, res.result.hidden.data.byteLength, rows)
    return {
      hidden: decodeTensor(res.result.hidden, { shape: [hidden.length / this.dim, this.dim] }),
      timings: res.result.timings,
      receipts: res.result.receipts ?? [],
      sent: step.hidden.data,
      received: res.result.hidden.data,
      ...(res.result.sealedHead ? { sealedHead: res.result.sealedHead } : {})
    }
  }

  /**
   * Chained mode, first hop: send the step one way (Step.one_way) and resolve once it is
   * written. The last hop's awaitResult() brings every hop's timings and receipts with the
   * output; `failed` rejects if any hop of the chain fails this step (never resolves: call
   * settle(requestId) once the output came). `downstream` are the hops after this one, in
   * route order: each gets the client's step tag under its stepMacKey, which it checks before
   * it runs the step.
   */
  async stepChained(
    stepId: number,
    startPosition: number,
    hidden: Float32Array,
    downstream: readonly HopSession[] = [],
    { signal, head }: HopStepOptions = {}
  ) {
    const message = { ...this.stepMessage(stepId, startPosition, hidden, true), ...(head ? { head } : {}) }
    // each tag binds the row count and the hash of the bytes we send: a later hop finds that
    // hash in this hop's signed receipt, which travels with the step (issue #17)
    const inputHash = chainedStepBinding(hidden.length / this.dim, sha256(message.hidden.data))
    const fields = { stepId, startPosition, inputHash }
    // each tag over that hop's own session id (per-hop ids, issue #39): the id its step arrives under
    const hopAuth = downstream.map((h) => stepTag(h.keys.stepMacKey, { ...fields, sessionId: h.sessionId }))
    const step = { ...message, hopAuth, oneWay: true }
    if (this.ledger) {
      // hop-to-hop links: each hop encodes its output in its negotiated dtype (the chain shares one)
      const rows = hidden.length / this.dim
      const chain: HopSession[] = [this, ...downstream]
      this.ledger.transfer(undefined, this.target, this.wireDtype, step.hidden.data.byteLength, rows)
      for (let i = 0; i + 1 < chain.length; i++) {
        const d = chain[i].wireDtype
        this.ledger.transfer(chain[i].target, chain[i + 1].target, d, tensorByteLength([rows, this.dim], d), rows)
      }
    }
    const { requestId, failed } = await this.caller.send({ type: 'step', step }, { signal })
    return { requestId, failed, sent: step.hidden.data }
  }

  /** A chained step's output arrived: stop listening for its failure. */
  settle(requestId: number): void {
    this.caller.settle(requestId)
  }

  /** Chained mode, last hop: the output of step stepId. */
  async awaitResult(stepId: number, rows: number, { signal }: AbortOptions = {}) {
    const res = await this.caller.call({ type: 'await', await: { sessionId: this.sessionId, stepId } }, { signal })
    if (res.type !== 'result' || !res.result.hidden)
      throw new MalformedMessageError(`hop ${this.target.peerId} answered an await without output`)
    this.ledger?.transfer(this.target, undefined, res.result.hidden.dtype, res.result.hidden.data.byteLength, rows)
    return {
      hidden: decodeTensor(res.result.hidden, { shape: [rows, this.dim] }),
      timings: res.result.timings,
      receipts: res.result.receipts ?? [],
      received: res.result.hidden.data,
      ...(res.result.sealedHead ? { sealedHead: res.result.sealedHead } : {})
    }
  }

  /**
   * Chained mode, audits of a middle hop: the outputs it forwarded for several steps, in one
   * request (at most MAX_AWAITED_STEPS, max length rows in all). In the order asked.
   */
  async awaitResults(steps: readonly { stepId: number; rows: number }[], { signal }: AbortOptions = {}) {
    const stepIds = steps.map((s) => s.stepId)
    const res = await this.caller.call({ type: 'awaitResults', awaitResults: { sessionId: this.sessionId, stepIds } }, { signal })
    if (res.type !== 'results' || res.results.length !== steps.length)
      throw new MalformedMessageError(`hop ${this.target.peerId} did not answer each awaited step`)
    return res.results.map((r, i) => {
      if (r.stepId !== stepIds[i] || !r.hidden)
        throw new MalformedMessageError(`hop ${this.target.peerId} answered step ${r.stepId} for ${stepIds[i]}`)
      this.ledger?.transfer(this.target, undefined, r.hidden.dtype, r.hidden.data.byteLength, steps[i].rows)
      return { hidden: decodeTensor(r.hidden, { shape: [steps[i].rows, this.dim] }), received: r.hidden.data }
    })
  }

  /** Ask the hop to seal its KV for [from, to) under the session's snapshot key; the sealed bytes. */
  async exportKv(range: KvExportRange, { signal }: AbortOptions = {}): Promise<Uint8Array> {
    const { from, to, sequence, prefixHash, delta } = range
    const res = await this.caller.call(
      { type: 'exportKv', exportKv: { sessionId: this.sessionId, from, to, sequence, prefixHash, delta } },
      { signal }
    )
    if (res.type !== 'snapshot')
      throw new MalformedMessageError(`hop ${this.target.peerId} answered an export without a snapshot`)
    return res.snapshot.snapshot
  }

  /** Restore this session from sealed snapshots (fresh, or `append` after earlier imports); the positions the hop now holds. */
  async importKv(i: KvImport, { signal }: AbortOptions = {}): Promise<number> {
    const res = await this.caller.call({ type: 'importKv', importKv: { sessionId: this.sessionId, ...i } }, { signal })
    if (res.type !== 'imported') throw new MalformedMessageError(`hop ${this.target.peerId} answered an import without a length`)
    return res.imported.length
  }

  /** Close the session on the hop and its stream (default deadline 2 s); never throws. */
  async close(options: AbortOptions = {}): Promise<void> {
    await this.closeConfirmed(options).catch(() => {})
  }

  /** close(), but throws when the hop did not confirm in time (its stream is aborted then). */
  async closeConfirmed({ signal }: AbortOptions = {}): Promise<void> {
    try {
      await this.caller.call(
        { type: 'close', close: { sessionId: this.sessionId } },
        { signal: signal ?? AbortSignal.timeout(2_000) }
      )
      await this.caller.close({ signal })
    } catch (err) {
      this.caller.abort(new HopAbandonedError('closing'))
      throw err
    }
  }

  abort(): void {
    this.caller.abort(new HopAbandonedError('hop abandoned'))
  }

  private stepMessage(stepId: number, startPosition: number, hidden: Float32Array, chain: boolean) {
    const rows = hidden.length / this.dim
    return {
      sessionId: this.sessionId,
      stepId,
      startPosition,
      hidden: encodeTensor(hidden, [rows, this.dim], this.wireDtype),
      chain
    }
  }
}
