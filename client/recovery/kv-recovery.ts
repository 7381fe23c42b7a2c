import type { AbortOptions, PrivateKey } from '@libp2p/interface'
import type { Host } from '../../protocol/index.js'
import { KvRestoreMismatchError } from '../errors.js'
import type { SwarmView } from '../routing/swarm-view.js'
import type { HopSession, HopTarget } from '../session/hop.js'
import type { PipelineObserver, PipelineState } from '../session/pipeline-observer.js'
import { type StepTransport, stepDeadline } from '../session/step-transport.js'
import type { WireLedger } from '../session/wire-ledger.js'
import type { WirePreference } from '../session/wire-negotiation.js'
import { HolderKeeper } from './holders.js'
import type { KvMoveInit } from './kv-grants.js'
import { SnapshotKeeper } from './snapshots.js'
import { StandbyKeeper, type StandbyRoute } from './standby.js'

export interface KvRecoveryInit {
  readonly host: Host
  readonly view: SwarmView
  readonly modelId: string
  readonly dim: number
  readonly maxLength: number
  readonly chained: boolean
  readonly wirePreference: WirePreference
  readonly wireLedger?: WireLedger
  readonly log?: (e: Record<string, unknown>) => void
  /** Seal a KV delta on every hop each this many positions (0: only on a planned leave). */
  readonly snapshotEvery: number
  /** With snapshotEvery: a standby peer per span, fed the sealed deltas. */
  readonly standby: boolean
  /** Deadline of each export or import round (the pipeline's step timeout). */
  readonly stepTimeoutMs: number
  /** Convicted peers: their sealed snapshots are discarded, never restored (snapshots.ts). */
  readonly isConvicted?: (peerId: string) => boolean
  /**
   * Issue #41: 'node' (with snapshotEvery and the client's identity key): standbys, else holder
   * peers (holders.ts), are fed node to node under the client's grants and no KV crosses the
   * client's link; 'client': the client keeps the sealed snapshots and forwards them (the earlier path).
   */
  readonly kvPath?: KvPath
  readonly privateKey?: PrivateKey
}

export type KvPath = 'node' | 'client'

/** Rows replayed per step when a new route rebuilds its KV caches. */
const REPLAY_CHUNK_ROWS = 128

/** What replaying a session's inputs on a new route uses of its RemotePipeline. */
export interface RouteReplay {
  readonly transport: StepTransport
  /** Every input row the session sent, [length, dim]. */
  readonly history: Float32Array
}
export const KV_PATHS: readonly KvPath[] = ['node', 'client']

/**
 * Recovery's one owner (issue 36): how a new route gets its KV without a full replay. It decides
 * when every hop seals a delta (after steps, on a planned leave), feeds the standbys, hands over
 * a standby route on failover and restores a new route's hops from the kept snapshots. The
 * sealed bytes themselves are held by SnapshotKeeper (snapshots.ts, a store) and the standby
 * sessions by StandbyKeeper (standby.ts); RemotePipeline talks only to this class (a
 * takeover, then `rebuild`: the kept snapshots restored, then the rest replayed).
 */
export class KvRecovery implements PipelineObserver {
  private readonly snapshots: SnapshotKeeper
  private readonly standbys?: StandbyKeeper
  /** Node path (issue #41): spans without a standby keep their sealed KV on a holder peer. */
  private readonly holders?: HolderKeeper
  /** Node path (issue #41): standbys and holders fed node to node; the position the last feed reached. */
  private readonly direct: boolean
  private directEnd = 0

