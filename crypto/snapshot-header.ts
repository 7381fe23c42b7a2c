/**
 * The framing and canonical header of sealed KV snapshots (layout in snapshot.ts). The header
 * bytes are the GCM associated data, so their encoding must be canonical: fixed order,
 * fixed-width big-endian integers, length-prefixed strings, and a parser that accepts exactly
 * one encoding (no trailing bytes, total length equal to what the header declares).
 */
import { createHash } from 'node:crypto'
import { GCM_NONCE_BYTES, GCM_TAG_BYTES } from './aead.js'
import { assertBytes, assertSpan, assertString, assertUint, FieldWriter } from './encoding.js'
import { InvalidCryptoArgumentError, SnapshotTamperedError, SnapshotVersionError } from './errors.js'

export const SNAPSHOT_MAGIC = Uint8Array.of(0x4c, 0x53, 0x4b, 0x56) // "LSKV"
export const SNAPSHOT_VERSION = 1
export const PREAMBLE = 9
const MAX_HEADER = 4096
const KINDS = ['full', 'delta'] as const
const DTYPES = { f32: 1, f16: 2, q8_0: 3 } as const

export type SnapshotKind = (typeof KINDS)[number]
export type SnapshotDType = keyof typeof DTYPES

export interface SnapshotHeader {
  readonly modelId: string
  readonly sessionId: string
  /** Blocks [start, end) whose KV the payload holds. */
  readonly span: readonly [number, number]
  /** Token positions [from, to) the payload holds; a full snapshot starts at 0. */
  readonly tokenRange: readonly [number, number]
  /** SHA-256 of the token prefix [0, to) (tokenPrefixHash), 32 bytes. */
  readonly prefixHash: Uint8Array
  /** Increases with every snapshot of the session and span (replay protection). */
  readonly sequence: number
  /** The session's client (libp2p peer id string). */
  readonly clientId: string
  readonly kind: SnapshotKind
  readonly dtype: SnapshotDType
}

export function tokenPrefixHash(tokens: ArrayLike<number>): Uint8Array {
  const w = new FieldWriter().string('layerswarm/token-prefix/v1').u32(tokens.length)
  const body = new Uint8Array(tokens.length * 4)
  const dv = new DataView(body.buffer)
  for (let i = 0; i < tokens.length; i++) {
    assertUint('token', tokens[i], 0xffffffff)
    dv.setUint32(i * 4, tokens[i])
  }
  return new Uint8Array(createHash('sha256').update(w.finish()).update(body).digest())
}

function validateHeader(h: SnapshotHeader): void {
  if (h === null || typeof h !== 'object') throw new InvalidCryptoArgumentError('header must be an object')
  assertString('modelId', h.modelId, 256)
  assertString('sessionId', h.sessionId, 256)
  assertString('clientId', h.clientId, 256)
  assertSpan('span', h.span)
  if (!Array.isArray(h.tokenRange) || h.tokenRange.length !== 2)
    throw new InvalidCryptoArgumentError('tokenRange must be [from, to]')
  assertUint('tokenRange[0]', h.tokenRange[0], 0xffffffff)
  assertUint('tokenRange[1]', h.tokenRange[1], 0xffffffff)
  if (h.tokenRange[0] > h.tokenRange[1]) throw new InvalidCryptoArgumentError('tokenRange [from, to) has from > to')
  assertBytes('prefixHash', h.prefixHash, 32)
  assertUint('sequence', h.sequence)
  if (!KINDS.includes(h.kind)) throw new InvalidCryptoArgumentError(`kind must be full or delta, got ${String(h.kind)}`)
  if (h.kind === 'full' && h.tokenRange[0] !== 0) throw new InvalidCryptoArgumentError('a full snapshot starts at position 0')
  if (!Object.hasOwn(DTYPES, h.dtype))
    throw new InvalidCryptoArgumentError(`dtype must be f32, f16 or q8_0, got ${String(h.dtype)}`)
}

