import type { AbortOptions } from '@libp2p/interface'
import type { Host } from '../../protocol/index.js'
import { openChainHops } from './chain-ids.js'
import { HopSession, type HopTarget } from './hop.js'
import { tagged } from './step-transport.js'
import type { WireLedger } from './wire-ledger.js'

/** What every hop session of one route is opened with. */
export interface RouteSessionInit {
  /**
   * The route's own session id (RemotePipeline draws a fresh one per route): the first hop's.
   * Every other hop gets an id of its own, relayed and chained, so two colluding hops cannot link
   * a session by its id (issue #39, chain-ids.ts).
   */
  readonly sessionId: string
  readonly modelId: string
  readonly maxLength: number
  readonly ledger?: WireLedger
  /** Chained forwarding: each hop learns its next hop and its upstream. */
  readonly chained: boolean
}

/**
 * Open a session on every hop of a route, from the last hop back so each hop's downstream
 * already knows the session when it is told of it (chained forwarding). `taken[i]`, a standby
 * that takes over hop i with its KV in place, is used as it is. A hop that fails to open is
 * named in the error (`tagged`); the sessions opened before it are closed.
 */
export async function openRouteHops(
  host: Host,
  route: readonly HopTarget[],
  dim: number,
  o: RouteSessionInit,
  taken: ReadonlyArray<HopSession | undefined> = [],
  options: AbortOptions = {}
): Promise<HopSession[]> {
  // every hop an id of its own, relayed and chained (issue #39, chain-ids.ts); a chain falls back
  // to one id when a hop does not acknowledge per-hop ids
  const { hops } = await openChainHops(
    route.length,
    o.sessionId,
    (i, ids) => {
      const t = route[i]
      const open = {
        ...(o.chained ? ids : { sessionId: ids.sessionId }),
        modelId: o.modelId,
        maxLength: o.maxLength,
        wireDtype: t.wireDtype ?? 'f32',
        ledger: o.ledger,
        next: o.chained ? route[i + 1] : undefined,
        upstream: o.chained && i > 0 ? route[i - 1].peerId : undefined
      } as const
      return tagged(t.peerId, HopSession.open(host, t, dim, open, options))
    },
    taken,
    o.chained,
    options
  )
  return hops
}
