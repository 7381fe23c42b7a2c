import { generateKeyPair } from '@libp2p/crypto/keys'
import type { PrivateKey } from '@libp2p/interface'
import { peerIdFromPrivateKey } from '@libp2p/peer-id'
import { multiaddr } from '@multiformats/multiaddr'
import { afterEach, describe, expect, it, vi } from 'vitest'
import {
  connectionAllowed,
  createHost,
  type Host,
  InvalidSwarmKeyError,
  type NetworkPolicy,
  newSwarmKeyText,
  PeerNotAllowedError,
  parseAllowList,
  parseSwarmKey,
  SwarmKeyMismatchError,
  servingAllowed
} from '../../protocol/index.js'

// Issue #38: pnet over real TCP + Noise + yamux between two hosts in this process.
const hosts: Host[] = []
afterEach(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.stop()))
})

async function host(policy: NetworkPolicy, listen = ['/ip4/127.0.0.1/tcp/0'], privateKey?: PrivateKey): Promise<Host> {
  const h = await createHost({ listen, pubsub: false, policy, privateKey })
  hosts.push(h)
  return h
}

describe('swarm keys', () => {
  it('parses the v1 key format and refuses anything else, without echoing the key', () => {
    const text = newSwarmKeyText()
    const key = parseSwarmKey(text)
    expect(key.fingerprint).toMatch(/^[0-9a-f]{16}$/)
    expect(
      parseSwarmKey(text.toUpperCase().replace('/KEY/SWARM/PSK/1.0.0/', '/key/swarm/psk/1.0.0/').replace('/BASE16/', '/base16/'))
        .fingerprint
    ).toBe(key.fingerprint)
    expect(() => parseSwarmKey('hello')).toThrow(InvalidSwarmKeyError)
    const hex = text.split('\n')[2]
    const short = `/key/swarm/psk/1.0.0/\n/base16/\n${hex.slice(2)}`
    expect(() => parseSwarmKey(short)).toThrow(/64 hex digits/)
    try {
      parseSwarmKey(`/key/swarm/psk/1.0.0/\n/base64/\n${hex}`)
    } catch (err) {
      expect((err as Error).message).not.toContain(hex)
    }
  })

  it('hosts with one key connect; another key or none is refused on both sides with SWARM_KEY_MISMATCH', async () => {
    const key = parseSwarmKey(newSwarmKeyText())
    const other = parseSwarmKey(newSwarmKeyText())
    const refused: Error[] = []
    const server = await host({ swarmKey: key, onRefused: (e) => refused.push(e) })
    const addr = multiaddr(`${server.getMultiaddrs()[0]}`)

    const member = await host({ swarmKey: key }, [])
    const conn = await member.dial(addr)
    expect(conn.remotePeer.equals(server.peerId)).toBe(true)
    expect(refused).toEqual([])

    const stranger = await host({ swarmKey: other }, [])
    const err = await stranger.dial(addr).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(SwarmKeyMismatchError)
    expect((err as SwarmKeyMismatchError).code).toBe('SWARM_KEY_MISMATCH')
    expect(refused.length).toBe(1)
    expect(refused[0]).toBeInstanceOf(SwarmKeyMismatchError)

    const keyless = await host({}, [])
    const err2 = await keyless.dial(addr).catch((e: unknown) => e)
    expect(err2).toBeInstanceOf(Error)
    console.log('keyless dialer saw', (err2 as Error).name, (err2 as Error).message)
    // the server refuses once its check read fails (the keyless side gives up first)
    await vi.waitFor(() => expect(refused.length).toBe(2), { timeout: 20_000, interval: 50 })
    expect(stranger.getConnections().length + keyless.getConnections().length).toBe(0)
  })

  it('allow-lists: a peer on neither list is refused at the gater (PEER_NOT_ALLOWED); one on --allow-use connects', async () => {
    const keyUser = await generateKeyPair('Ed25519')
    const user = peerIdFromPrivateKey(keyUser).toString()
    const refused: Error[] = []
    const swarmKey = parseSwarmKey(newSwarmKeyText())
    const server = await host({ swarmKey, allowUse: new Set([user]), allowServe: new Set(), onRefused: (e) => refused.push(e) })
    const addr = multiaddr(`${server.getMultiaddrs()[0]}`)
    const allowed = await host({ swarmKey }, [], keyUser)
    expect((await allowed.dial(addr)).remotePeer.equals(server.peerId)).toBe(true)
    const other = await host({ swarmKey }, [])
    await other.dial(addr).catch(() => undefined)
    await vi.waitFor(() => expect(refused.length).toBe(1), { timeout: 20_000, interval: 50 })
    expect(refused[0]).toBeInstanceOf(PeerNotAllowedError)
    expect(server.getConnections().map((c) => c.remotePeer.toString())).toEqual([user])
  })

  it('allow-list files and decisions', () => {
    const ids = parseAllowList('# servers\n12D3KooWA  # a\n\n  12D3KooWB\n')
    expect([...ids]).toEqual(['12D3KooWA', '12D3KooWB'])
    expect(connectionAllowed({}, 'x')).toBe(true)
    expect(connectionAllowed({ allowServe: ids }, 'x')).toBe(false)
    expect(connectionAllowed({ allowServe: ids, allowUse: new Set(['x']) }, 'x')).toBe(true)
    expect(servingAllowed({ allowUse: new Set(['x']) }, 'x')).toBe(true)
    expect(servingAllowed({ allowServe: ids }, 'x')).toBe(false)
  })
})
