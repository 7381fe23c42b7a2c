import type { AbortOptions } from '@libp2p/interface'
import type { Host } from '../../protocol/index.js'
import type { SwarmView } from '../routing/swarm-view.js'
import type { HopSession, HopTarget } from '../session/hop.js'
import type { PipelineObserver, PipelineState } from '../session/pipeline-observer.js'
import { stepDeadline } from '../session/step-transport.js'
import type { WireLedger } from '../session/wire-ledger.js'
import type { WirePreference } from '../session/wire-negotiation.js'
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
}

/**
 * How a new route gets its KV without a full replay: sealed snapshots the client keeps
 * (snapshots.ts) and standbys fed with them (standby.ts). As an observer it captures after steps
 * and on a planned leave; on failover RemotePipeline asks it for a takeover route and to restore
 * the new hops, and replays whatever is left.
 */
export class KvRecovery implements PipelineObserver {
  private readonly snapshots: SnapshotKeeper
  private readonly standbys?: StandbyKeeper

  constructor(private readonly init: KvRecoveryInit) {
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
    const captured =
      this.init.snapshotEvery > 0 &&
      (await this.snapshots.capture(state.hops, state.history, state.length, false, this.deadline(options)))
    if (captured) await this.feedStandbys(state, options)
    return undefined
  }

  /** A planned leave: take the route's KV along, sealed, before leaving the route. */
  async leaving(state: PipelineState, options: AbortOptions = {}): Promise<void> {
    await this.snapshots.handoff(state.hops, state.history, state.length, this.deadline(options))
    await this.feedStandbys(state, options)
  }

  async close(): Promise<void> {
    await this.standbys?.closeAll()
  }

  /** On failover from `route`: the route the fed standbys take over, if they can (standby.ts). */
  async takeover(route: readonly HopTarget[], options: AbortOptions = {}): Promise<StandbyRoute | undefined> {
    return route.length > 0 ? await this.standbys?.take(route, options) : undefined
  }

  /**
   * On a new route, before replay: import the client-kept snapshots where every hop's span has
   * them (`kept`: hops that already hold KV, promoted standbys); the position replay starts from.
   */
  async restore(
    hops: readonly HopSession[],
    history: Float32Array,
    upTo: number,
    kept?: ReadonlyMap<HopSession, number>,
    options: AbortOptions = {}
  ): Promise<number> {
    return await this.snapshots.restore(hops, history, upTo, kept, options)
  }

  /** Standbys open under the id the next route will use, and take the deltas just sealed. */
  private async feedStandbys(state: PipelineState, options: AbortOptions): Promise<void> {
    await this.standbys?.feed(state.hops, state.nextSessionId, state.history, this.deadline(options))
  }

  private deadline(options: AbortOptions): AbortOptions {
    return { signal: stepDeadline(this.init.stepTimeoutMs, options) }
  }
}
