/**
 * Sealed KV snapshots (docs/design.md §6, issue 6): a session's KV for one span, full or the delta
 * since the last snapshot, as AES-256-GCM ciphertext whose associated data is the canonical
 * header binding model, session, span, token range, token-prefix hash, sequence and client.
 *
 * Byte layout (v1), all integers big-endian:
 *
 *   0      4  magic "LSKV"
 *   4      1  version = 1
 *   5      4  H = header length
 *   9      H  header (below)                       ┐ associated data = bytes [0, 9 + H)
 *   9+H   12  nonce (random, aead.ts)
 *   21+H   P  ciphertext of the payload (P = header.payloadBytes)
 *   end   16  GCM tag
 *
 *   header = kind u8 (0 full, 1 delta) ‖ dtype u8 (1 f32, 2 f16, 3 q8_0) ‖ span u32 u32
 *          ‖ tokenRange u32 u32 ‖ sequence u64 ‖ payloadBytes u64 ‖ prefixHash [32]
 *          ‖ modelId ‖ sessionId ‖ clientId (each u32 length ‖ UTF-8)
 *
 * openSnapshot authenticates first (tag over header and ciphertext), then checks every bound
 * field against what the importer expects; any refusal zeroes the decrypted bytes and throws.
 */
import { createHash } from 'node:crypto'
import { GCM_NONCE_BYTES, GCM_TAG_BYTES, open, type PlaintextParts, plaintextLength, randomNonce, seal } from './aead.js'
import { assertBytes, assertSpan, assertString, assertUint } from './encoding.js'
import {
  InvalidCryptoArgumentError,
  SnapshotMisboundError,
  SnapshotOrderError,
  SnapshotReplayError,
  SnapshotTamperedError,
  TagMismatchError
} from './errors.js'
import {
  encodeSnapshotHeader,
  PREAMBLE,
  parseSnapshotFrame,
  SNAPSHOT_MAGIC,
  SNAPSHOT_VERSION,
  type SnapshotDType,
  type SnapshotHeader
} from './snapshot-header.js'

export {
  encodeSnapshotHeader,
  peekSnapshotHeader,
  SNAPSHOT_MAGIC,
  SNAPSHOT_VERSION,
  type SnapshotDType,
  type SnapshotHeader,
  type SnapshotKind,
  tokenPrefixHash
} from './snapshot-header.js'

export interface OpenedSnapshot {
  readonly header: SnapshotHeader & { readonly payloadBytes: number }
  readonly payload: Uint8Array
}

export interface SnapshotExpectation {
  readonly modelId: string
  readonly sessionId: string
  readonly span: readonly [number, number]
  readonly clientId: string
  /** When given, the snapshot must cover exactly this token prefix. */
  readonly prefixHash?: Uint8Array
  /** Lowest acceptable sequence: one above the last accepted (replay protection). */
  readonly minSequence: number
  /** For deltas: the position the previous snapshot ended at (ordering). */
  readonly expectedFrom?: number
  readonly dtype?: SnapshotDType
}

/** SHA-256 over a domain tag, the token count and the tokens as u32 (binds a snapshot to its prefix). */
export function sealedSnapshotSize(header: SnapshotHeader, payloadBytes: number): number {
  return PREAMBLE + encodeSnapshotHeader(header, payloadBytes).length + GCM_NONCE_BYTES + payloadBytes + GCM_TAG_BYTES
}

export interface SealSnapshotInit {
  /** The session's snapshot key (32 bytes, chosen by the client). */
  readonly key: Uint8Array
  readonly header: SnapshotHeader
  /** The KV bytes (Shard.exportKv), or a list of parts sealed as their concatenation. */
  readonly payload: PlaintextParts
  /** Reusable output buffer of at least sealedSnapshotSize bytes (hot path: no fresh allocation). */
  readonly out?: Uint8Array
  /** For known-answer tests only: a fixed nonce. Never reuse a nonce under one key. */
  readonly nonce?: Uint8Array
}

/** Seal a KV snapshot; returns the snapshot bytes (a view of `out` when given). */
export function sealSnapshot(init: SealSnapshotInit): Uint8Array {
  const payloadBytes = plaintextLength(init.payload)
  const header = encodeSnapshotHeader(init.header, payloadBytes)
  const total = PREAMBLE + header.length + GCM_NONCE_BYTES + payloadBytes + GCM_TAG_BYTES
  let dst: Uint8Array
  if (init.out === undefined) dst = new Uint8Array(total)
  else {
    assertBytes('out', init.out)
    if (init.out.length < total)
      throw new InvalidCryptoArgumentError(`out of ${init.out.length} bytes is smaller than the ${total} needed`)
    dst = init.out.subarray(0, total)
  }
  dst.set(SNAPSHOT_MAGIC, 0)
  dst[4] = SNAPSHOT_VERSION
  new DataView(dst.buffer, dst.byteOffset, dst.byteLength).setUint32(5, header.length)
  dst.set(header, PREAMBLE)
  const aadEnd = PREAMBLE + header.length
  const nonce = init.nonce ?? randomNonce()
  assertBytes('nonce', nonce, GCM_NONCE_BYTES)
  dst.set(nonce, aadEnd)
  seal(init.key, nonce, init.payload, dst.subarray(0, aadEnd), dst.subarray(aadEnd + GCM_NONCE_BYTES))
  return dst
}

