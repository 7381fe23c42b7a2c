import type { NextHop, OpenSession } from '../../protocol/index.js'
import type { HopTarget } from './hop-target.js'

/**
 * A next hop's addresses as a node dials them: each ending in /p2p/<its peer id> (nodes refuse
 * others: the dial must be a handshake with that identity, issue #17); another peer's address is dropped.
 */
export function nextHopAddrs(next: HopTarget): string[] {
  const suffix = `/p2p/${next.peerId}`
  const out: string[] = []
  for (const a of next.addrs) {
    if (a.endsWith(suffix)) out.push(a)
    else if (!a.includes('/p2p/')) out.push(`${a}${suffix}`)
  }
  return out
}

/**
 * An open's chained fields: its next hop (with the id it forwards under, per-hop ids of issue
 * #39, client/session/chain-ids.ts) and its upstream (with the id its receipts are signed for).
 */
export function chainOpenFields(o: {
  readonly next?: HopTarget
  readonly upstream?: string
  readonly nextSessionId?: string
  readonly upstreamSessionId?: string
}): Pick<OpenSession, 'nextHops' | 'upstreamPeerId' | 'upstreamSessionId'> {
  const next: NextHop[] = o.next
    ? [{ peerId: o.next.peerId, addrs: nextHopAddrs(o.next), start: o.next.start, end: o.next.end }]
    : []
  if (next[0] && o.nextSessionId) next[0].sessionId = o.nextSessionId
  return {
    nextHops: next,
    ...(o.upstream ? { upstreamPeerId: o.upstream } : {}),
    ...(o.upstream && o.upstreamSessionId ? { upstreamSessionId: o.upstreamSessionId } : {})
  }
}
