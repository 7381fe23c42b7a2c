import { generateKeyPair } from '@libp2p/crypto/keys'
import { peerIdFromPrivateKey } from '@libp2p/peer-id'
import { afterEach, describe, expect, it } from 'vitest'
import {
  type Announcement,
  AnnouncementExpiredError,
  createAnnouncer,
  createHost,
  decodeSignedAnnouncement,
  encodeAnnouncement,
  encodeSignedAnnouncement,
  type Host,
  InvalidSignatureError,
  MalformedMessageError,
  PeerIdMismatchError,
  signAnnouncement,
  subscribeAnnouncements,
  verifyAnnouncement
} from '../../protocol/index.js'

const NOW = 1_700_000_000_000

async function fixture() {
  const key = await generateKeyPair('Ed25519')
  const a: Announcement = {
    peerId: peerIdFromPrivateKey(key).toString(),
    modelId: 'sha256-model',
    start: 0,
    end: 4,
    throughput: 55.5,
    freeCacheTokens: 4096,
    wireDtypes: ['f32', 'q8_0'],
    version: '1.0.0',
    addrs: ['/ip4/127.0.0.1/tcp/4001'],
    issuedAtMs: NOW,
    expiresAtMs: NOW + 30_000
  }
  return { key, a }
}

describe('announcement signatures', () => {
  it('sign -> encode -> decode -> verify round-trips', async () => {
    const { key, a } = await fixture()
    const signed = decodeSignedAnnouncement(encodeSignedAnnouncement(await signAnnouncement(a, key)))
    expect(await verifyAnnouncement(signed, NOW + 1000)).toEqual(a)
  })

  it("carries the span's KV dtype", async () => {
    const { key, a } = await fixture()
    const withKv: Announcement = { ...a, kvDtype: 'q8_0' }
    const signed = decodeSignedAnnouncement(encodeSignedAnnouncement(await signAnnouncement(withKv, key)))
    expect(await verifyAnnouncement(signed, NOW + 1000)).toEqual(withKv)
  })

  it('carries what runs the span (issue 32: backend, device, its memory); a device name with control characters is malformed', async () => {
    const { key, a } = await fixture()
    const gpu: Announcement = {
      ...a,
      backend: 'ggml-cuda',
      device: 'CUDA:NVIDIA H100 80GB HBM3',
      deviceMemoryBytes: 85_000_000_000
    }
    const signed = decodeSignedAnnouncement(encodeSignedAnnouncement(await signAnnouncement(gpu, key)))
    expect(await verifyAnnouncement(signed, NOW + 1000)).toEqual(gpu)
    expect(() => encodeAnnouncement({ ...a, device: 'GPU\u001b[31m' })).toThrow(MalformedMessageError)
    expect(() => encodeAnnouncement({ ...a, backend: 'ggml cuda' })).toThrow(MalformedMessageError)
  })

  it('rejects expired, future-dated and overlong announcements', async () => {
    const { key, a } = await fixture()
    const signed = await signAnnouncement(a, key)
    await expect(verifyAnnouncement(signed, NOW + 30_000)).rejects.toThrow(AnnouncementExpiredError)
    await expect(verifyAnnouncement(signed, NOW - 60_000)).rejects.toThrow(AnnouncementExpiredError)
    const long = await signAnnouncement({ ...a, expiresAtMs: NOW + 2 * 3600_000 }, key)
    await expect(verifyAnnouncement(long, NOW)).rejects.toThrow(AnnouncementExpiredError)
    await expect(signAnnouncement({ ...a, expiresAtMs: NOW }, key)).rejects.toThrow(MalformedMessageError)
  })

  it('rejects tampering, foreign keys and false peer ids', async () => {
    const { key, a } = await fixture()
    const signed = await signAnnouncement(a, key)
    // tampered content (more throughput than measured)
    const forged = { ...signed, announcement: encodeAnnouncement({ ...a, throughput: 1e6 }) }
    await expect(verifyAnnouncement(forged, NOW)).rejects.toThrow(InvalidSignatureError)
    // a flipped signature bit
    const sig = signed.signature.slice()
    sig[0] ^= 1
    await expect(verifyAnnouncement({ ...signed, signature: sig }, NOW)).rejects.toThrow(InvalidSignatureError)
    // someone else signs a claim in our name
    const other = await generateKeyPair('Ed25519')
    await expect(verifyAnnouncement(await signAnnouncement(a, other), NOW)).rejects.toThrow(PeerIdMismatchError)
    // junk key bytes
    await expect(verifyAnnouncement({ ...signed, publicKey: Uint8Array.of(1, 2, 3) }, NOW)).rejects.toThrow(MalformedMessageError)
    expect(new InvalidSignatureError('x').code).toBe('UNAUTHORIZED')
  })
})

describe('announcements over gossipsub', () => {
  const hosts: Host[] = []
  afterEach(async () => {
    await Promise.all(hosts.splice(0).map((h) => h.stop()))
  })

  it('propagate along a line of 3 hosts (A - B - C), invalid ones are dropped', async () => {
    const keyA = await generateKeyPair('Ed25519')
    const a = await createHost({ privateKey: keyA })
    hosts.push(a)
    const b = await createHost({ bootstrap: a.getMultiaddrs().map(String) })
    hosts.push(b)
    const c = await createHost({ bootstrap: b.getMultiaddrs().map(String) })
    hosts.push(c)
    expect(c.getPeers().map(String)).not.toContain(a.peerId.toString())

    const controller = new AbortController()
    const got: Announcement[] = []
    const invalid: Error[] = []
    const arrived = new Promise<Announcement>((resolve) => {
      subscribeAnnouncements(
        c,
        (ann) => {
          got.push(ann)
          resolve(ann)
        },
        controller.signal,
        { onInvalid: (err) => invalid.push(err) }
      )
    })
    subscribeAnnouncements(b, () => {}, controller.signal) // B relays the topic

    // a forger on B's side publishes a claim in A's name, signed with its own key
    const forger = await generateKeyPair('Ed25519')
    const fake = await signAnnouncement(
      {
        peerId: a.peerId.toString(),
        modelId: 'm',
        start: 0,
        end: 2,
        throughput: 1e9,
        freeCacheTokens: 1,
        wireDtypes: ['f32'],
        version: '1',
        addrs: [],
        issuedAtMs: Date.now(),
        expiresAtMs: Date.now() + 60_000
      },
      forger
    )

    const announcer = createAnnouncer(a, {
      privateKey: keyA,
      intervalMs: 200,
      signal: controller.signal,
      content: () => ({
        modelId: 'm',
        start: 0,
        end: 2,
        throughput: 12,
        freeCacheTokens: 100,
        wireDtypes: ['f32', 'f16'],
        version: '1.0.0'
      })
    })
    const forgeTimer = setInterval(() => {
      b.services.pubsub?.publish('/layerswarm/announce/1.0.0', encodeSignedAnnouncement(fake)).catch(() => {})
    }, 200)
    try {
      const ann = await arrived
      expect(ann).toMatchObject({ peerId: a.peerId.toString(), modelId: 'm', start: 0, end: 2, throughput: 12 })
      expect(ann.addrs).toEqual(a.getMultiaddrs().map(String))
      expect(ann.expiresAtMs - ann.issuedAtMs).toBe(600)
      await new Promise((r) => setTimeout(r, 600))
      expect(got.every((g) => g.throughput === 12)).toBe(true)
      expect(invalid.some((e) => e instanceof PeerIdMismatchError)).toBe(true)
    } finally {
      clearInterval(forgeTimer)
      announcer.stop()
      controller.abort()
    }
  })
})
