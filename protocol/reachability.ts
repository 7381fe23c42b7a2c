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
import { Circuit } from '@multiformats/multiaddr-matcher'

/** What the host's reachability options turn on (HostInit.reachability). */
export interface ReachabilityInit {
  /** Serve circuit relay v2 reservations to peers behind NAT (a node with a public address). */
  relayServer?: boolean
  /** Reservations a relay holds at once (default RELAY_MAX_RESERVATIONS). */
  relayMaxReservations?: number
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
 * The relay relays sessions, not just a handshake: libp2p's default limit per relayed connection
 * (2 min, 128 KiB) would cut a generation, so a layerswarm relay lifts it. Its bandwidth is the
 * relay operator's to give, which is why relaying is opt-in (`--relay`); hole punching moves the
 * traffic to a direct connection where the routers allow it.
 */
export function relayServerService(init: ReachabilityInit) {
  return circuitRelayServer({
    reservations: { maxReservations: init.relayMaxReservations ?? RELAY_MAX_RESERVATIONS, applyDefaultLimit: false }
  })
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
