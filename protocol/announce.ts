/**
 * Signed, expiring swarm announcements (docs/protocol.md "Announcements") over gossipsub.
 *
 * The signature covers a domain tag plus the exact encoded Announcement, so a signature
 * made with a peer's libp2p key for another purpose (receipts, §5) can never pass as an
 * announcement. Gossipsub also signs its messages, but only hop-by-hop origin; our own
 * signature lets any peer re-share or store an announcement and still prove its author.
 */
import { publicKeyFromProtobuf, publicKeyToProtobuf } from '@libp2p/crypto/keys'
import { type Message, TopicValidatorResult } from '@libp2p/gossipsub'
import type { AbortOptions, PeerId, PrivateKey, PublicKey } from '@libp2p/interface'
import { peerIdFromPublicKey } from '@libp2p/peer-id'
import {
  decodeAnnouncement,
  decodeSignedAnnouncement,
  encodeAnnouncement,
  encodeSignedAnnouncement
} from './announcement-messages.js'
import {
  AnnouncementExpiredError,
  InvalidSignatureError,
  MalformedMessageError,
  PeerIdMismatchError,
  PubsubMissingError
} from './errors.js'
import type { Host } from './host.js'
import { ANNOUNCE_TOPIC } from './ids.js'
import { DEFAULT_MAX_ANNOUNCEMENT_LIFETIME_MS, DEFAULT_MAX_CLOCK_SKEW_MS, DEFAULT_PUBLISH_INTERVAL_MS } from './options.js'
import type { Announcement, SignedAnnouncement } from './types.js'

export const ANNOUNCE_SIGNATURE_DOMAIN = new TextEncoder().encode('layerswarm-announcement:v1\n')

function signedPayload(encoded: Uint8Array): Uint8Array {
  const out = new Uint8Array(ANNOUNCE_SIGNATURE_DOMAIN.byteLength + encoded.byteLength)
  out.set(ANNOUNCE_SIGNATURE_DOMAIN)
  out.set(encoded, ANNOUNCE_SIGNATURE_DOMAIN.byteLength)
  return out
}

export async function signAnnouncement(
  a: Announcement,
  privateKey: PrivateKey,
  { signal }: AbortOptions = {}
): Promise<SignedAnnouncement> {
  const announcement = encodeAnnouncement(a)
  const signature = await privateKey.sign(signedPayload(announcement), { signal })
  return { announcement, publicKey: publicKeyToProtobuf(privateKey.publicKey), signature }
}

export interface VerifyOptions {
  /** Longest accepted lifetime (expires - issued), default DEFAULT_MAX_ANNOUNCEMENT_LIFETIME_MS (2 minutes). */
  maxLifetimeMs?: number
  /** Tolerated clock difference for issued_at in the future, default 30 s. */
  maxClockSkewMs?: number
  signal?: AbortSignal
}

/**
 * Checks the signature under the embedded key, that the key derives the claimed peer id,
 * and the time window. Returns the decoded announcement; throws MalformedMessageError,
 * InvalidSignatureError, PeerIdMismatchError or AnnouncementExpiredError.
 */
export async function verifyAnnouncement(
  signed: SignedAnnouncement,
  now: number = Date.now(),
  options: VerifyOptions = {}
): Promise<Announcement> {
  const a = decodeAnnouncement(signed.announcement)
  let key: PublicKey
  try {
    key = publicKeyFromProtobuf(signed.publicKey)
  } catch (err) {
    throw new MalformedMessageError(`announcement public key: ${(err as Error).message}`, { cause: err })
  }
  let ok = false
  try {
    ok = await key.verify(signedPayload(signed.announcement), signed.signature, { signal: options.signal })
  } catch {
    ok = false
  }
  if (!ok) throw new InvalidSignatureError(`announcement from ${a.peerId}: bad signature`)
  const signer = peerIdFromPublicKey(key).toString()
  if (signer !== a.peerId) throw new PeerIdMismatchError(`announcement claims ${a.peerId} but is signed by ${signer}`)
  const maxLifetime = options.maxLifetimeMs ?? DEFAULT_MAX_ANNOUNCEMENT_LIFETIME_MS
  const skew = options.maxClockSkewMs ?? DEFAULT_MAX_CLOCK_SKEW_MS
  if (a.expiresAtMs <= now) throw new AnnouncementExpiredError(`announcement from ${a.peerId} expired at ${a.expiresAtMs}`)
  if (a.issuedAtMs > now + skew) throw new AnnouncementExpiredError(`announcement from ${a.peerId} is issued in the future`)
  if (a.expiresAtMs - a.issuedAtMs > maxLifetime) {
    throw new AnnouncementExpiredError(`announcement from ${a.peerId} lives longer than ${maxLifetime} ms`)
  }
  return a
}

/** What the announcer publishes; peer id, addresses and times are filled in. */
export type AnnouncementContent = Omit<Announcement, 'peerId' | 'addrs' | 'issuedAtMs' | 'expiresAtMs'> & { addrs?: string[] }

export interface AnnouncerInit {
  /** Current content (load changes, so it is asked for on every publish). */
  content(): AnnouncementContent | Promise<AnnouncementContent>
  /** The host's identity key (libp2p does not expose it from the node). */
  privateKey: PrivateKey
  /** Publish period, default 10 s. */
  intervalMs?: number
  /** Lifetime of each announcement, default 3 × interval (survives two lost publishes). */
  ttlMs?: number
  topic?: string
  signal?: AbortSignal
  onError?(err: Error): void
  /** Each announcement once published (gossipsub does not deliver our own to us). */
  onPublished?(a: Announcement, signed: SignedAnnouncement): void
}

