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

type Family = 'ipv4' | 'ipv6'

/** An IP address as a number (IPv4-mapped IPv6 as IPv4; a zone id dropped), or undefined. */
interface Ip {
  readonly family: Family
  readonly value: bigint
}

function parseV4(text: string): bigint | undefined {
  const parts = text.split('.')
  if (parts.length !== 4 || !parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255)) return undefined
  return parts.reduce((acc, p) => (acc << 8n) | BigInt(Number(p)), 0n)
}

function parseV6(text: string): bigint | undefined {
  let head = text
  let tail4: bigint | undefined
  const v4 = /:(\d+\.\d+\.\d+\.\d+)$/.exec(text)
  if (v4) {
    tail4 = parseV4(v4[1])
    if (tail4 === undefined) return undefined
    head = `${text.slice(0, v4.index)}:0:0`
  }
  const halves = head.split('::')
  if (halves.length > 2) return undefined
  const groups = (h: string) => (h === '' ? [] : h.split(':'))
  const left = groups(halves[0])
  const right = halves.length === 2 ? groups(halves[1]) : []
  const fill = 8 - left.length - right.length
  if ((halves.length === 2 && fill < 1) || (halves.length === 1 && fill !== 0)) return undefined
  const all = [...left, ...Array(halves.length === 2 ? fill : 0).fill('0'), ...right]
  if (!all.every((g) => /^[0-9a-f]{1,4}$/i.test(g))) return undefined
  let value = all.reduce((acc, g) => (acc << 16n) | BigInt(Number.parseInt(g, 16)), 0n)
  if (tail4 !== undefined) value = (value & ~0xffffffffn) | tail4
  return value
}

function ipOf(text: string): Ip | undefined {
  const bare = text.split('%')[0]
  const v4 = parseV4(bare)
  if (v4 !== undefined) return { family: 'ipv4', value: v4 }
  const v6 = parseV6(bare)
  if (v6 === undefined) return undefined
  // ::ffff:a.b.c.d is an IPv4 address
  if (v6 >> 32n === 0xffffn) return { family: 'ipv4', value: v6 & 0xffffffffn }
  return { family: 'ipv6', value: v6 }
}

/** A set of subnets (what node:net's BlockList does, without Node: the SDK runs in browsers too). */
class Subnets {
  private readonly nets: Array<{ family: Family; base: bigint; mask: bigint }> = []
  add(net: string, prefix: number): this {
    const ip = ipOf(net)
    if (!ip) return this
    const bits = ip.family === 'ipv4' ? 32n : 128n
    const p = BigInt(Math.max(0, Math.min(Number(bits), prefix)))
    const mask = ((1n << bits) - 1n) ^ ((1n << (bits - p)) - 1n)
    this.nets.push({ family: ip.family, base: ip.value & mask, mask })
    return this
  }
  has(ip: Ip): boolean {
    return this.nets.some((n) => n.family === ip.family && (ip.value & n.mask) === n.base)
  }
}

const LOOPBACK = new Subnets().add('127.0.0.0', 8).add('::1', 128)
const NEVER = new Subnets().add('0.0.0.0', 8).add('224.0.0.0', 4).add('240.0.0.0', 4).add('::', 128).add('ff00::', 8)
const PRIVATE = new Subnets()
  .add('10.0.0.0', 8)
  .add('172.16.0.0', 12)
  .add('192.168.0.0', 16)
  .add('100.64.0.0', 10)
  .add('169.254.0.0', 16)
  .add('fc00::', 7)
  .add('fe80::', 10)

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
  const ownNets = new Subnets()
  for (const list of Object.values(init.interfaces ?? networkInterfaces())) {
    for (const i of list ?? []) {
      if (i.internal || !i.cidr) continue
      const [net, prefix] = i.cidr.split('/')
      ownNets.add(net, Number(prefix))
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
    bootIps.add(`${ip.family}:${ip.value}`)
    if (LOOPBACK.has(ip)) onLoopback = true
  }
  const onOwnNet = (addr: string): boolean => {
    const host = hostOf(addr)
    const ip = host ? ipOf(host.value) : undefined
    return ip !== undefined && (ownNets.has(ip) || LOOPBACK.has(ip))
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
      if (NEVER.has(ip)) return 'an unspecified, multicast or broadcast address'
      if (LOOPBACK.has(ip)) {
        return onLoopback ? undefined : 'a loopback address, and this client reaches the swarm over no loopback address'
      }
      if (PRIVATE.has(ip)) {
        return ownNets.has(ip) || bootIps.has(`${ip.family}:${ip.value}`)
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
