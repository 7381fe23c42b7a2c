/**
 * Private swarms (issue #38): libp2p's pre-shared-key private networks (@libp2p/pnet). Every
 * byte of a connection, before Noise, is XSalsa20-encrypted under the swarm key, so a peer
 * without the key cannot even negotiate the handshake. The key file is the format go-libp2p,
 * kubo and js-libp2p share (`/key/swarm/psk/1.0.0/`, `/base16/`, 64 hex digits).
 *
 * pnet alone does not say why a connection failed: with another key the Noise handshake reads
 * noise and fails with whatever multistream-select makes of it. So right after pnet's nonce
 * exchange both sides send a fixed 16-byte check through the encrypted stream; a side that
 * decrypts anything else knows the other holds another key (or none), and refuses with one
 * SwarmKeyMismatchError on each side. The check proves nothing cryptographically (Noise does
 * that on top); it names the failure.
 */

import type { AbortOptions, ConnectionProtector, MessageStream, MultiaddrConnection } from '@libp2p/interface'
import { preSharedKey } from '@libp2p/pnet'
import { byteStream } from '@libp2p/utils'
import { sha256 } from '@noble/hashes/sha2.js'
import { bytesToHex } from '@noble/hashes/utils.js'
import { InvalidSwarmKeyError, SwarmKeyMismatchError } from './errors.js'

const HEADER = '/key/swarm/psk/1.0.0/'
const CODEC = '/base16/'
/** Sent (encrypted) by both sides after the nonces; 16 ASCII bytes. */
const CHECK = new TextEncoder().encode('layerswarm/psk/1')
/** How long the nonce exchange and the check may take (pnet's own default is 1 s). */
export const SWARM_KEY_HANDSHAKE_MS = 5_000

/** A parsed swarm key: the file text pnet reads, and a fingerprint safe to print. */
export interface SwarmKey {
  /** The whole key file, as libp2p's pnet reads it. A secret. */
  readonly text: string
  /** First 16 hex digits of sha256 of the 32 key bytes: tells keys apart in logs without revealing them. */
  readonly fingerprint: string
}

/** Parse a v1 pre-shared key file; InvalidSwarmKeyError names what is wrong (never the key). */
export function parseSwarmKey(text: string, where = 'swarm key'): SwarmKey {
  const lines = text.split(/\r?\n/).map((l) => l.trim())
  while (lines.length > 0 && lines[lines.length - 1] === '') lines.pop()
  if (lines[0] !== HEADER)
    throw new InvalidSwarmKeyError(`${where}: the first line must be ${HEADER} (make one with \`layerswarm swarm-key new\`)`)
  if (lines[1] !== CODEC)
    throw new InvalidSwarmKeyError(`${where}: the second line must be ${CODEC} (the only encoding supported)`)
  if (lines.length !== 3 || !/^[0-9a-fA-F]{64}$/.test(lines[2] ?? ''))
    throw new InvalidSwarmKeyError(`${where}: the third line must be the key as 64 hex digits (32 bytes), and nothing after it`)
  const hex = lines[2].toLowerCase()
  const bytes = Uint8Array.from(hex.match(/../g)!.map((h) => Number.parseInt(h, 16)))
  return { text: `${HEADER}\n${CODEC}\n${hex}`, fingerprint: bytesToHex(sha256(bytes)).slice(0, 16) }
}

/** A fresh random key file text (32 bytes from the system's CSPRNG). */
export function newSwarmKeyText(): string {
  return `${HEADER}\n${CODEC}\n${bytesToHex(crypto.getRandomValues(new Uint8Array(32)))}\n`
}

export interface SwarmKeyProtectorInit {
  /** Called once per refused inbound connection (outbound refusals are thrown to the dialler). */
  onRefused?: (err: SwarmKeyMismatchError) => void
  handshakeMs?: number
}

/** libp2p's `connectionProtector` for a swarm key: pnet, then the check above. */
export function swarmKeyProtector(key: SwarmKey, init: SwarmKeyProtectorInit = {}): (components: unknown) => ConnectionProtector {
  const pnet = preSharedKey({ psk: new TextEncoder().encode(key.text), timeout: init.handshakeMs ?? SWARM_KEY_HANDSHAKE_MS })
  return () => {
    const inner = pnet()
    return {
      async protect(connection: MessageStream, options: AbortOptions = {}): Promise<MessageStream> {
        const ma = connection as MultiaddrConnection
        const inbound = ma.direction === 'inbound'
        const signal = AbortSignal.any([
          AbortSignal.timeout(init.handshakeMs ?? SWARM_KEY_HANDSHAKE_MS),
          ...(options.signal ? [options.signal] : [])
        ])
        let cause: unknown
        try {
          const boxed = await inner.protect(connection, { signal })
          const bytes = byteStream(boxed)
          const [got] = await Promise.all([bytes.read({ bytes: CHECK.length, signal }), bytes.write(CHECK, { signal })])
          const seen = got.subarray()
          // anything else than the check bytes: the other side encrypts under another key (or none)
          if (seen.length === CHECK.length && seen.every((b, i) => b === CHECK[i])) return bytes.unwrap()
        } catch (err) {
          cause = err
        }
        const who = String(ma.remoteAddr ?? 'the remote peer')
        const err = new SwarmKeyMismatchError(
          inbound
            ? `refused a connection from ${who}: it does not hold this swarm's key (key ${key.fingerprint})`
            : `${who} refused the connection: it holds another swarm key, or none (ours: ${key.fingerprint})`,
          cause === undefined ? undefined : { cause }
        )
        try {
          ma.abort?.(err)
        } catch {}
        if (inbound) init.onRefused?.(err)
        throw err
      }
    }
  }
}
