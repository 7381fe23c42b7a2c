import { type Host, RemoteError } from '../protocol/index.js'
import type { BlockPipeline } from '../shards/index.js'
import type { CanaryMonitor } from './canary-monitor.js'
import { HopSession, type HopTarget } from './hop.js'
import { BadReceiptError, ReceiptLedger } from './receipts.js'
import { NoRouteError } from './route.js'
import { SnapshotKeeper } from './snapshots.js'
import { StandbyKeeper } from './standby.js'
import type { SwarmView } from './swarm-view.js'
import type { WirePreference } from './wire.js'
import type { WireLedger } from './wire-ledger.js'

export type Forwarding = 'relay' | 'chain'

export interface RemotePipelineInit {
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
  /** Wire dtype per hop: negotiated against what each hop accepts (client/wire.ts). */
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
}

/** One hop's part in a step, as the `step` log event reports it (rttMs: relayed mode only). */
export interface StepHopTiming {
  readonly peerId: string
  readonly computeMs: number
  readonly rttMs?: number
}

/** How long a peer convicted by canaries or receipts stays out of routes, by default. */
export const CONVICTED_BAN_MS = 24 * 3600_000

/** Rows replayed per step when a new route rebuilds its KV caches. */
const REPLAY_CHUNK_ROWS = 128

/**
 * The remote blocks of one session, over a route of hops, in relay or chained forwarding.
 * It keeps every input row it sent, so when a hop dies, stalls or errs it bans the peer,
 * plans a new route and replays the inputs to rebuild the KV caches, then retries the step:
 * outputs are deterministic, so the generated tokens do not change.
 */
export class RemotePipeline implements BlockPipeline {
  private hops: HopSession[] | undefined
  private history = new Float32Array(0)
  private length = 0
  private nextStepId = 1
  private connects = 0
  failovers = 0
  /** Every hop's signed receipt is checked here (and goes to the canary monitor's replay index). */
  readonly receipts: ReceiptLedger
  /** A chained step whose receipts failed after its output was used: fail over before the next. */
  private poisoned: BadReceiptError | undefined
  readonly routes: HopTarget[][] = []

  /** Sealed KV snapshots of the route's hops (every snapshotEvery positions, and on a planned leave). */
  private readonly snapshots: SnapshotKeeper

  /** Standby peers fed with the sealed deltas (option `standby`). */
  private readonly standbys?: StandbyKeeper

  constructor(private readonly init: RemotePipelineInit) {
    this.receipts = new ReceiptLedger(init.canaries?.replays)
    const isConvicted = (p: string) => this.convicted.includes(p) || (init.canaries?.detector.verdict(p).excluded ?? false)
    this.snapshots = new SnapshotKeeper({ every: init.snapshotEvery ?? 0, dim: init.dim, log: init.log, isConvicted })
    if (init.standby && (init.snapshotEvery ?? 0) > 0) {
      const { host, view, modelId, dim, maxLength, wireLedger, log } = init
      const chained = init.forwarding === 'chain'
      const wirePreference = init.wireDtype
      this.standbys = new StandbyKeeper({
        host,
        view,
        snapshots: this.snapshots,
        modelId,
        dim,
        maxLength,
        chained,
        wirePreference,
        wireLedger,
        log
      })
    }
  }

  get route(): HopTarget[] {
    return this.routes[this.routes.length - 1] ?? []
  }

