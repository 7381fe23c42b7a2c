/**
 * Reaching peers behind home routers (issue #19), with the libp2p modules made for it:
 * - circuit relay v2 (libp2p/specs relay/circuit-v2.md): a public node started with `--relay`
 *   serves reservations; a node behind NAT listens on `/p2p-circuit`, reserves a slot on a relay
 *   it is connected to and announces the relayed address; every host can dial such addresses.
 * - DCUtR (relay/DCUtR.md): over a relayed connection the two peers exchange their observed
 *   addresses and dial each other at once (or the inbound side dials back a public peer), then
 *   drop the relayed connection.
 * - AutoNAT (autonat/README.md): peers dial our addresses back, so a node learns which are
 *   reachable; UPnP IGD maps a port on a home router that offers it (opt-in).
 * And what each of our connections to a peer is: direct, relayed or hole-punched.
 */
import { autoNAT } from '@libp2p/autonat'
import { circuitRelayServer, circuitRelayTransport } from '@libp2p/circuit-relay-v2'
import { dcutr } from '@libp2p/dcutr'
import type { Connection, Libp2p, PeerId } from '@libp2p/interface'
import { uPnPNAT } from '@libp2p/upnp-nat'
import type { Multiaddr } from '@multiformats/multiaddr'
import { Circuit } from '@multiformats/multiaddr-matcher'

/** What the host's reachability options turn on (HostInit.reachability). */
export interface ReachabilityInit {
  /** Serve circuit relay v2 reservations to peers behind NAT (a node with a public address). */
  relayServer?: boolean
  /** Reservations a relay holds at once (default RELAY_MAX_RESERVATIONS). */
  relayMaxReservations?: number
  /** Reservations a relay holds for peers of one IPv4 address or IPv6 /64 (default RELAY_MAX_RESERVATIONS_PER_IP). */
  relayMaxReservationsPerIp?: number
  /** Ask peers to dial our addresses back to learn which are reachable (AutoNAT v1). */
  autoNat?: boolean
  /** Map a port on the home router by UPnP IGD, where it offers that. */
  upnp?: boolean
  /** Upgrade relayed connections to direct ones (DCUtR; default true). */
  holePunch?: boolean
}

/** A relay holds this many reservations at once (libp2p's default is 15; a swarm of friends is small). */
export const RELAY_MAX_RESERVATIONS = 128

/**
 * Reservations one IPv4 address (or IPv6 /64) may hold on a relay (issue #39): a reservation
 * costs a fresh peer id nothing, so a per-id limit alone let one machine take all of them.
 */
export const RELAY_MAX_RESERVATIONS_PER_IP = 4

/** Relayed connections one peer may hold open through the relay at once (HOP streams per connection). */
export const RELAY_MAX_HOP_STREAMS_PER_PEER = 16

/**
 * Limits of one relayed connection (issue #39). libp2p's defaults (2 min, 128 KiB) would cut a
 * generation; none at all let one relayed connection use the relay's uplink without end. A
 * connection past either is closed (the client fails over, and dials again or hole-punches).
 */
export const RELAY_DURATION_LIMIT_MS = 60 * 60_000
export const RELAY_DATA_LIMIT_BYTES = 4n << 30n

/**
 * The relay relays sessions, not just a handshake, within the limits above. Its bandwidth is the
 * relay operator's to give, which is why relaying is opt-in (`--relay`); hole punching moves the
 * traffic to a direct connection where the routers allow it.
 */
export function relayServerService(init: ReachabilityInit) {
  return circuitRelayServer({
    maxInboundHopStreams: RELAY_MAX_HOP_STREAMS_PER_PEER,
    reservations: {
      maxReservations: init.relayMaxReservations ?? RELAY_MAX_RESERVATIONS,
      applyDefaultLimit: true,
      defaultDurationLimit: RELAY_DURATION_LIMIT_MS,
      defaultDataLimit: RELAY_DATA_LIMIT_BYTES
    }
  })
}

/** The key reservations are counted under: an IPv4 address, or the /64 of an IPv6 one (what one subscriber gets). */
export function addressKey(addr: Multiaddr): string | undefined {
  for (const c of addr.getComponents()) {
    if (c.name === 'ip4' && c.value !== undefined) return c.value
    if (c.name === 'ip6' && c.value !== undefined) {
      const groups = expandIpv6(c.value)
      return groups === undefined ? c.value : `${groups.slice(0, 4).join(':')}::/64`
    }
  }
  return undefined
}