export interface Announcer {
  /** Signs and publishes the current content now. */
  publish(options?: AbortOptions): Promise<SignedAnnouncement>
  stop(): void
}

export function createAnnouncer(host: Host, init: AnnouncerInit): Announcer {
  const pubsub = host.services.pubsub
  if (pubsub === undefined) throw new PubsubMissingError('createAnnouncer needs a host with pubsub')
  const interval = init.intervalMs ?? DEFAULT_PUBLISH_INTERVAL_MS
  // capped at what verifiers accept (issue #39): a longer one would be refused everywhere
  const ttl = Math.min(init.ttlMs ?? 3 * interval, DEFAULT_MAX_ANNOUNCEMENT_LIFETIME_MS)
  const topic = init.topic ?? ANNOUNCE_TOPIC
  let timer: ReturnType<typeof setInterval> | undefined

  const publish = async ({ signal }: AbortOptions = {}): Promise<SignedAnnouncement> => {
    const content = await init.content()
    const now = Date.now()
    const a: Announcement = {
      ...content,
      peerId: host.peerId.toString(),
      addrs: content.addrs ?? host.getMultiaddrs().map((m) => m.toString()),
      issuedAtMs: now,
      expiresAtMs: now + ttl
    }
    const signed = await signAnnouncement(a, init.privateKey, { signal })
    init.onPublished?.(a, signed)
    await pubsub.publish(topic, encodeSignedAnnouncement(signed))
    return signed
  }

  const tick = (): void => {
    publish({ signal: init.signal }).catch((err: Error) => init.onError?.(err))
  }
  const stop = (): void => {
    if (timer !== undefined) clearInterval(timer)
    timer = undefined
  }
  if (init.signal?.aborted !== true) {
    timer = setInterval(tick, interval)
    timer.unref?.()
    queueMicrotask(tick)
    init.signal?.addEventListener('abort', stop, { once: true })
  }
  return { publish, stop }
}

export interface SubscribeOptions extends VerifyOptions {
  topic?: string
  /** Invalid announcements (bad signature, expired, malformed) with their sender. */
  onInvalid?(err: Error, from: PeerId | undefined): void
  /**
   * Whether to take a verified announcement relayed by `via` (the propagation source); one not
   * taken is ignored, so it is neither delivered nor relayed on (issue #39: per-source limits).
   */
  admit?(a: Announcement, via: PeerId): boolean
}

/**
 * Subscribes to announcements and calls `onAnnouncement` with each verified one. Invalid
 * messages are rejected at gossipsub validation, so they are not relayed and their sender
 * is penalised by peer scoring. Unsubscribes when `signal` aborts.
 */
export function subscribeAnnouncements(
  host: Host,
  onAnnouncement: (a: Announcement, from: PeerId | undefined, signed: SignedAnnouncement, via?: PeerId) => void,
  signal?: AbortSignal,
  options: SubscribeOptions = {}
): void {
  const pubsub = host.services.pubsub
  if (pubsub === undefined) throw new PubsubMissingError('subscribeAnnouncements needs a host with pubsub')
  const topic = options.topic ?? ANNOUNCE_TOPIC
  if (signal?.aborted === true) return
  const verified = new WeakMap<Uint8Array, { a: Announcement; signed: SignedAnnouncement; via: PeerId }>()

  pubsub.topicValidators.set(topic, async (from, msg) => {
    try {
      const signed = decodeSignedAnnouncement(msg.data)
      // the per-source check first, on the decoded claim: one a source is over costs no signature check
      if (options.admit && !options.admit(decodeAnnouncement(signed.announcement), from)) return TopicValidatorResult.Ignore
      const a = await verifyAnnouncement(signed, Date.now(), options)
      verified.set(msg.data, { a, signed, via: from })
      return TopicValidatorResult.Accept
    } catch (err) {
      options.onInvalid?.(err as Error, from)
      return TopicValidatorResult.Reject
    }
  })
  const onMessage = (evt: CustomEvent<Message>): void => {
    const msg = evt.detail
    if (msg.topic !== topic) return
    const from = msg.type === 'signed' ? msg.from : undefined
    const seen = verified.get(msg.data)
    if (seen !== undefined) {
      onAnnouncement(seen.a, from, seen.signed, seen.via)
      return
    }
    // the validator saw a different buffer object: verify again rather than trust it
    let signed: SignedAnnouncement
    try {
      signed = decodeSignedAnnouncement(msg.data)
    } catch (err) {
      options.onInvalid?.(err as Error, from)
      return
    }
    verifyAnnouncement(signed, Date.now(), options).then(
      (checked) => onAnnouncement(checked, from, signed),
      (err: Error) => options.onInvalid?.(err, from)
    )
  }
  pubsub.addEventListener('message', onMessage)
  pubsub.subscribe(topic)
  signal?.addEventListener(
    'abort',
    () => {
      pubsub.removeEventListener('message', onMessage)
      pubsub.topicValidators.delete(topic)
      pubsub.unsubscribe(topic)
    },
    { once: true }
  )
}
