import type { PeerId } from '@libp2p/interface'
import { peerIdFromString } from '@libp2p/peer-id'
import { multiaddr } from '@multiformats/multiaddr'
import { fetchAnnouncements, type Host } from '../../protocol/index.js'

/*
 * Issue 33: who to ask for weights. Every peer we are connected to (the bootstrap peers), and
 * every peer those announce (any model: a node serving model A's span may hold model B's too):
 * dialled by the addresses in its signed announcement.
 */

export async function discoverWeightPeers(host: Host, { signal }: { signal?: AbortSignal } = {}): Promise<PeerId[]> {
  const seen = new Map<string, PeerId>()
  for (const c of host.getConnections()) seen.set(c.remotePeer.toString(), c.remotePeer)
  const self = host.peerId.toString()
  for (const peer of [...seen.values()]) {
    try {
      const anns = await fetchAnnouncements(host, peer, {
        signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(5_000)]) : AbortSignal.timeout(5_000)
      })
      for (const { announcement: a } of anns) {
        if (a.peerId === self || seen.has(a.peerId)) continue
        const id = peerIdFromString(a.peerId)
        try {
          await host.dial(
            a.addrs.map((addr) => multiaddr(addr.includes('/p2p/') ? addr : `${addr}/p2p/${a.peerId}`)),
            { signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(5_000)]) : AbortSignal.timeout(5_000) }
          )
          seen.set(a.peerId, id)
        } catch {
          // unreachable from here: the others serve
        }
      }
    } catch {
      // a peer without the announcements protocol (or slow): still asked for weights
    }
  }
  return [...seen.values()]
}