  async forward(hidden: Float32Array, startPos: number, signal?: AbortSignal): Promise<Float32Array> {
    let lastErr: unknown
    for (let attempt = 0; attempt <= this.init.maxFailovers; attempt++) {
      signal?.throwIfAborted()
      try {
        if (this.poisoned) {
          const err = this.poisoned
          this.poisoned = undefined
          throw err
        }
        if (!this.hops) await this.connect(startPos, signal)
        const out = await this.run(hidden, startPos, signal)
        this.remember(hidden, startPos)
        if (
          this.init.snapshotEvery &&
          (await this.snapshots.capture(this.hops!, this.hopSessionId, this.history, this.length, this.timeout(signal)))
        )
          await this.feedStandbys(signal)
        await this.checkCanaries(signal, startPos, hidden.length / this.init.dim)
        return out
      } catch (err) {
        // No route means no peer to fail over to: waiting for one already took routeTimeoutMs.
        if (signal?.aborted || err instanceof NoRouteError) throw err
        lastErr = err
        // A planned leave: take the route's KV along, sealed, before leaving the route.
        if ((err as { code?: string }).code === 'LEAVING' && this.hops) {
          await this.snapshots.handoff(this.hops, this.hopSessionId, this.history, this.length, this.timeout(signal))
          await this.feedStandbys(signal)
        }
        this.fail(err)
      }
    }
    throw lastErr
  }

  /** Peers the canaries convicted while this session ran (its outputs so far are suspect). */
  readonly convicted: string[] = []

  private async checkCanaries(signal: AbortSignal | undefined, startPosition: number, rows: number): Promise<void> {
    const { forwarding, maxLength, sessionId } = this.init
    // the real step's shape too: decoys copy real sessions' prefill, length and max length
    const ctx = { forwarding, maxLength, signal, sessionId, startPosition, rows }
    const excluded = (await this.init.canaries?.afterStep(this.route, ctx)) ?? []
    if (excluded.length === 0) return
    this.exclude(excluded)
    // Leave the route now: the next step plans a new one without the convicted peers.
    this.fail(Object.assign(new Error('peer excluded by canaries'), { peerId: excluded[0], code: 'EXCLUDED' }))
    this.failovers--
  }

  private exclude(peers: readonly string[]): void {
    for (const peerId of peers) {
      this.init.view.ban(peerId, this.init.excludeMs ?? CONVICTED_BAN_MS)
      this.convicted.push(peerId)
      this.init.log?.({
        event: 'excluded',
        peerId,
        why: this.init.canaries?.whyExcluded(peerId) ?? 'canary drift',
        posterior: this.init.canaries?.detector.posterior(peerId)
      })
    }
  }

  /** Receipt checks and audits of chained steps, off the critical path: close waits for them (the last step's too). */
  private readonly offPath = new Set<Promise<void>>()

  /**
   * Starts the last chained step's deferred receipt checks (see run): called once the next step
   * is written, so they run while the hops compute, not between a token's output and its next
   * step (signature checks take ~0.1 ms each with caches cold from the kernels).
   */
  private releaseChecks: () => void = () => {}

  async close(): Promise<void> {
    this.releaseChecks()
    // the last steps' audits go out now rather than with a later round
    const audits = this.init.canaries?.audits
    await (audits ? audits.drain(() => Promise.all(this.offPath)) : Promise.all(this.offPath))
    // Canary steps run beside the real ones: a conviction landing after the last step still counts.
    const late = (await this.init.canaries?.settle(this.init.sessionId)) ?? []
    if (late.length > 0) this.exclude(late)
    const hops = this.hops ?? []
    this.hops = undefined
    await Promise.all([...hops.map((h) => h.close(this.hopSessionId)), this.standbys?.closeAll()])
  }

  /** Standbys open under the id the next route will use, and take the deltas just sealed. */
  private async feedStandbys(signal?: AbortSignal): Promise<void> {
    const next = `${this.init.sessionId}.${this.connects + 1}`
    await this.standbys?.feed(this.hops!, this.hopSessionId, next, this.history, this.timeout(signal))
  }

  /**
   * Each route gets its own session id on the hops: a hop that survived a failover may still
   * hold the old session (its close is best effort), and the new one must not collide with it.
   */
  private get hopSessionId(): string {
    return `${this.init.sessionId}.${this.connects}`
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
    const peerId = (err as { peerId?: string }).peerId || (err as { hopPeerId?: string }).hopPeerId
    if (peerId) this.init.view.ban(peerId, this.init.banMs)
    this.init.log?.({ event: 'failover', peerId, code: (err as { code?: string }).code, message: (err as Error).message })
    // Free the session on the hops that are still alive (best effort, in the background).
    const id = this.hopSessionId
    for (const h of this.hops ?? []) {
      // a leaving peer still answers: closing lets it exit as soon as its sessions are gone
      if (h.target.peerId === peerId && (err as { code?: string }).code !== 'LEAVING') h.abort()
      else h.close(id, AbortSignal.timeout(2_000)).catch(() => {})
    }
    this.hops = undefined
    this.failovers++
  }

