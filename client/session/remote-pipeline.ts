import type { AbortOptions, PrivateKey } from '@libp2p/interface'
import type { Host } from '../../protocol/index.js'
import { type BlockPipeline, errorCode } from '../../shards/index.js'
import { NoRouteError, PeerExcludedError } from '../errors.js'
import { CONVICTED_BAN_MS, FAILOVER_CLOSE_MS } from '../options.js'
import { type KvPath, KvRecovery } from '../recovery/kv-recovery.js'
import type { SwarmView } from '../routing/swarm-view.js'
import type { CanaryMonitor } from '../verification/canary-monitor.js'
import { CanaryObserver } from '../verification/canary-observer.js'
import { ReceiptLedger } from '../verification/receipts.js'
import type { HeadChannel } from './head-channel.js'
import type { HopSession, HopTarget } from './hop.js'
import type { Exclusion, PipelineObserver, PipelineState } from './pipeline-observer.js'
import { openRouteHops } from './route-hops.js'
import { randomSessionId } from './session-id.js'
import { blamedHopOf, type Forwarding, StepTransport, stepDeadline } from './step-transport.js'
import type { WireLedger } from './wire-ledger.js'
import type { WirePreference } from './wire-negotiation.js'

export type { Forwarding, StepHopTiming } from './step-transport.js'

export interface RemotePipelineInit {
  /** Issue #35: the head on the last hop (client/session/head-channel.ts). */
  readonly head?: HeadChannel
  readonly host: Host
  readonly view: SwarmView
  readonly modelId: string
  readonly dim: number
  /** Remote blocks [from, to). */
  readonly from: number
  readonly to: number
  readonly sessionId: string
  readonly maxLength: number
  readonly forwarding: Forwarding
  /** Wire dtype per hop: negotiated against what each hop accepts (client/session/wire-negotiation.ts). */
  readonly wireDtype: WirePreference
  /** Counts activation bytes per hop for the report. */
  readonly wireLedger?: WireLedger
  /** A hop that does not answer a step within this is treated as dead. */
  readonly stepTimeoutMs: number
  readonly banMs: number
  readonly maxFailovers: number
  readonly routeTimeoutMs: number
  readonly log?: (e: Record<string, unknown>) => void
  /** Canary mixing: probes the route's hops after real steps and excludes tampering peers. */
  readonly canaries?: CanaryMonitor
  /** How long a peer convicted by canaries stays out of routes. */
  readonly excludeMs?: number
  /** Keep sealed KV deltas of every hop each this many positions, to fail over without a full replay (off: 0). */
  readonly snapshotEvery?: number
  /**
   * With snapshotEvery: keep a standby peer per span fed with the sealed deltas, which becomes
   * the route when a hop dies (only the positions after its last delta are replayed).
   */
  readonly standby?: boolean
  /** Issue #41: standbys (else holders) fed node to node under grants signed with privateKey ('node', the default), or through the client. */
  readonly kvPath?: KvPath
  readonly privateKey?: PrivateKey
}

/**
 * The remote blocks of one session: route and failover. Steps travel through StepTransport;
 * sealed KV (KvRecovery) and canaries (CanaryObserver) follow as PipelineObservers. It keeps
 * every input row it sent, so when a hop dies, stalls or errs it bans the peer, plans a new route,
 * rebuilds the new hops' KV (standbys, snapshots, then replay of the inputs) and retries the step:
 * outputs are deterministic, so the generated tokens do not change.
 */
export class RemotePipeline implements BlockPipeline {
  private hops: HopSession[] | undefined
  private history = new Float32Array(0)
  private length = 0
  /**
   * Each route gets its own random session id on its hops (randomSessionId): a hop that survived
   * a failover may still hold the old session (its close is best effort), so ids must not
   * collide, and no hop may guess the next one from an id it saw (issue #17: squatting).
   */
  private nextSessionId = randomSessionId()
  /** Positions no later step rewinds (speculative steps' drafts are not, until kept). */
  private committed = 0
  failovers = 0
  /** Closes of hops a failover left, still under way. */
  private readonly closing = new Set<Promise<void>>()
  /** Every hop's signed receipt is checked here (and goes to the canary monitor's replay index). */
  readonly receipts: ReceiptLedger
  readonly routes: HopTarget[][] = []
  /** Peers the canaries convicted while this session ran (its outputs so far are suspect). */
  readonly convicted: string[] = []

