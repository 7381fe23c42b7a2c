import type { AbortOptions, PeerId } from '@libp2p/interface'
import { type Multiaddr, multiaddr } from '@multiformats/multiaddr'
import {
  type AnnouncementStore,
  decodeAnnouncement,
  type Host,
  MalformedMessageError,
  type NextHop,
  NextHopFailedError,
  pullAnnouncements
} from '../../protocol/index.js'

/**
 * Which next hops a chained session may name, and where the node dials them (issue #17, then
 * issue #31 item 2). The threat: a client making a node dial an address of the client's choosing
 * (a port scanner for anyone). Issue #17 answered it by refusing private and loopback addresses,
 * which broke every LAN and loopback swarm unless nodes ran with --allow-private-next-hops.
 *
 * Now a next hop must be a peer this node already knows, from the swarm's signed announcements
 * (each lists addresses its own peer signed) or from this node's own connections to it (their
 * remote addresses, and the listen addresses the peer itself reported over one: identify). The
 * node dials those addresses, never the client's, on any network. An address the client names
 * must be one of them, else the open is refused with NEXT_HOP_FAILED naming the hop, the address
 * and the reason; an unknown peer is refused likewise.
 */
export interface NextHopPolicy {
  /**
   * What to dial for `next`: a connected peer's id (its connection is reused) or the addresses
   * this node knows for it. Throws MalformedMessageError for an address without /p2p/<its id>,
   * NextHopFailedError for a hop this node will not dial.
   */
  resolve(next: NextHop, options?: AbortOptions): Promise<PeerId | Multiaddr[]>
  /**
   * `peerId` served a step this node saw (an upstream hop's output with its checked receipt, or
   * a next hop's answer): its announcement outranks those only a connection confirmed (issue #39).
   */
  servedStep(peerId: string): void
}

/** Addresses dialled at most per next hop (an announcement may list 32). */
export const MAX_NEXT_HOP_ADDRS = 8

/**
 * A hop this node does not know yet may be one whose announcement has not reached it (gossip
 * takes a moment; a neighbour may hold it from a pull): then ask up to this many connected peers
 * once, at most once per PULL_AGAIN_MS whatever clients name, and look again.
 */
const PULL_PEERS = 3
const PULL_TIMEOUT_MS = 2_000
const PULL_AGAIN_MS = 1_000

/** An address without its trailing /p2p/<peer id>, as two sources that both know it spell it. */
function bare(addr: Multiaddr, peerId: string): string {
  const text = addr.toString()
  const suffix = `/p2p/${peerId}`
  return text.endsWith(suffix) ? text.slice(0, -suffix.length) : text
}

function parseHopAddr(text: string, peerId: string): Multiaddr {
  let addr: Multiaddr
  try {
    addr = multiaddr(text)
  } catch {
    throw new MalformedMessageError('next hop address is not a multiaddr')
  }
  const parts = addr.getComponents()
  const last = parts[parts.length - 1]
  if (last?.name !== 'p2p' || last.value !== peerId)
    throw new MalformedMessageError('next hop address must end in /p2p/<its peer id>')
  return addr
}

/** `work`, or the abort of `signal` first; the listener is removed either way (a node-wide signal must not collect them). */
async function until<T>(work: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return await work
  signal.throwIfAborted()
  let onAbort = (): void => {}
  try {
    return await Promise.race([
      work,
      new Promise<never>((_, reject) => {
        onAbort = () => reject(signal.reason)
        signal.addEventListener('abort', onAbort, { once: true })
      })
    ])
  } finally {
    signal.removeEventListener('abort', onAbort)
  }
}

export interface NextHopPolicyInit {
  readonly host: Host
  /** The verified announcements this node holds (the swarm's signed word on each peer's addresses). */
  readonly announcements: AnnouncementStore
}

export function createNextHopPolicy({ host, announcements }: NextHopPolicyInit): NextHopPolicy {
  let pulling: Promise<unknown> | undefined
  let pulledAtMs = 0
  const pullOnce = (): Promise<unknown> => {
    if (pulling) return pulling
    if (Date.now() - pulledAtMs < PULL_AGAIN_MS) return Promise.resolve()
    pulledAtMs = Date.now()
    const peers = host.getPeers().slice(0, PULL_PEERS)
    pulling = Promise.allSettled(
      peers.map((p) => pullAnnouncements(host, announcements, p, { signal: AbortSignal.timeout(PULL_TIMEOUT_MS) }))
    ).finally(() => {
      pulling = undefined
    })
    return pulling
  }
  /** The peer's own signed addresses, from its live announcement here. */
  const announced = (peerId: string): string[] => {
    for (const signed of announcements.list()) {
      try {
        const a = decodeAnnouncement(signed.announcement)
        if (a.peerId === peerId) return a.addrs
      } catch {
        // the store holds only verified entries; a decode that fails is not this peer's
      }
    }
    return []
  }
  return {
    servedStep(peerId) {
      announcements.confirm(peerId, 'step')
    },
    async resolve(next, { signal }: AbortOptions = {}) {
      const claimed = next.addrs.map((text) => parseHopAddr(text, next.peerId))
      try {
        return await known(next, claimed)
      } catch (err) {
        if (!(err instanceof NextHopFailedError)) throw err
        // the pull is shared by every open waiting on it: this open's signal only stops its wait
        await until(pullOnce(), signal)
        return await known(next, claimed)
      }
    }
  }

  /** The hop's addresses this node knows, after checking that each claimed one is among them. */
  async function known(next: NextHop, claimed: Multiaddr[]): Promise<PeerId | Multiaddr[]> {
    const peer = host.getPeers().find((p) => p.toString() === next.peerId)
    const seen = new Map<string, Multiaddr>()
    const add = (addr: Multiaddr): void => {
      const key = bare(addr, next.peerId)
      if (!seen.has(key)) seen.set(key, addr)
    }
    for (const text of announced(next.peerId)) {
      try {
        add(multiaddr(text.includes('/p2p/') ? text : `${text}/p2p/${next.peerId}`))
      } catch {
        // a signed but unparsable address: nothing to dial there
      }
    }
    if (peer) {
      for (const c of host.getConnections(peer)) add(c.remoteAddr)
      // the listen addresses the peer reported over its own (Noise-authenticated) connection
      const stored = await host.peerStore.get(peer).catch(() => undefined)
      for (const { multiaddr: a } of stored?.addresses ?? []) add(a)
    }
    if (seen.size === 0) {
      throw new NextHopFailedError(
        `next hop ${next.peerId} refused: no signed announcement or connection of this peer here, so no address of it to dial`
      )
    }
    for (const addr of claimed) {
      if (!seen.has(bare(addr, next.peerId))) {
        throw new NextHopFailedError(
          `next hop ${next.peerId} refused: address ${addr.toString()} is in none of its signed announcements or connections here`
        )
      }
    }
    if (peer && host.getConnections(peer).length > 0) return peer
    return [...seen.entries()]
      .slice(0, MAX_NEXT_HOP_ADDRS)
      .map(([key, a]) => (a.toString().endsWith(`/p2p/${next.peerId}`) ? a : multiaddr(`${key}/p2p/${next.peerId}`)))
  }
}