/**
 * SHA-256 of bytes [0, end) for each of the non-decreasing `ends`, in one pass over `data`
 * (the client binds each snapshot of a chunked export to the prefix it ends at).
 */
export function sha256Prefixes(data: Uint8Array, ends: readonly number[]): Uint8Array[] {
  assertBytes('data', data)
  const hash = createHash('sha256')
  const out: Uint8Array[] = []
  let at = 0
  for (const end of ends) {
    assertUint('end', end, data.length)
    if (end < at) throw new InvalidCryptoArgumentError('prefix ends must not decrease')
    hash.update(data.subarray(at, end))
    at = end
    out.push(new Uint8Array(hash.copy().digest()))
  }
  return out
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false
  let d = 0
  for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i]
  return d === 0
}

function checkBinding(h: SnapshotHeader, expect: SnapshotExpectation): void {
  const mis = (field: ConstructorParameters<typeof SnapshotMisboundError>[0], what: string) => {
    throw new SnapshotMisboundError(field, `snapshot refused: bound to another ${what}`)
  }
  if (h.modelId !== expect.modelId) mis('modelId', `model (${h.modelId})`)
  if (h.sessionId !== expect.sessionId) mis('sessionId', 'session')
  if (h.span[0] !== expect.span[0] || h.span[1] !== expect.span[1]) mis('span', `span [${h.span[0]}, ${h.span[1]})`)
  if (h.clientId !== expect.clientId) mis('clientId', 'client')
  if (expect.dtype !== undefined && h.dtype !== expect.dtype) mis('dtype', `dtype (${h.dtype})`)
  if (expect.prefixHash !== undefined && !equalBytes(h.prefixHash, expect.prefixHash)) mis('prefixHash', 'token prefix')
  if (h.sequence < expect.minSequence) {
    throw new SnapshotReplayError(`snapshot refused: sequence ${h.sequence} is older than ${expect.minSequence}`)
  }
  if (h.kind === 'delta' && expect.expectedFrom !== undefined && h.tokenRange[0] !== expect.expectedFrom) {
    throw new SnapshotOrderError(`snapshot refused: delta starts at ${h.tokenRange[0]}, expected ${expect.expectedFrom}`)
  }
}

function validateExpectation(e: SnapshotExpectation): void {
  if (e === null || typeof e !== 'object') throw new InvalidCryptoArgumentError('expect must be an object')
  assertString('expect.modelId', e.modelId, 256)
  assertString('expect.sessionId', e.sessionId, 256)
  assertString('expect.clientId', e.clientId, 256)
  assertSpan('expect.span', e.span)
  assertUint('expect.minSequence', e.minSequence)
  if (e.prefixHash !== undefined) assertBytes('expect.prefixHash', e.prefixHash, 32)
  if (e.expectedFrom !== undefined) assertUint('expect.expectedFrom', e.expectedFrom)
}

/**
 * Authenticate and open a snapshot: the GCM tag first (SnapshotTamperedError), then every bound
 * field (SnapshotMisboundError with the field, SnapshotReplayError, SnapshotOrderError). The
 * plaintext goes to `out` (at least header.payloadBytes) when given; on any refusal it is zeroed
 * and nothing is returned.
 */
export function openSnapshot(bytes: Uint8Array, key: Uint8Array, expect: SnapshotExpectation, out?: Uint8Array): OpenedSnapshot {
  validateExpectation(expect)
  const { header, aadEnd } = parseSnapshotFrame(bytes)
  const nonce = bytes.subarray(aadEnd, aadEnd + GCM_NONCE_BYTES)
  let payload: Uint8Array
  try {
    payload = open(key, nonce, bytes.subarray(aadEnd + GCM_NONCE_BYTES), bytes.subarray(0, aadEnd), out)
  } catch (e) {
    if (e instanceof TagMismatchError) throw new SnapshotTamperedError('snapshot refused: authentication tag does not verify')
    throw e
  }
  try {
    checkBinding(header, expect)
  } catch (e) {
    payload.fill(0)
    throw e
  }
  return { header, payload }
}