  private readonly transport: StepTransport
  private readonly kv: KvRecovery
  /** Told of steps, chained steps, a planned leave and the end, in this order: KV first, then canaries. */
  private readonly observers: PipelineObserver[]

  constructor(private readonly init: RemotePipelineInit) {
    this.receipts = new ReceiptLedger(init.modelId, init.canaries?.replays)
    const { host, view, modelId, dim, maxLength, wireLedger, log, sessionId, forwarding } = init
    this.kv = new KvRecovery({
      host,
      view,
      modelId,
      dim,
      maxLength,
      chained: forwarding === 'chain',
      wirePreference: init.wireDtype,
      wireLedger,
      log,
      snapshotEvery: init.snapshotEvery ?? 0,
      standby: init.standby ?? false,
      kvPath: init.kvPath,
      privateKey: init.privateKey,
      stepTimeoutMs: init.stepTimeoutMs,
      isConvicted: (p) => this.convicted.includes(p) || (init.canaries?.detector.verdict(p).excluded ?? false)
    })
    this.observers = [this.kv]
    if (init.canaries) this.observers.push(new CanaryObserver(init.canaries, { sessionId, forwarding, maxLength }))
    this.transport = new StepTransport({
      dim,
      forwarding,
      sessionId,
      receipts: this.receipts,
      log,
      observers: this.observers,
      head: init.head,
      onHopTime: (peerId, ms, rows, blocks) => view.load.observe(peerId, ms, blocks, rows, view.rttOf(peerId))
    })
  }

  get route(): HopTarget[] {
    return this.routes[this.routes.length - 1] ?? []
  }

  /**
   * `committedRows`: only the step's first rows are final (a speculative step's drafted rows may
   * be rewound by the next step: client/speculation/speculative-decode.ts); default all. Observers see the
   * session's length up to the final rows only, so sealed snapshots never hold a rewound position.
   */
  async forward(
    hidden: Float32Array,
    startPos: number,
    { signal, committedRows, draftLength }: AbortOptions & { committedRows?: number; draftLength?: number } = {}
  ): Promise<Float32Array> {
    let lastErr: unknown
    for (let attempt = 0; attempt <= this.init.maxFailovers; attempt++) {
      signal?.throwIfAborted()
      try {
        this.transport.throwIfPoisoned()
        if (!this.hops) await this.connect(startPos, { signal })
        for (const o of this.observers) await o.beforeStep?.()
        const out = await this.transport.run(this.hops!, this.route, hidden, startPos, () => this.deadline(signal))
        this.remember(hidden, startPos)
        this.committed = Math.min(this.length, startPos + (committedRows ?? hidden.length / this.init.dim))
        await this.stepDone(startPos, hidden.length / this.init.dim, draftLength, { signal })
        return out
      } catch (err) {
        // No route means no peer to fail over to: waiting for one already took routeTimeoutMs.
        if (signal?.aborted) throw err
        // no route left after a next hop failed or was refused: that hop's error (it names the
        // hop and why) is what the user must see, not NO_ROUTE alone (issue #31 item 2)
        if (err instanceof NoRouteError) throw errorCode(lastErr) === 'NEXT_HOP_FAILED' ? lastErr : err
        lastErr = err
        if (errorCode(err) === 'LEAVING' && this.hops) {
          const state = this.state()
          for (const o of this.observers) await o.leaving?.(state, { signal })
        }
        this.fail(err)
      }
    }
    throw lastErr
  }

  /** Observers after a step; a conviction leaves the route now (the next step plans one without it). */
  private async stepDone(
    startPosition: number,
    rows: number,
    draftLength: number | undefined,
    options: AbortOptions
  ): Promise<void> {
    const excluded: Exclusion[] = []
    for (const o of this.observers) {
      const got = await o.stepDone?.(this.state(), { startPosition, rows, draftLength }, options)
      if (got) excluded.push(...got)
    }
    if (excluded.length === 0) return
    this.exclude(excluded)
    this.fail(new PeerExcludedError(excluded[0].peerId))
    this.failovers--
  }

  private exclude(peers: readonly Exclusion[]): void {
    for (const { peerId, why, posterior } of peers) {
      this.init.view.ban(peerId, this.init.excludeMs ?? CONVICTED_BAN_MS)
      this.convicted.push(peerId)
      this.init.log?.({ event: 'excluded', peerId, why, posterior })
    }
  }

