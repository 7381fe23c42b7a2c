import { generateKeyPair } from '@libp2p/crypto/keys'
import { peerIdFromPrivateKey } from '@libp2p/peer-id'
import { afterEach, describe, expect, it } from 'vitest'
import {
  ANNOUNCEMENTS_PROTOCOL,
  type Announcement,
  AnnouncementStore,
  createHost,
  decodeAnnouncementsRequest,
  decodeAnnouncementsResponse,
  encodeAnnouncementsRequest,
  encodeAnnouncementsResponse,
  fetchAnnouncements,
  gossipScoreParams,
  type Host,
  MAX_ANNOUNCEMENTS_RESPONSE_BYTES,
  MessageTooLargeError,
  request,
  type SignedAnnouncement,
  serveAnnouncements,
  signAnnouncement
} from '../../protocol/index.js'

async function announcement(
  modelId: string,
  start: number,
  now = Date.now()
): Promise<{ a: Announcement; s: SignedAnnouncement }> {
  const key = await generateKeyPair('Ed25519')
  const a: Announcement = {
    peerId: peerIdFromPrivateKey(key).toString(),
    modelId,
    start,
    end: start + 1,
    throughput: 10,
    freeCacheTokens: 512,
    wireDtypes: ['f32'],
    version: '1.0.0',
    addrs: ['/ip4/127.0.0.1/tcp/4001'],
    issuedAtMs: now,
    expiresAtMs: now + 30_000
  }
  return { a, s: await signAnnouncement(a, key) }
}

describe('announcements request/response (protobuf, size-capped)', () => {
  const hosts: Host[] = []
  afterEach(async () => {
    await Promise.all(hosts.splice(0).map((h) => h.stop()))
  })

  it('a peer hands over the verified announcements it holds, per model, over real libp2p', async () => {
    const store = new AnnouncementStore()
    for (const [model, start] of [
      ['m1', 0],
      ['m1', 1],
      ['m2', 0]
    ] as const) {
      const { a, s } = await announcement(model, start)
      store.put(a, s)
    }
    const server = await createHost({ pubsub: false })
    const client = await createHost({ listen: [], pubsub: false })
    hosts.push(server, client)
    await serveAnnouncements(server, store)
    const all = await fetchAnnouncements(client, server.getMultiaddrs())
    expect(all.map((x) => x.announcement.modelId).sort()).toEqual(['m1', 'm1', 'm2'])
    const m1 = await fetchAnnouncements(client, server.getMultiaddrs(), { modelId: 'm1' })
    expect(m1.map((x) => x.announcement.start).sort()).toEqual([0, 1])
  })

  it('entries that fail verification are dropped, not trusted', async () => {
    const { a, s } = await announcement('m1', 0)
    const other = await announcement('m1', 1)
    const forged: SignedAnnouncement = { ...other.s, announcement: s.announcement } // someone else's signature
    const store = new AnnouncementStore()
    store.put(other.a, forged)
    store.put(a, s)
    const server = await createHost({ pubsub: false })
    const client = await createHost({ listen: [], pubsub: false })
    hosts.push(server, client)
    await serveAnnouncements(server, store)
    const invalid: Error[] = []
    const got = await fetchAnnouncements(client, server.getMultiaddrs(), { onInvalid: (e) => invalid.push(e) })
    expect(got.map((x) => x.announcement.peerId)).toEqual([a.peerId])
    expect(invalid).toHaveLength(1)
  })

  it('a request bigger than a model id is refused before it is buffered', async () => {
    const server = await createHost({ pubsub: false })
    const client = await createHost({ listen: [], pubsub: false })
    hosts.push(server, client)
    await serveAnnouncements(server, new AnnouncementStore())
    await expect(request(client, server.getMultiaddrs(), ANNOUNCEMENTS_PROTOCOL, new Uint8Array(64 * 1024))).rejects.toThrow()
    expect(() => decodeAnnouncementsRequest(new Uint8Array(2048))).toThrow(MessageTooLargeError)
    expect(decodeAnnouncementsRequest(encodeAnnouncementsRequest({ modelId: 'lsm1-x' }))).toEqual({ modelId: 'lsm1-x' })
  })

  it('replies are trimmed under the cap; the store keeps the newest per peer and expires old ones', async () => {
    const { a, s } = await announcement('m1', 0)
    const big: SignedAnnouncement = { ...s, announcement: new Uint8Array(15_000).fill(1) }
    const many = Array.from({ length: 64 }, () => big)
    const bytes = encodeAnnouncementsResponse(many)
    expect(bytes.byteLength).toBeLessThanOrEqual(MAX_ANNOUNCEMENTS_RESPONSE_BYTES)
    expect(decodeAnnouncementsResponse(bytes).length).toBeLessThan(64)
    const store = new AnnouncementStore(2)
    store.put(a, s)
    store.put({ ...a, issuedAtMs: a.issuedAtMs - 1 }, big) // older: ignored
    expect(store.list()).toEqual([s])
    store.put((await announcement('m1', 1)).a, s)
    store.put((await announcement('m1', 2)).a, s)
    expect(store.size).toBe(2)
    expect(store.list(undefined, a.expiresAtMs + 60_000)).toEqual([])
  })

  it('gossipsub scoring: no IP colocation penalty; invalid announcements cost score; a host accepts the params', async () => {
    const p = gossipScoreParams()
    expect(p.IPColocationFactorWeight).toBe(0)
    expect(Object.values(p.topics)[0].invalidMessageDeliveriesWeight).toBeLessThan(0)
    const h = await createHost()
    hosts.push(h)
    expect(h.services.pubsub).toBeDefined()
  })
})
