/**
 * `node start`'s reachability options (docs/networking.md): relay serving, a relay slot for a node
 * behind NAT, explicit public addresses, AutoNAT, UPnP and hole punching
 * (protocol/reachability.ts holds what each turns on).
 */
import type { AbortOptions } from '@libp2p/interface'
import { multiaddr } from '@multiformats/multiaddr'
import { type Command, Option } from 'commander'
import type { ReachabilityInit } from '../../protocol/index.js'
import { BadOptionError } from './errors.js'

export interface ReachabilityCliOptions {
  relay?: boolean
  useRelay?: boolean
  announce?: string[]
  autonat?: 'auto' | 'on' | 'off'
  upnp?: boolean
  holePunch?: boolean
}

/** What the options make of a node's host: listen addresses, announced addresses, services. */
export interface HostReachability {
  listen: string[]
  announce?: string[]
  reachability: ReachabilityInit
}

export function addReachabilityOptions(cmd: Command): Command {
  return cmd
    .option('--relay', 'serve circuit relay v2 reservations, so peers behind NAT are reachable through this node', false)
    .option(
      '--use-relay',
      'behind NAT: reserve a slot on a relay among the connected peers (bootstrap peers started with --relay) and announce the relayed address',
      false
    )
    .option(
      '--announce <multiaddr...>',
      'announce these addresses instead of the listen addresses (a public address, a port the router forwards)'
    )
    .addOption(
      new Option(
        '--autonat <when>',
        'ask peers to dial our addresses back to learn which are reachable (auto: unless every listen address is loopback)'
      )
        .choices(['auto', 'on', 'off'])
        .default('auto')
    )
    .option('--upnp', 'map the listen port on the home router by UPnP IGD, where the router offers it', false)
    .option('--no-hole-punch', 'keep relayed connections relayed (no DCUtR upgrade to a direct connection)')
}

const LOOPBACK = /^\/(ip4\/127\.|ip6\/::1\/)/

export function hostReachability(opts: ReachabilityCliOptions, listen: readonly string[]): HostReachability {
  const announce = opts.announce ?? []
  for (const a of announce) {
    let ok = false
    try {
      ok = multiaddr(a)
        .getComponents()
        .some((c) => c.name === 'tcp')
    } catch {}
    if (!ok) throw new BadOptionError(`--announce ${a} is not a TCP multiaddr; expected e.g. /ip4/203.0.113.7/tcp/4001`)
  }
  if (opts.relay && opts.useRelay)
    throw new BadOptionError('--relay and --use-relay exclude each other (a relay is reachable itself)')
  const autoNat = opts.autonat === 'on' || (opts.autonat !== 'off' && !listen.every((a) => LOOPBACK.test(a)))
  return {
    // listening on /p2p-circuit is how libp2p's relay transport is told to reserve a slot
    listen: opts.useRelay ? [...listen, '/p2p-circuit'] : [...listen],
    ...(announce.length > 0 ? { announce } : {}),
    reachability: { relayServer: opts.relay === true, autoNat, upnp: opts.upnp === true, holePunch: opts.holePunch !== false }
  }
}

/** How long `--use-relay` waits for a relay's reservation before the node serves without one. */
export const RELAY_WAIT_MS = 15_000

/** Resolves true once `addrs()` holds a relayed address, false after `waitMs`. */
export async function relayedAddress(
  addrs: () => string[],
  waitMs = RELAY_WAIT_MS,
  { signal }: AbortOptions = {}
): Promise<boolean> {
  const until = Date.now() + waitMs
  while (Date.now() < until) {
    signal?.throwIfAborted()
    if (addrs().some((a) => a.includes('/p2p-circuit'))) return true
    await new Promise((r) => setTimeout(r, 100))
  }
  return false
}