  async close(): Promise<void> {
    this.transport.release()
    const offPath = (): Promise<unknown> => this.transport.pending()
    let settled = false
    for (const o of this.observers) {
      if (!o.settle) continue
      settled = true
      const late = await o.settle(offPath)
      if (late.length > 0) this.exclude(late)
    }
    if (!settled) await offPath()
    const hops = this.hops ?? []
    this.hops = undefined
    await Promise.all([...hops.map((h) => h.close()), ...this.closing, ...this.observers.map((o) => o.close?.())])
  }

  private state(): PipelineState {
    return {
      route: this.route,
      hops: this.hops ?? [],
      history: this.history,
      length: this.committed,
      nextSessionId: this.nextSessionId
    }
  }

  private remember(hidden: Float32Array, startPos: number): void {
    const { dim } = this.init
    const end = startPos + hidden.length / dim
    if (this.history.length < end * dim) {
      const grown = new Float32Array(Math.max(end * dim, this.history.length * 2))
      grown.set(this.history.subarray(0, this.length * dim))
      this.history = grown
    }
    this.history.set(hidden, startPos * dim)
    this.length = end
  }

  /** Ban the peer the error names (or the one that timed out) and drop the route. */
  private fail(err: unknown): void {
    const peerId = (err as { peerId?: string }).peerId || blamedHopOf(err)
    if (peerId) this.init.view.ban(peerId, this.init.banMs)
    this.init.log?.({ event: 'failover', peerId, code: errorCode(err), message: (err as Error).message })
    // Free the session on every hop, the blamed one too (issue #16: a convicted peer kept it
    // until its idle timeout, and with decoys that filled its per-client session cap). In the
    // background with a short deadline: a dead or stalling hop only costs an aborted stream.
    for (const h of this.hops ?? []) this.release(h, h.target.peerId === peerId)
    this.hops = undefined
    this.failovers++
  }

  /** Close a hop a failover leaves; close() waits for these (each ends by FAILOVER_CLOSE_MS). */
  private release(hop: HopSession, blamed: boolean): void {
    const closing = hop.closeConfirmed({ signal: AbortSignal.timeout(FAILOVER_CLOSE_MS) }).then(
      () => this.init.log?.({ event: 'hopClosed', peerId: hop.target.peerId, blamed }),
      (e: unknown) =>
        this.init.log?.({ event: 'hopCloseFailed', peerId: hop.target.peerId, blamed, message: (e as Error).message })
    )
    this.closing.add(closing)
    void closing.finally(() => this.closing.delete(closing))
  }

  private async connect(upTo: number, options: AbortOptions): Promise<void> {
    const { view, from, to, dim } = this.init
    // A hop died with fed standbys: they take over their spans with their KV in place (relayed,
    // fresh peers take the other spans; chained, only a complete set takes over).
    const standby = await this.kv.takeover(this.route, options)
    const route =
      standby?.route ??
      (await view.waitForRoute(
        from,
        to,
        this.init.routeTimeoutMs,
        { preference: this.init.wireDtype, chained: this.init.forwarding === 'chain' },
        options
      ))
    // the id standbys were opened with (state().nextSessionId); the one after it is fresh
    const sessionId = this.nextSessionId
    this.nextSessionId = randomSessionId()
    const hops = await openRouteHops(
      this.init.host,
      route,
      dim,
      {
        sessionId,
        modelId: this.init.modelId,
        maxLength: this.init.maxLength,
        ledger: this.init.wireLedger,
        chained: this.init.forwarding === 'chain'
      },
      standby?.hops,
      options
    )
    this.hops = hops
    this.routes.push(route)
    this.init.log?.({
      event: 'route',
      sessionId: this.init.sessionId,
      // the route's own id on its hops (random per connect): tests check it cannot be predicted
      hopSessionId: sessionId,
      // relayed, each hop its own id (route-hops.ts, issue #39); chained, all of them this one
      hopSessionIds: hops.map((h) => h.sessionId),
      forwarding: this.init.forwarding,
      route: route.map((h) => ({ peerId: h.peerId, start: h.start, end: h.end, wire: h.wireDtype }))
    })
    // the KV of the new hops: a standby's, kept snapshots, then replay (client/recovery/kv-recovery.ts)
    const { transport, history } = this
    await this.kv.rebuild(hops, route, Math.min(upTo, this.length), { transport, history }, standby?.kept, options)
  }

  private deadline(signal?: AbortSignal): AbortSignal {
    return stepDeadline(this.init.stepTimeoutMs, { signal })
  }
}
