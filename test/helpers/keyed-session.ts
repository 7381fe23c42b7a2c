/**
 * Raw keyed sessions against one real node, as the client SDK would open them: hop keys by
 * X25519 + HKDF (crypto/hkdf.ts), an open request that carries the client's X25519 key and,
 * optionally, a snapshot key wrapped under the hop's key-wrapping key, and f32 steps.
 * Shared by the session-key, appending-import and no-secrets e2e tests.
 */
import { deriveHopKeys, type HopKeys, wrapKeyUnder, type X25519KeyPair, x25519SharedSecret } from '../../crypto/index.js'
import { encodeTensor, type SessionRequestBody } from '../../protocol/index.js'

export interface KeyedPeers {
  /** The node: its peer id, model id and announced X25519 key (read when called, so beforeAll may fill them). */
  readonly node: () => { readonly peerId: string; readonly modelId: string; readonly x25519PublicKey: Uint8Array }
  /** The client's libp2p peer id and its X25519 key pair. */
  readonly clientPeerId: () => string
  readonly me: X25519KeyPair
  readonly span: readonly [number, number]
  readonly dim: number
}

export interface OpenOptions {
  readonly upstream?: string
  /** false: open without the client's X25519 key (no hop keys on the node). */
  readonly keyed?: boolean
  readonly snapshotKey?: Uint8Array
  readonly maxLength?: number
}

export interface KeyedSessions {
  keysFor(sessionId: string): HopKeys
  open(sessionId: string, o?: OpenOptions): SessionRequestBody
  step(
    sessionId: string,
    stepId: number,
    startPosition: number,
    x: Float32Array,
    chain?: boolean,
    hopAuth?: Uint8Array[]
  ): SessionRequestBody
}

export function keyedSessions(p: KeyedPeers): KeyedSessions {
  const keysFor = (sessionId: string): HopKeys =>
    deriveHopKeys({
      sharedSecret: x25519SharedSecret(p.me.secretKey, p.node().x25519PublicKey),
      sessionId,
      span: p.span,
      clientPeerId: p.clientPeerId(),
      hopPeerId: p.node().peerId
    })
  return {
    keysFor,
    open: (sessionId, o = {}) => ({
      type: 'open',
      open: {
        sessionId,
        modelId: p.node().modelId,
        start: p.span[0],
        end: p.span[1],
        maxLength: o.maxLength ?? 16,
        wireDtype: 'f32',
        nextHops: [],
        ...(o.upstream ? { upstreamPeerId: o.upstream } : {}),
        ...(o.keyed === false ? {} : { clientX25519PublicKey: p.me.publicKey }),
        ...(o.snapshotKey
          ? {
              wrappedSnapshotKey: wrapKeyUnder(keysFor(sessionId).snapshotKeyWrapKey, o.snapshotKey, {
                recipientPeerId: p.node().peerId,
                sessionId,
                span: p.span
              })
            }
          : {})
      }
    }),
    step: (sessionId, stepId, startPosition, x, chain = false, hopAuth) => ({
      type: 'step',
      step: {
        sessionId,
        stepId,
        startPosition,
        hidden: encodeTensor(x, [x.length / p.dim, p.dim], 'f32'),
        chain,
        ...(hopAuth ? { hopAuth } : {})
      }
    })
  }
}
