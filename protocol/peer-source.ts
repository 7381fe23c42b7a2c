/**
 * Where a request comes from, for the limits a Sybil cannot multiply (issue #39, finding 1):
 * peer ids cost nothing, addresses do. A connection is counted under its remote IP and under
 * that IP's subnet (/24 for IPv4, /48 for IPv6: the usual end-site allocation, so one host's
 * many IPv6 addresses share a share). A relayed connection counts under the relay's address
 * (its first IP component): every peer behind one relay shares that relay's share.
 */

/** A connection's source: undefined for loopback (the node's own machine: an operator, a local swarm, tests). */
export interface PeerSource {
  /** `ip4:a.b.c.d` or `ip6:<full address>`. */
  readonly ip: string
  /** `ip4:a.b.c/24` or `ip6:<first three groups>/48`. */
  readonly subnet: string
}

function expandIpv6(addr: string): string[] | undefined {
  const [head, tail, more] = addr.split('::')
  if (more !== undefined) return undefined
  const h = head === '' ? [] : head.split(':')
  const t = tail === undefined ? [] : tail === '' ? [] : tail.split(':')
  const fill = tail === undefined ? 0 : 8 - h.length - t.length
  if (fill < 0) return undefined
  const groups = [...h, ...Array<string>(fill).fill('0'), ...t]
  if (groups.length !== 8 || groups.some((g) => !/^[0-9a-f]{1,4}$/i.test(g))) return undefined
  return groups.map((g) => Number.parseInt(g, 16).toString(16))
}

/** The source of a connection whose remote address is `remoteAddr` (a multiaddr string). */
export function peerSource(remoteAddr: string): PeerSource | undefined {
  const v4 = /\/ip4\/(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?:\/|$)/.exec(remoteAddr)
  const v6 = /\/ip6\/([0-9a-fA-F:]+)(?:\/|$)/.exec(remoteAddr)
  // the first IP in the address: for a relayed connection, the relay's
  if (v4 && (!v6 || v4.index < v6.index)) {
    const [, a, b, c, d] = v4
    if (a === '127') return undefined
    return { ip: `ip4:${a}.${b}.${c}.${d}`, subnet: `ip4:${a}.${b}.${c}/24` }
  }
  if (v6) {
    const g = expandIpv6(v6[1])
    if (!g) return { ip: `ip6:${v6[1]}`, subnet: `ip6:${v6[1]}` }
    if (g.slice(0, 7).every((x) => x === '0') && g[7] === '1') return undefined // ::1
    return { ip: `ip6:${g.join(':')}`, subnet: `ip6:${g.slice(0, 3).join(':')}/48` }
  }
  // no IP at all (a DNS or memory transport): one shared bucket, so it still cannot take everything
  return { ip: 'other', subnet: 'other' }
}
