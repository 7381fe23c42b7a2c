import type { SwarmView } from '../routing/swarm-view.js'
import type { HopSession, HopTarget } from '../session/hop.js'
import { acceptedDtypes, planWireRoute, type WirePreference } from '../session/wire-negotiation.js'

/*
 * Which peers of the swarm view the standby keeper (client/recovery/standby.ts) asks: a standby for a span
 * of the live route, and at failover fresh peers for the spans that have none.
 */

/**
 * A peer to hold a standby session for live hop `h`: it serves the hop's span, is not banned nor
 * in `used` (which it joins), and accepts the dtype the route negotiated for this hop (a chain's,
 * on every hop): a standby that would run another one is no standby for it (the session would be
 * refused or differ). Undefined when no peer fits.
 */
export function standbyCandidate(view: SwarmView, h: HopSession, used: Set<string>): HopTarget | undefined {
  const p = view
    .list()
    .find(
      (c) =>
        c.start <= h.target.start &&
        h.target.end <= c.end &&
        !used.has(c.peerId) &&
        !view.isBanned(c.peerId) &&
        acceptedDtypes(c.wireDtypes).includes(h.wireDtype)
    )
  if (!p) return undefined
  used.add(p.peerId)
  return {
    peerId: p.peerId,
    start: h.target.start,
    end: h.target.end,
    addrs: p.addrs,
    wireDtypes: p.wireDtypes,
    wireDtype: h.wireDtype
  }
}

/**
 * Per span of `route` without a standby (`hasStandby[i]` false), the hops of a fresh sub-route
 * over it (relayed, so a dtype per hop); each peer is used once, and no standby is (their
 * sessions hold the next id). Undefined when a span has none.
 */
export function freshSubRoutes(
  view: SwarmView,
  route: readonly HopTarget[],
  hasStandby: readonly boolean[],
  standbyPeers: readonly string[],
  preference: WirePreference
): Array<HopTarget[] | undefined> | undefined {
  const used = new Set(standbyPeers)
  const out: Array<HopTarget[] | undefined> = []
  for (let i = 0; i < route.length; i++) {
    if (hasStandby[i]) {
      out.push(undefined)
      continue
    }
    const candidates = view.list().filter((c) => !used.has(c.peerId) && !view.isBanned(c.peerId))
    try {
      const hops = planWireRoute(candidates, route[i].start, route[i].end, preference, false)
      out.push(
        hops.map((h) => {
          used.add(h.peerId)
          const p = candidates.find((c) => c.peerId === h.peerId)!
          return {
            peerId: h.peerId,
            start: h.start,
            end: h.end,
            addrs: p.addrs,
            wireDtypes: p.wireDtypes,
            wireDtype: h.wireDtype
          }
        })
      )
    } catch {
      return undefined
    }
  }
  return out
}
