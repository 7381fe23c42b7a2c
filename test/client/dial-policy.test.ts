/**
 * Issue #39 item 5: the client's dial policy for announced addresses (client/routing/dial-policy.ts),
 * on a machine described by its interfaces. The e2e side (decoy announcements in network
 * namespaces, connections counted) is test/e2e/private-swarm.test.ts.
 */
import type { NetworkInterfaceInfo } from 'node:os'
import { describe, expect, it } from 'vitest'
import { createDialPolicy, MAX_DIALLED_ADDRS_PER_PEER } from '../../client/routing/dial-policy.js'

const iface = (cidr: string, internal = false): NetworkInterfaceInfo => {
  const [address, prefix] = cidr.split('/')
  const v6 = address.includes(':')
  return {
    address,
    netmask: '',
    family: v6 ? 'IPv6' : 'IPv4',
    mac: '00:00:00:00:00:00',
    internal,
    cidr: `${address}/${prefix}`,
    ...(v6 ? { scopeid: 0 } : {})
  } as NetworkInterfaceInfo
}

/** A LAN machine: 192.168.1.20/24 and a ULA, plus loopback. */
const LAN = { lo: [iface('127.0.0.1/8', true), iface('::1/128', true)], eth0: [iface('192.168.1.20/24'), iface('fd00:1::20/64')] }

describe('client dial policy for announced addresses', () => {
  it('a client on a LAN dials its own subnet and public addresses, not other private networks nor loopback', () => {
    const p = createDialPolicy({ bootstrap: ['/ip4/192.168.1.10/tcp/4001'], interfaces: LAN })
    expect(p.refusal('/ip4/192.168.1.11/tcp/4001')).toBeUndefined()
    expect(p.refusal('/ip6/fd00:1::11/tcp/4001')).toBeUndefined()
    expect(p.refusal('/ip4/1.2.3.4/tcp/4001')).toBeUndefined()
    expect(p.refusal('/ip4/192.168.2.11/tcp/4001')).toMatch(/private address on a network this machine is not on/)
    expect(p.refusal('/ip4/10.0.0.5/tcp/22')).toMatch(/private/)
    expect(p.refusal('/ip4/172.17.0.2/tcp/22')).toMatch(/private/)
    expect(p.refusal('/ip6/fd00:2::11/tcp/4001')).toMatch(/private/)
    expect(p.refusal('/ip4/127.0.0.1/tcp/22')).toMatch(/loopback/)
    expect(p.refusal('/ip6/::1/tcp/22')).toMatch(/loopback/)
    expect(p.refusal('/ip6/::ffff:127.0.0.1/tcp/22')).toMatch(/loopback/)
    expect(p.refusal('/ip4/0.0.0.0/tcp/22')).toMatch(/unspecified/)
    expect(p.refusal('/ip4/224.0.0.1/tcp/22')).toMatch(/multicast/)
    expect(p.refusal('/dns4/evil.example/tcp/22')).toMatch(/DNS/)
    expect(p.refusal('/unix/tmp%2Fsock')).toBeDefined()
    expect(p.refusal('/ip6/::/tcp/22')).toMatch(/unspecified/)
    expect(p.refusal('/ip6/fe80::1/tcp/22')).toMatch(/private/)
    expect(p.refusal('/ip6/2001:db8::1/tcp/4001')).toBeUndefined()
    expect(p.refusal('/ip6/::ffff:192.168.1.30/tcp/4001')).toBeUndefined() // IPv4-mapped, on the LAN
  })

  it('loopback only for a client that reaches the swarm over loopback; a bootstrap host and name are the user’s', () => {
    const local = createDialPolicy({ bootstrap: ['/ip4/127.0.0.1/tcp/4001'], interfaces: LAN })
    expect(local.refusal('/ip4/127.0.0.1/tcp/4002')).toBeUndefined()
    expect(local.refusal('/ip4/127.0.0.2/tcp/4002')).toBeUndefined()
    const named = createDialPolicy({ bootstrap: ['/dns4/localhost/tcp/4001', '/ip4/10.9.0.1/tcp/4001'], interfaces: LAN })
    expect(named.refusal('/ip4/127.0.0.1/tcp/4002')).toBeUndefined()
    expect(named.refusal('/dns4/localhost/tcp/4009')).toBeUndefined()
    expect(named.refusal('/ip4/10.9.0.1/tcp/4009')).toBeUndefined() // the host the user typed
    expect(named.refusal('/ip4/10.9.0.2/tcp/4009')).toMatch(/private/)
  })

  it('keeps at most N addresses per peer, in-policy ones only, the own network first', () => {
    const p = createDialPolicy({ bootstrap: ['/ip4/192.168.1.10/tcp/4001'], interfaces: LAN })
    const many = Array.from({ length: 32 }, (_, i) => `/ip4/1.2.3.${i}/tcp/4001`)
    const got = p.filter(['/ip4/127.0.0.1/tcp/1', '/ip4/10.1.1.1/tcp/1', ...many, '/ip4/192.168.1.99/tcp/4001'])
    expect(got).toHaveLength(MAX_DIALLED_ADDRS_PER_PEER)
    expect(got[0]).toBe('/ip4/192.168.1.99/tcp/4001')
    expect(got.slice(1)).toEqual(many.slice(0, MAX_DIALLED_ADDRS_PER_PEER - 1))
    expect(createDialPolicy({ bootstrap: [], interfaces: LAN, maxAddrsPerPeer: 2 }).filter(many)).toHaveLength(2)
  })

  it('a relayed address is judged by its relay’s host', () => {
    const p = createDialPolicy({ bootstrap: ['/ip4/1.2.3.1/tcp/4101'], interfaces: LAN })
    const id = '12D3KooWSxVYVfJY6dLgZ3ysTeN9v6PeHRzBfN5gmUBWsqw5NKvj'
    expect(p.refusal(`/ip4/1.2.3.1/tcp/4101/p2p/${id}/p2p-circuit`)).toBeUndefined()
    expect(p.refusal(`/ip4/127.0.0.1/tcp/4101/p2p/${id}/p2p-circuit`)).toMatch(/loopback/)
  })
})
