import { multiaddr } from '@multiformats/multiaddr'
import { afterAll, describe, expect, it } from 'vitest'
import { createHost, type Host, REQUEST_STREAM_LIMITS } from '../../protocol/index.js'
import { addressKey, RELAY_DATA_LIMIT_BYTES, RELAY_DURATION_LIMIT_MS } from '../../protocol/reachability.js'

// Issue #39: a relay's reservations per IP address, and limits on each relayed connection. Real
// libp2p hosts over TCP on 127.0.0.1: every client here shares one address, as a Sybil's ids do.

const PER_IP = 2

interface RelayService {
  readonly reservations: { readonly size: number; values(): Iterable<{ limit?: { duration?: number; data?: bigint } }> }
}

describe('relay reservation limits', () => {
  const hosts: Host[] = []
  afterAll(async () => {
    await Promise.all(hosts.map((h) => h.stop()))
  })

  it(`gives one address at most ${PER_IP} reservations, each limited in duration and data`, async () => {
    const relay = await createHost({
      listen: ['/ip4/127.0.0.1/tcp/0'],
      pubsub: false,
      reachability: { relayServer: true, relayMaxReservationsPerIp: PER_IP, holePunch: false }
    })
    hosts.push(relay)
    const relayAddr = relay.getMultiaddrs()[0].toString()
    const service = relay.services.relay as RelayService
    const outcomes: Array<'reserved' | 'refused'> = []
    for (let i = 0; i < PER_IP + 3; i++) {
      try {
        const h = await createHost({
          listen: [`${relayAddr}/p2p-circuit`],
          bootstrap: [relayAddr],
          pubsub: false,
          reachability: { holePunch: false }
        })
        hosts.push(h)
        outcomes.push(h.getMultiaddrs().some((a) => a.toString().includes('/p2p-circuit')) ? 'reserved' : 'refused')
      } catch {
        outcomes.push('refused')
      }
    }
    expect(service.reservations.size).toBe(PER_IP)
    expect(outcomes.filter((o) => o === 'reserved')).toHaveLength(PER_IP)
    for (const r of service.reservations.values()) {
      expect(r.limit?.duration).toBe(RELAY_DURATION_LIMIT_MS)
      expect(r.limit?.data).toBe(RELAY_DATA_LIMIT_BYTES)
    }
  }, 60_000)

  it("runs our protocols over a relayed connection, which the limits make 'limited' to libp2p", async () => {
    const relay = await createHost({ listen: ['/ip4/127.0.0.1/tcp/0'], pubsub: false, reachability: { relayServer: true } })
    hosts.push(relay)
    const relayAddr = relay.getMultiaddrs()[0].toString()
    const home = await createHost({ listen: [`${relayAddr}/p2p-circuit`], bootstrap: [relayAddr], pubsub: false })
    hosts.push(home)
    let served = 0
    await home.handle(
      '/layerswarm-test/limited/1',
      async (stream) => {
        served++
        await stream.close()
      },
      REQUEST_STREAM_LIMITS
    )
    const client = await createHost({ listen: [], pubsub: false, reachability: { holePunch: false } })
    hosts.push(client)
    const circuit = home.getMultiaddrs().find((a) => a.toString().includes('/p2p-circuit'))!
    const stream = await client.dialProtocol(circuit, '/layerswarm-test/limited/1', REQUEST_STREAM_LIMITS)
    const conn = client.getConnections(home.peerId)[0]
    // (the relay enforces the duration, in ms, itself: createLimitedRelay in @libp2p/circuit-relay-v2)
    expect(conn.limits?.seconds).toBeGreaterThan(0)
    // what is left of the data limit: the relay's whole limit less the bytes sent so far
    expect(conn.limits?.bytes).toBeLessThanOrEqual(RELAY_DATA_LIMIT_BYTES)
    expect(conn.limits?.bytes).toBeGreaterThan(RELAY_DATA_LIMIT_BYTES - (1n << 20n))
    await stream.close()
    for (let i = 0; i < 100 && served === 0; i++) await new Promise((r) => setTimeout(r, 20))
    expect(served).toBe(1)
  }, 60_000)

  it('counts IPv4 addresses whole and IPv6 ones by /64', () => {
    expect(addressKey(multiaddr('/ip4/10.1.2.3/tcp/1'))).toBe('10.1.2.3')
    expect(addressKey(multiaddr('/ip6/2001:db8:1:2::5/tcp/1'))).toBe(addressKey(multiaddr('/ip6/2001:db8:1:2:ffff::9/tcp/1')))
    expect(addressKey(multiaddr('/ip6/2001:db8:1:2::5/tcp/1'))).not.toBe(addressKey(multiaddr('/ip6/2001:db8:1:3::5/tcp/1')))
    expect(addressKey(multiaddr('/dns4/example.com/tcp/1'))).toBeUndefined()
  })
})