/** The canonical header bytes (the part of the associated data after the preamble). */
export function encodeSnapshotHeader(h: SnapshotHeader, payloadBytes: number): Uint8Array {
  validateHeader(h)
  assertUint('payloadBytes', payloadBytes)
  return new FieldWriter()
    .u8(KINDS.indexOf(h.kind))
    .u8(DTYPES[h.dtype])
    .u32(h.span[0])
    .u32(h.span[1])
    .u32(h.tokenRange[0])
    .u32(h.tokenRange[1])
    .u64(h.sequence)
    .u64(payloadBytes)
    .raw(h.prefixHash)
    .string(h.modelId)
    .string(h.sessionId)
    .string(h.clientId)
    .finish()
}

/** Bytes sealSnapshot writes for this header and payload length (size the `out` buffer with it). */
export interface ParsedSnapshot {
  readonly header: SnapshotHeader & { readonly payloadBytes: number }
  readonly aadEnd: number
}

const utf8 = new TextDecoder('utf-8', { fatal: true })

/**
 * Parse the framing and header WITHOUT authenticating them (e.g. to find which session's key
 * to open a snapshot with). Nothing read here may be trusted before openSnapshot succeeds.
 */
export function peekSnapshotHeader(bytes: Uint8Array): SnapshotHeader & { readonly payloadBytes: number } {
  return parseSnapshotFrame(bytes).header
}

export function parseSnapshotFrame(bytes: Uint8Array): ParsedSnapshot {
  assertBytes('snapshot', bytes)
  const bad = (why: string): never => {
    throw new SnapshotTamperedError(`snapshot refused: ${why}`)
  }
  if (bytes.length < PREAMBLE + GCM_NONCE_BYTES + GCM_TAG_BYTES) bad(`truncated (${bytes.length} bytes)`)
  for (let i = 0; i < 4; i++) if (bytes[i] !== SNAPSHOT_MAGIC[i]) bad('not a layerswarm snapshot (bad magic)')
  if (bytes[4] !== SNAPSHOT_VERSION) throw new SnapshotVersionError(`snapshot refused: unknown version ${bytes[4]}`)
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const hLen = dv.getUint32(5)
  if (hLen > MAX_HEADER || PREAMBLE + hLen + GCM_NONCE_BYTES + GCM_TAG_BYTES > bytes.length) bad('truncated or bad header length')
  const end = PREAMBLE + hLen
  let o = PREAMBLE
  const need = (n: number) => {
    if (o + n > end) bad('malformed header')
  }
  const u8 = () => {
    need(1)
    return bytes[o++]
  }
  const u32 = () => {
    need(4)
    o += 4
    return dv.getUint32(o - 4)
  }
  const u64 = () => {
    need(8)
    const v = dv.getBigUint64(o)
    o += 8
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) bad('malformed header')
    return Number(v)
  }
  const str = () => {
    const n = u32()
    need(n)
    o += n
    try {
      return utf8.decode(bytes.subarray(o - n, o))
    } catch {
      return bad('malformed header')
    }
  }
  const kind = KINDS[u8()] ?? bad('malformed header (kind)')
  const dtypeCode = u8()
  const dtype = (Object.keys(DTYPES) as SnapshotDType[]).find((d) => DTYPES[d] === dtypeCode) ?? bad('malformed header (dtype)')
  const span: [number, number] = [u32(), u32()]
  const tokenRange: [number, number] = [u32(), u32()]
  const sequence = u64()
  const payloadBytes = u64()
  need(32)
  const prefixHash = bytes.slice(o, o + 32)
  o += 32
  const modelId = str()
  const sessionId = str()
  const clientId = str()
  if (o !== end) bad('malformed header (trailing bytes)')
  if (end + GCM_NONCE_BYTES + payloadBytes + GCM_TAG_BYTES !== bytes.length)
    bad('truncated or extended (length does not match header)')
  return {
    header: { modelId, sessionId, span, tokenRange, prefixHash, sequence, clientId, kind, dtype, payloadBytes },
    aadEnd: end
  }
}
