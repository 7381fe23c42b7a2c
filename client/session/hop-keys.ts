import type { AbortOptions } from '@libp2p/interface'
import { peerIdFromString } from '@libp2p/peer-id'
import { multiaddr } from '@multiformats/multiaddr'
import {
  deriveHopKeys,
  generateX25519KeyPair,
  type HopKeys,
  randomKey,
  verifyX25519Binding,
  wrapKeyUnder,
  type X25519KeyPair,
  x25519SharedSecret
} from '../../crypto/index.js'
import { fetchInfo, type Host } from '../../protocol/index.js'
import { BadHopKeyError } from '../errors.js'
import type { HopTarget } from './hop.js'

/**
 * The keys of one session on one hop (client/session/hop.ts opens the session with them): the client's
 * X25519 key agreement with the hop's verified key, the keys derived from it, and the session's
 * snapshot key wrapped for that hop.
 */

/** One X25519 key pair per client host (its sessions' key agreement), and verified hop keys. */
const clientKeys = new WeakMap<Host, X25519KeyPair>()
const hopKeyCache = new WeakMap<Host, Map<string, Uint8Array>>()

/**
 * The hop's X25519 key from its info, used only once its binding verifies under the hop's
 * peer id (an Ed25519 peer id embeds its public key); BadHopKeyError otherwise.
 */
async function verifiedHopKey(host: Host, target: HopTarget, { signal }: AbortOptions = {}): Promise<Uint8Array> {
  let cache = hopKeyCache.get(host)
  if (!cache) hopKeyCache.set(host, (cache = new Map()))
  const known = cache.get(target.peerId)
  if (known) return known
  const { info } = await fetchInfo(
    host,
    target.addrs.map((a) => multiaddr(a)),
    { signal }
  )
  const pub = info.x25519PublicKey
  const binding = info.x25519Binding ?? new Uint8Array(0)
  if (pub.length !== 32 || binding.length === 0) throw new BadHopKeyError(target.peerId, 'offers no signed X25519 key')
  const identity = peerIdFromString(target.peerId).publicKey
  if (!identity) throw new BadHopKeyError(target.peerId, 'its peer id embeds no public key to check the X25519 binding with')
  const ok = await verifyX25519Binding(pub, binding, async (m, sig) => await identity.verify(m, sig))
  if (!ok) throw new BadHopKeyError(target.peerId, 'X25519 key binding does not verify under its peer id')
  cache.set(target.peerId, pub)
  return pub
}

/** What HopSession.open sends and keeps: the derived keys, both public keys, the snapshot key and its wrapped form. */
export interface HopSessionKeys {
  readonly keys: HopKeys
  /** The hop's verified X25519 public key. */
  readonly hopPub: Uint8Array
  /** This client host's X25519 public key (one per host). */
  readonly clientPublicKey: Uint8Array
  /** The session's snapshot key: only the client keeps it. */
  readonly snapshotKey: Uint8Array
  /** The snapshot key wrapped under the hop's snapshotKeyWrapKey, bound to the hop, session and span. */
  readonly wrappedSnapshotKey: Uint8Array
}

/** Agree keys with the hop (its X25519 key checked first) for one session over its span. */
export async function hopSessionKeys(
  host: Host,
  target: HopTarget,
  sessionId: string,
  options: AbortOptions = {}
): Promise<HopSessionKeys> {
  const hopPub = await verifiedHopKey(host, target, options)
  let mine = clientKeys.get(host)
  if (!mine) clientKeys.set(host, (mine = generateX25519KeyPair()))
  const span = [target.start, target.end] as const
  const sharedSecret = x25519SharedSecret(mine.secretKey, hopPub)
  const keys = deriveHopKeys({
    sharedSecret,
    sessionId,
    span,
    clientPeerId: host.peerId.toString(),
    hopPeerId: target.peerId
  })
  sharedSecret.fill(0)
  const snapshotKey = randomKey()
  const wrappedSnapshotKey = wrapKeyUnder(keys.snapshotKeyWrapKey, snapshotKey, {
    recipientPeerId: target.peerId,
    sessionId,
    span
  })
  return { keys, hopPub, clientPublicKey: mine.publicKey, snapshotKey, wrappedSnapshotKey }
}
