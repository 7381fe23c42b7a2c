import { BlockList, isIP } from 'node:net'
import { type NetworkInterfaceInfo, networkInterfaces } from 'node:os'
import { multiaddr } from '@multiformats/multiaddr'

/**
 * Which announced addresses a client dials (issue #39 item 5). An announcement is signed by the
 * peer it names, but anyone can make a key and sign one: forty fake announcements pointing at
 * one local port made a client open 80 connections to it. So a client dials at most
 * MAX_DIALLED_ADDRS_PER_PEER addresses of each announced peer, and only:
 * - public IPv4/IPv6 addresses;
 * - private, CGNAT, link-local and unique-local addresses inside a subnet one of this machine's
 *   own interfaces is on (the client is on that network), or the host of a bootstrap address;
 * - loopback addresses when the client itself reaches the swarm over loopback (a bootstrap
 *   address on 127.0.0.0/8, ::1 or `localhost`): a swarm on this machine;
 * - DNS names only when a bootstrap address names them (a name may resolve to anything).
 * Never unspecified, multicast or broadcast addresses, nor other transports (unix sockets).
 * Bootstrap addresses themselves are the user's choice and are dialled as given.
 */
export const MAX_DIALLED_ADDRS_PER_PEER = 4

export interface DialPolicyInit {
  /** The bootstrap multiaddrs the user gave (they say which networks the swarm is on). */
  readonly bootstrap: readonly string[]
  /** Addresses dialled per announced peer at most (default MAX_DIALLED_ADDRS_PER_PEER). */
  readonly maxAddrsPerPeer?: number
  /** This machine's interfaces (default os.networkInterfaces(), read when the policy is made). */
  readonly interfaces?: NodeJS.Dict<NetworkInterfaceInfo[]>
}

export interface DialPolicy {
  /** Why `addr` is outside the policy, or undefined if the client may dial it. */
  refusal(addr: string): string | undefined
  /** The announced addresses of one peer the client may dial: in policy, at most N, own networks first. */
  filter(addrs: readonly string[]): string[]
}

function ranges(v4: Array<[string, number]>, v6: Array<[string, number]>): BlockList {
  const list = new BlockList()
  for (const [net, prefix] of v4) list.addSubnet(net, prefix, 'ipv4')
  for (const [net, prefix] of v6) list.addSubnet(net, prefix, 'ipv6')
  return list
}

const LOOPBACK = ranges([['127.0.0.0', 8]], [['::1', 128]])
const NEVER = ranges(
  [
    ['0.0.0.0', 8],
    ['224.0.0.0', 4],
    ['240.0.0.0', 4]
  ],
  [
    ['::', 128],
    ['ff00::', 8]
  ]
)
const PRIVATE = ranges(
  [
    ['10.0.0.0', 8],
    ['172.16.0.0', 12],
    ['192.168.0.0', 16],
    ['100.64.0.0', 10],
    ['169.254.0.0', 16]
  ],
  [
    ['fc00::', 7],
    ['fe80::', 10]
  ]
)

type Family = 'ipv4' | 'ipv6'

/** An IP address as BlockList checks it (IPv4-mapped IPv6 as IPv4; zone ids dropped). */
function ipOf(text: string): { ip: string; family: Family } | undefined {
  const ip = text.split('%')[0]
  const v = isIP(ip)
  if (v === 4) return { ip, family: 'ipv4' }
  if (v !== 6) return undefined
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip)
  return mapped ? { ip: mapped[1], family: 'ipv4' } : { ip, family: 'ipv6' }
}

/** The host part (first component) of a multiaddr: its protocol name and value. */
function hostOf(addr: string): { name: string; value: string } | undefined {
  try {
    const first = multiaddr(addr).getComponents()[0]
    return first ? { name: first.name, value: first.value ?? '' } : undefined
  } catch {
    return undefined
  }
}

export function createDialPolicy(init: DialPolicyInit): DialPolicy {
  const max = init.maxAddrsPerPeer ?? MAX_DIALLED_ADDRS_PER_PEER
  const ownNets = new BlockList()
  for (const list of Object.values(init.interfaces ?? networkInterfaces())) {
    for (const i of list ?? []) {
      if (i.internal || !i.cidr) continue
      const [net, prefix] = i.cidr.split('/')
      const ip = ipOf(net)
      if (ip) ownNets.addSubnet(ip.ip, Number(prefix), ip.family)
    }
  }
  const bootIps = new Set<string>()
  const bootNames = new Set<string>()
  let onLoopback = false
  for (const b of init.bootstrap) {
    const host = hostOf(b)
    if (!host) continue
    if (host.name.startsWith('dns')) {
      bootNames.add(host.value.toLowerCase())
      if (host.value.toLowerCase() === 'localhost') onLoopback = true
      continue
    }
    const ip = ipOf(host.value)
    if (!ip) continue
    bootIps.add(ip.ip)
    if (LOOPBACK.check(ip.ip, ip.family)) onLoopback = true
  }
  const onOwnNet = (addr: string): boolean => {
    const host = hostOf(addr)
    const ip = host ? ipOf(host.value) : undefined
    return ip !== undefined && (ownNets.check(ip.ip, ip.family) || LOOPBACK.check(ip.ip, ip.family))
  }
  const policy: DialPolicy = {
    refusal(addr) {
      const host = hostOf(addr)
      if (!host) return 'not a multiaddr'
      if (host.name.startsWith('dns')) {
        return bootNames.has(host.value.toLowerCase()) ? undefined : 'a DNS name no bootstrap address names'
      }
      if (host.name !== 'ip4' && host.name !== 'ip6') return `a ${host.name} address`
      const ip = ipOf(host.value)
      if (!ip) return 'not an IP address'
      if (NEVER.check(ip.ip, ip.family)) return 'an unspecified, multicast or broadcast address'
      if (LOOPBACK.check(ip.ip, ip.family)) {
        return onLoopback ? undefined : 'a loopback address, and this client reaches the swarm over no loopback address'
      }
      if (PRIVATE.check(ip.ip, ip.family)) {
        return ownNets.check(ip.ip, ip.family) || bootIps.has(ip.ip)
          ? undefined
          : 'a private address on a network this machine is not on'
      }
      return undefined
    },
    filter(addrs) {
      const allowed = [...new Set(addrs)].filter((a) => policy.refusal(a) === undefined)
      // the client's own networks first (a LAN address beats a public one of the same peer)
      const own = allowed.filter(onOwnNet)
      return [...own, ...allowed.filter((a) => !onOwnNet(a))].slice(0, max)
    }
  }
  return policy
}