function expandIpv6(text: string): string[] | undefined {
  const [head, tail, more] = text.split('::')
  if (more !== undefined || text.includes('.')) return undefined
  const h = head ? head.split(':') : []
  const t = tail !== undefined && tail !== '' ? tail.split(':') : []
  const fill = tail === undefined ? [] : new Array(8 - h.length - t.length).fill('0')
  const all = [...h, ...fill, ...t]
  return all.length === 8 ? all.map((g) => g.toLowerCase().replace(/^0+(?=.)/, '')) : undefined
}

interface RelayService {
  readonly reservations: { entries(): Iterable<[PeerId, { addr: Multiaddr }]> }
}

/**
 * The connection gater's reservation check of a relay (libp2p calls it before reserving): refuse
 * `peer` when its address already holds `maxPerIp` reservations of other peers. `host()` is the
 * relay's host once started (the gater is made before it).
 */
export function relayReservationGate(
  host: () => Libp2p | undefined,
  maxPerIp = RELAY_MAX_RESERVATIONS_PER_IP
): (peer: PeerId) => Promise<boolean> {
  return async (peer) => {
    const h = host()
    const relay = h?.services.relay as RelayService | undefined
    if (!h || !relay) return false
    const conn = h.getConnections(peer).find((c) => !Circuit.matches(c.remoteAddr))
    const key = conn ? addressKey(conn.remoteAddr) : undefined
    if (key === undefined) return false
    let held = 0
    for (const [other, r] of relay.reservations.entries()) {
      if (!other.equals(peer) && addressKey(r.addr) === key) held++
    }
    return held >= maxPerIp
  }
}

/** The transport that dials and listens on `/p2p-circuit` addresses (every host has it). */
export function relayTransport() {
  return circuitRelayTransport({ reservationCompletionTimeout: 10_000 })
}

/** The optional services, keyed as the host registers them. */
export function reachabilityServices(init: ReachabilityInit): Record<string, unknown> {
  const services: Record<string, unknown> = {}
  if (init.holePunch !== false) services.dcutr = dcutr()
  if (init.relayServer) services.relay = relayServerService(init)
  if (init.autoNat) services.autoNAT = autoNAT()
  if (init.upnp) services.upnpNAT = uPnPNAT()
  return services
}

export type Reachability = 'direct' | 'relayed' | 'hole-punched'

/**
 * Remembers which peers we held a relayed connection to, so a later direct connection to one of
 * them is known for what it is: a relayed connection upgraded (DCUtR), i.e. hole-punched.
 */
class ReachabilityTracker {
  private readonly relayedPeers = new Set<string>()
  private readonly punched = new Set<string>()

  constructor(private readonly host: Libp2p) {
    host.addEventListener('connection:open', (e) => this.opened(e.detail))
    host.addEventListener('peer:disconnect', (e) => {
      this.relayedPeers.delete(e.detail.toString())
      this.punched.delete(e.detail.toString())
    })
  }

  private opened(conn: Connection): void {
    const id = conn.remotePeer.toString()
    if (Circuit.matches(conn.remoteAddr)) this.relayedPeers.add(id)
    else if (this.relayedPeers.has(id)) this.punched.add(id)
  }

  of(peer: PeerId | string): Reachability | undefined {
    const id = peer.toString()
    const conns = this.host.getConnections().filter((c) => c.remotePeer.toString() === id && c.status === 'open')
    if (conns.length === 0) return undefined
    const direct = conns.some((c) => !Circuit.matches(c.remoteAddr))
    if (!direct) return 'relayed'
    return this.punched.has(id) ? 'hole-punched' : 'direct'
  }
}

const trackers = new WeakMap<Libp2p, ReachabilityTracker>()

/** Start following `host`'s connections (createHost does this for every host). */
export function trackReachability(host: Libp2p): void {
  if (!trackers.has(host)) trackers.set(host, new ReachabilityTracker(host))
}

/**
 * How we reach `peer` now: over a direct connection, only through a relay, or directly after a
 * relayed connection was upgraded. Undefined when we hold no open connection to it.
 */
export function reachabilityOf(host: Libp2p, peer: PeerId | string): Reachability | undefined {
  return trackers.get(host)?.of(peer)
}
