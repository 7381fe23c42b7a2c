/**
 * Session ids per hop (issue #39, docs/protocol.md "Session ids per hop"). Every hop of a route,
 * relayed or chained, real or decoy, gets a session id of its own, so two colluding hops cannot
 * link a session by its id. Chained, a hop forwards a step under its next hop's id (told in
 * NextHop.session_id) and checks its upstream's receipt as signed for the upstream's id
 * (OpenSession.upstream_session_id). A hop that predates those fields forwards under its own id,
 * so a chain uses per-hop ids only when every hop acknowledges them (Opened.chained_session_ids)
 * and is reopened under one id otherwise.
 */
import type { AbortOptions } from '@libp2p/interface'
import type { HopSession } from './hop.js'
import { randomSessionId } from './session-id.js'

/** The ids of a route's `n` hop sessions: the first hop `first`, every other a fresh one; `shared`: all `first`. */
export function routeSessionIds(n: number, first: string, shared = false): string[] {
  return Array.from({ length: n }, (_, i) => (shared || i === 0 ? first : randomSessionId()))
}

/** What opening hop i of a chain is told of its neighbours' ids. */
export interface ChainIds {
  readonly sessionId: string
  readonly nextSessionId?: string
  readonly upstreamSessionId?: string
}

/** Hop i's own id and its neighbours' (neighbours absent at the ends; `ids` one per hop). */
export function chainIdsAt(ids: readonly string[], i: number): ChainIds {
  return {
    sessionId: ids[i],
    ...(i + 1 < ids.length ? { nextSessionId: ids[i + 1] } : {}),
    ...(i > 0 ? { upstreamSessionId: ids[i - 1] } : {})
  }
}

/**
 * Open a route's `n` hops from the last back (chained, each hop's downstream knows the session
 * first), with per-hop ids. Chained, if a freshly opened hop does not acknowledge them, close the
 * fresh ones and open the chain again under `first` on every hop. `taken[i]`: a hop already open
 * (a standby), used as it is, its id included. On a failure the hops opened so far are closed.
 */
export async function openChainHops(
  n: number,
  first: string,
  open: (i: number, ids: ChainIds) => Promise<HopSession>,
  taken: ReadonlyArray<HopSession | undefined> = [],
  chained = true,
  { signal }: AbortOptions = {}
): Promise<{ hops: HopSession[]; perHopIds: boolean }> {
  const once = async (shared: boolean): Promise<HopSession[]> => {
    const ids = routeSessionIds(n, first, shared).map((id, i) => taken[i]?.sessionId ?? id)
    const hops: HopSession[] = []
    const fresh: HopSession[] = []
    try {
      for (let i = n - 1; i >= 0; i--) {
        signal?.throwIfAborted()
        const got = taken[i] ?? (await open(i, chainIdsAt(ids, i)))
        if (!taken[i]) fresh.push(got)
        hops.unshift(got)
      }
    } catch (err) {
      for (const h of fresh) h.close().catch(() => {})
      throw err
    }
    return hops
  }
  const hops = await once(false)
  if (!chained || n < 2 || hops.every((h, i) => taken[i] || h.chainedSessionIds)) return { hops, perHopIds: n > 1 }
  // an older hop would forward under its own id and its next hop answer UNKNOWN_SESSION
  await Promise.all(hops.map((h, i) => (taken[i] ? undefined : h.close())))
  return { hops: await once(true), perHopIds: false }
}