  private async connect(upTo: number, signal?: AbortSignal): Promise<void> {
    const { view, from, to, dim } = this.init
    // A hop died with fed standbys: they take over their spans with their KV in place (relayed,
    // fresh peers take the other spans; chained, only a complete set takes over).
    const standby = this.route.length > 0 ? await this.standbys?.take(this.route) : undefined
    const route =
      standby?.route ??
      (await view.waitForRoute(from, to, this.init.routeTimeoutMs, signal, {
        preference: this.init.wireDtype,
        chained: this.init.forwarding === 'chain'
      }))
    this.connects++
    const sessionId = this.hopSessionId
    const chain = this.init.forwarding === 'chain'
    const hops: HopSession[] = []
    try {
      // Open from the last hop back, so each hop's downstream already knows the session.
      for (let i = route.length - 1; i >= 0; i--) {
        const t = route[i]
        const taken = standby?.hops[i]
        if (taken) {
          hops.unshift(taken)
          continue
        }
        const hop = await this.tagged(
          t.peerId,
          HopSession.open(this.init.host, t, dim, {
            sessionId,
            modelId: this.init.modelId,
            maxLength: this.init.maxLength,
            wireDtype: t.wireDtype ?? 'f32',
            ledger: this.init.wireLedger,
            next: chain ? route[i + 1] : undefined,
            upstream: chain && i > 0 ? route[i - 1].peerId : undefined,
            signal
          })
        )
        hops.unshift(hop)
      }
    } catch (err) {
      for (const h of hops) h.close(sessionId, AbortSignal.timeout(2_000)).catch(() => {})
      throw err
    }
    this.hops = hops
    this.routes.push(route)
    this.init.log?.({
      event: 'route',
      sessionId: this.init.sessionId,
      forwarding: this.init.forwarding,
      route: route.map((h) => ({ peerId: h.peerId, start: h.start, end: h.end, wire: h.wireDtype }))
    })
    const replay = Math.min(upTo, this.length)
    // From sealed snapshots when every hop's span has them, else by replaying every input.
    const restored = await this.snapshots.restore(hops, sessionId, this.history, replay, this.timeout(signal), standby?.kept)
    if (replay > 0 && restored === 0)
      this.init.log?.({ event: 'replay', positions: replay, route: route.map((h) => [h.peerId, h.start, h.end]) })
    if (replay > 0) {
      const source = restored === 0 ? 'replay' : !standby ? 'snapshot' : standby.kept.size === hops.length ? 'standby' : 'mixed'
      this.init.log?.({
        event: 'resume',
        from: source,
        restoredPositions: restored,
        replayedRows: replay - restored,
        route: route.map((h) => h.peerId)
      })
    }
    for (let p = restored; p < replay; p += REPLAY_CHUNK_ROWS) {
      const rows = Math.min(REPLAY_CHUNK_ROWS, replay - p)
      await this.run(this.history.subarray(p * dim, (p + rows) * dim), p, signal)
    }
  }