  constructor(private readonly init: KvRecoveryInit) {
    this.direct = (init.kvPath ?? 'node') === 'node' && init.snapshotEvery > 0 && init.privateKey !== undefined
    if (this.direct) this.holders = new HolderKeeper(init.view, init.log)
    this.snapshots = new SnapshotKeeper({
      every: init.snapshotEvery,
      dim: init.dim,
      log: init.log,
      isConvicted: init.isConvicted
    })
    if (init.standby && init.snapshotEvery > 0) {
      const { host, view, modelId, dim, maxLength, chained, wirePreference, wireLedger, log } = init
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

  async stepDone(state: PipelineState, _step: unknown, options: AbortOptions = {}): Promise<undefined> {
    if (this.direct) {
      await this.feedDirect(state, false, options)
      return undefined
    }
    const captured =
      this.init.snapshotEvery > 0 &&
      (await this.snapshots.capture(state.hops, state.history, state.length, false, this.deadline(options)))
    // standbys open under the id the next route will use, and take the deltas just sealed
    if (captured) await this.standbys?.feed(state.hops, state.nextSessionId, state.history, this.deadline(options))
    return undefined
  }

  /** A planned leave: take the route's KV along, sealed, before leaving the route. */
  async leaving(state: PipelineState, options: AbortOptions = {}): Promise<void> {
    if (this.direct) return await this.feedDirect(state, true, options)
    await this.snapshots.handoff(state.hops, state.history, state.length, this.deadline(options))
    await this.standbys?.feed(state.hops, state.nextSessionId, state.history, this.deadline(options))
  }

  async close(): Promise<void> {
    const { receivedBytes, sentBytes } = this.snapshots
    this.init.log?.({ event: 'kv-client-bytes', path: this.direct ? 'node' : 'client', received: receivedBytes, sent: sentBytes })
    await this.standbys?.closeAll()
  }

  /** Sealed KV bytes that crossed the client's link so far (issue #41: 0 on the node path with standbys). */
  get clientKvBytes(): { received: number; sent: number } {
    return { received: this.snapshots.receivedBytes, sent: this.snapshots.sentBytes }
  }

  /**
   * The node path: when the standbys are due (or `force`d), each is fed node to node; a span with
   * no standby feeds a holder peer node to node instead (holders.ts), and a span with neither
   * falls back to client-kept snapshots (issue #41 item 3: standby or holder, then client-kept
   * snapshots, then replay). With a standby or a holder on every span no KV crosses the client's link.
   */
  private async feedDirect(state: PipelineState, force: boolean, options: AbortOptions): Promise<void> {
    const { snapshotEvery } = this.init
    if (!force && (snapshotEvery <= 0 || state.length - this.directEnd < snapshotEvery)) return
    this.directEnd = state.length
    const mover = this.mover()
    const deadline = this.deadline(options)
    const noStandby = this.standbys
      ? await this.standbys.feedDirect(state.hops, state.nextSessionId, state.history, state.length, mover, deadline)
      : state.hops
    const exclude = this.standbys?.peers ?? []
    const without = await this.holders!.feed(state.hops, noStandby, state.history, state.length, mover, exclude, deadline)
    if (without.length > 0) await this.snapshots.capture(without, state.history, state.length, force, deadline)
  }

  private mover(): KvMoveInit {
    const { modelId, dim, host } = this.init
    return { host, privateKey: this.init.privateKey!, modelId, dim }
  }

  /** On failover from `route`: the route the fed standbys take over, if they can (standby.ts). */
  async takeover(route: readonly HopTarget[], options: AbortOptions = {}): Promise<StandbyRoute | undefined> {
    return route.length > 0 ? await this.standbys?.take(route, options) : undefined
  }

  /**
   * Bring a new route's KV to `upTo` positions (replay, the recovery half of the glossary's word):
   * from kept KV (`kept`: promoted standbys) or sealed snapshots when every hop's span has them,
   * else by replaying every input; then replay what is left, `REPLAY_CHUNK_ROWS` rows a step.
   */
  async rebuild(
    hops: HopSession[],
    route: readonly HopTarget[],
    upTo: number,
    replay: RouteReplay,
    kept?: ReadonlyMap<HopSession, number>,
    options: AbortOptions = {}
  ): Promise<void> {
    const { dim, log, stepTimeoutMs } = this.init
    const deadline = (): AbortSignal => stepDeadline(stepTimeoutMs, options)
    const restored = await this.restore(hops, replay.history, upTo, kept, { signal: deadline() })
    if (upTo > 0 && restored === 0)
      log?.({ event: 'replay', positions: upTo, route: route.map((h) => [h.peerId, h.start, h.end]) })
    if (upTo > 0) {
      const source = restored === 0 ? 'replay' : !kept ? 'snapshot' : kept.size === hops.length ? 'standby' : 'mixed'
      log?.({
        event: 'resume',
        from: source,
        restoredPositions: restored,
        replayedRows: upTo - restored,
        route: route.map((h) => h.peerId)
      })
    }
    for (let p = restored; p < upTo; p += REPLAY_CHUNK_ROWS) {
      const rows = Math.min(REPLAY_CHUNK_ROWS, upTo - p)
      await replay.transport.run(hops, route, replay.history.subarray(p * dim, (p + rows) * dim), p, deadline)
    }
  }

  /**
   * Before replay: import the client-kept snapshots where every hop's span has them (`kept`:
   * hops that already hold KV, promoted standbys); the position replay starts from.
   */
  private async restore(
    hops: readonly HopSession[],
    history: Float32Array,
    upTo: number,
    kept?: ReadonlyMap<HopSession, number>,
    options: AbortOptions = {}
  ): Promise<number> {
    const held = this.snapshots.takeFor(hops, upTo)
    // a holder's sealed KV first (node to node), else the client-kept snapshots
    const holds = hops.map((h) => (kept?.has(h) ? 0 : (this.holders?.heldFor(h, upTo) ?? 0)))
    const ends = hops.map((h, i) => {
      if (kept?.has(h)) return Math.min(kept.get(h)!, upTo)
      if (holds[i] > 0) return holds[i]
      const s = held[i]
      return s && s.end > 0 && s.end <= upTo ? s.end : 0
    })
    // every hop must start from kept KV or a snapshot; one that cannot means a full replay
    if (ends.some((e) => e === 0)) return 0
    const from = Math.min(...ends)
    await Promise.all(
      hops.map(async (hop, i) => {
        if (kept?.has(hop)) return
        if (holds[i] > 0) {
          const length = await this.holders!.restoreInto(hop, history, this.mover(), options)
          if (length !== holds[i])
            throw new KvRestoreMismatchError(`hop ${hop.target.peerId} restored ${length} positions, not ${holds[i]}`)
          this.init.log?.({
            event: 'restore',
            from: 'holder',
            peerId: hop.target.peerId,
            fromSnapshot: length,
            replayed: upTo - from
          })
          return
        }
        const s = held[i]!
        const length = await this.snapshots.importInto(hop, s, 0, history, undefined, options)
        if (length !== s.end)
          throw new KvRestoreMismatchError(`hop ${hop.target.peerId} restored ${length} positions, not ${s.end}`)
        this.init.log?.({
          event: 'restore',
          peerId: hop.target.peerId,
          fromSnapshot: s.end,
          replayed: upTo - from,
          snapshots: s.sealed.length
        })
      })
    )
    return from
  }

  private deadline(options: AbortOptions): AbortOptions {
    return { signal: stepDeadline(this.init.stepTimeoutMs, options) }
  }
}
