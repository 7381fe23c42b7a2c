import type { CanaryTraces } from '../canary/index.js'
import type { Host } from '../protocol/index.js'
import type { Edge, Kernels, ModelFile, Shard, Tokenizer } from '../shards/index.js'
import type { ClientInit } from './client-types.js'
import {
  DEFAULT_BAN_MS,
  DEFAULT_MAX_FAILOVERS,
  DEFAULT_ROUTE_TIMEOUT_MS,
  DEFAULT_STEP_TIMEOUT_MS,
  DEFAULT_WIRE
} from './options.js'
import type { SwarmView } from './routing/swarm-view.js'
import { type Forwarding, RemotePipeline } from './session/remote-pipeline.js'
import type { WireLedger } from './session/wire-ledger.js'
import { CanaryMonitor } from './verification/canary-monitor.js'

/*
 * How a client (client/client.ts) wires its parts into what a generation runs on: its canary
 * monitor (one per client) and each session's remote pipeline, with the client's options and
 * their defaults (client/options.ts).
 */

/** What of a client its canary monitor and remote pipelines are made from. */
export interface ClientParts {
  readonly host: Host
  readonly model: ModelFile
  readonly modelId: string
  readonly init: ClientInit
  readonly view: SwarmView
  /** The caller's kernels, else the client's own. */
  readonly kernels: Kernels | undefined
  readonly edge: Edge
  readonly tokenizer: Tokenizer
  readonly first: Shard | undefined
  readonly bank: CanaryTraces | undefined
  /** The blocks the swarm runs: [from, to). */
  readonly remote: readonly [number, number]
}

/** The client's canary monitor (one per client, made on the first generation), unless canaries are off. */
export function clientCanaryMonitor(c: ClientParts, maxLength: number): CanaryMonitor | undefined {
  return c.init.canaries === false
    ? undefined
    : new CanaryMonitor(c.host, c.model, c.modelId, {
        ...c.init.canaries,
        wireDtype: 'f32', // decoys use each hop's negotiated dtype; this is for hops without one
        maxLength,
        kernels: c.kernels,
        log: c.init.log,
        bank: c.bank,
        onBuild: c.init.onCanaryBuild,
        edge: c.edge,
        tokenizer: c.tokenizer,
        first: c.first,
        // redundancy checks' partners: the other peers of a hop's span that routes may use
        peersOf: (start: number, end: number) =>
          c.view
            .list()
            .filter((p) => p.start === start && p.end === end && p.modelId === c.modelId && !c.view.isBanned(p.peerId))
            .map(({ peerId, addrs, wireDtypes, kvDtype, backend }) => ({
              peerId,
              start,
              end,
              addrs,
              wireDtypes,
              kvDtype,
              backend
            }))
      })
}

/** A session's remote pipeline: the swarm's blocks of one generation attempt, with the client's options. */
export function clientRemotePipeline(
  c: ClientParts,
  canaries: CanaryMonitor | undefined,
  session: { sessionId: string; maxLength: number; forwarding: Forwarding; wireLedger: WireLedger }
): RemotePipeline {
  return new RemotePipeline({
    host: c.host,
    view: c.view,
    modelId: c.modelId,
    dim: c.model.config.dim,
    from: c.remote[0],
    to: c.remote[1],
    sessionId: session.sessionId,
    maxLength: session.maxLength,
    forwarding: session.forwarding,
    wireDtype: c.init.wireDtype ?? DEFAULT_WIRE,
    wireLedger: session.wireLedger,
    stepTimeoutMs: c.init.stepTimeoutMs ?? DEFAULT_STEP_TIMEOUT_MS,
    banMs: c.init.banMs ?? DEFAULT_BAN_MS,
    maxFailovers: c.init.maxFailovers ?? DEFAULT_MAX_FAILOVERS,
    routeTimeoutMs: c.init.routeTimeoutMs ?? DEFAULT_ROUTE_TIMEOUT_MS,
    log: c.init.log,
    canaries,
    snapshotEvery: c.init.snapshotEvery,
    standby: c.init.standby,
    kvPath: c.init.kvPath,
    privateKey: c.init.privateKey
  })
}