  private async run(hidden: Float32Array, startPos: number, signal?: AbortSignal): Promise<Float32Array> {
    const hops = this.hops!
    const id = this.hopSessionId
    const stepId = this.nextStepId++
    const rows = hidden.length / this.init.dim
    const t0 = performance.now()
    if (this.init.forwarding === 'relay' || hops.length === 1) {
      let h = hidden
      const timings: StepHopTiming[] = []
      // A hop's receipt is checked while the next hop computes: setImmediate starts the check
      // after the loop has sent the step on to the next hop, and every check has passed, in
      // route order, before the step's output is used.
      const checks: Promise<void>[] = []
      const checked = async (): Promise<void> => {
        for (const c of checks) await c
      }
      try {
        for (const hop of hops) {
          const t = performance.now()
          const out = await this.tagged(hop.target.peerId, hop.step(id, stepId, startPos, h, this.timeout(signal)))
          const check = new Promise<void>((resolve) => setImmediate(resolve)).then(() =>
            this.receipts.check([hop.target], id, stepId, out.receipts, out.sent, out.received)
          )
          check.catch(() => {}) // awaited in order by checked()
          checks.push(check)
          h = out.hidden
          timings.push({ peerId: hop.target.peerId, computeMs: out.timings[0]?.computeMs ?? 0, rttMs: performance.now() - t })
        }
      } catch (err) {
        await checked() // a bad receipt of an earlier hop is the failure to report
        throw err
      }
      await checked()
      this.logStep(stepId, startPos, rows, performance.now() - t0, timings)
      return h
    }
    const first = hops[0]
    const last = hops[hops.length - 1]
    // The step is written first: it is the critical path, and the last hop keeps an output that
    // arrives before its await (node/chain.ts), so the await can follow while the hops compute.
    // one deadline for the whole chained step (a timer and AbortSignal.any cost ~50 µs each time)
    const deadline = this.timeout(signal)
    const sent = this.tagged(first.target.peerId, first.stepChained(id, stepId, startPos, hidden, deadline, hops.slice(1)))
    const result = this.tagged(last.target.peerId, last.awaitResult(id, stepId, rows, deadline))
    sent.catch(() => {}) // reported through the race below when it matters
    result.catch(() => {})
    // this step is on its way: the previous step's checks may run now
    const release = this.releaseChecks
    sent.then(release, release)
    // The step goes one way; a hop that fails it reports back through the first hop (`failed`).
    const got = await Promise.race([result, sent.then((s) => this.tagged(first.target.peerId, s.failed))])
    const ms = performance.now() - t0
    // The output carries every hop's receipt and compute time (each hop signed before it
    // forwarded); they are checked off the critical path, once the next step is sent (or the
    // session closes): a bad receipt poisons the route and the step after that fails over.
    const route = this.route
    let start!: () => void
    const gate = new Promise<void>((resolve) => {
      start = resolve
    })
    this.releaseChecks = start
    const offPath = gate
      .then(() => sent)
      .then(async (ack) => {
        first.settle(ack.requestId)
        this.logStep(stepId, startPos, rows, ms, got.timings)
        await this.receipts.check(route, id, stepId, got.receipts, ack.sent, got.received)
        // With canaries on, every chained step's middle hops are audited, as decoy steps are, so
        // an audit does not single out a decoy (chained-decoy.ts); a false answer poisons the route.
        if (this.init.canaries) await this.init.canaries.audits.audit('real', hops, id, stepId, rows, got.receipts)
      })
      .catch((err) => {
        if (err instanceof BadReceiptError) this.poisoned ??= err
      })
      .finally(() => this.offPath.delete(offPath))
    this.offPath.add(offPath)
    return got.hidden
  }

  /** A `step` log event: wall time of the remote span, and per hop its compute (and, relayed, its round trip). */
  private logStep(stepId: number, startPos: number, rows: number, ms: number, hops: StepHopTiming[]): void {
    const { sessionId, forwarding } = this.init
    this.init.log?.({ event: 'step', sessionId, forwarding, stepId, startPos, rows, ms, hops })
  }

  private timeout(signal?: AbortSignal): AbortSignal {
    const t = AbortSignal.timeout(this.init.stepTimeoutMs)
    return signal ? AbortSignal.any([signal, t]) : t
  }

  /** Errors without a peer id of their own (timeouts, dead streams) name the hop we called. */
  private async tagged<T>(peerId: string, p: Promise<T>): Promise<T> {
    try {
      return await p
    } catch (err) {
      const e = err instanceof Error ? err : new Error(String(err))
      if (!(e instanceof RemoteError && e.peerId !== '')) (e as { hopPeerId?: string }).hopPeerId = peerId
      throw e
    }
  }
}
