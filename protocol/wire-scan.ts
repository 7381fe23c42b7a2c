/**
 * A pass over a protobuf frame that allocates nothing and runs BEFORE protobufjs builds any
 * object from it (issue #17: an empty repeated entry costs 2 bytes on the wire and ~90 bytes
 * decoded, so a decoder that counts lists after building them can be made to allocate 40× the
 * frame). It walks tags and lengths against the schema and refuses, with a typed error:
 * - a repeated field with more entries than REPEATED_LIMITS allows (packed ones counted too),
 * - a known field sent with another wire type than the schema's, groups and invalid wire types,
 * - varints over 10 bytes, lengths past the end of their message, nesting deeper than the schema.
 * It also reports which oneof member a message sets and where, so callers can apply a size cap
 * per message type before decoding (protobuf encoding: https://protobuf.dev/programming-guides/encoding/).
 * The schema it walks is the table generated from layerswarm.proto (generated/layerswarm-scan.ts).
 */
import { MalformedMessageError } from './errors.js'
import { WIRE_SCAN_MESSAGES } from './generated/layerswarm-scan.js'
import {
  MAX_ADDRS,
  MAX_AWAITED_STEPS,
  MAX_HELD_ANNOUNCEMENTS,
  MAX_HOP_AUTH,
  MAX_IMPORT_SNAPSHOTS,
  MAX_NEXT_HOPS,
  MAX_TENSOR_RANK,
  MAX_TIMINGS,
  MAX_WEIGHTS_PIECES,
  MAX_WIRE_DTYPES
} from './limits.js'
import type { WireScanField, WireScanMessage } from './wire-scan-types.js'

/** Entries each repeated field of layerswarm.proto may carry, by `Message.field` (proto names). */
export const REPEATED_LIMITS: Readonly<Record<string, number>> = {
  'Tensor.shape': MAX_TENSOR_RANK,
  'InfoResponse.wire_dtypes': MAX_WIRE_DTYPES,
  'NextHop.addrs': MAX_ADDRS,
  'OpenSession.next_hops': MAX_NEXT_HOPS,
  'Step.hop_auth': MAX_HOP_AUTH,
  'Step.timings': MAX_TIMINGS,
  'Step.receipts': MAX_TIMINGS,
  'ImportKv.snapshots': MAX_IMPORT_SNAPSHOTS,
  'StepResult.timings': MAX_TIMINGS,
  'StepResult.receipts': MAX_TIMINGS,
  'AwaitResults.step_ids': MAX_AWAITED_STEPS,
  'StepResults.results': MAX_AWAITED_STEPS,
  'Announcement.wire_dtypes': MAX_WIRE_DTYPES,
  'Announcement.addrs': MAX_ADDRS,
  'AnnouncementsResponse.announcements': MAX_HELD_ANNOUNCEMENTS,
  'WeightsManifest.pieces': MAX_WEIGHTS_PIECES,
  // kvmove (issue #41): chunks of one push (MAX_KV_PUSH_CHUNKS), snapshots of one transfer frame
  'KvPush.chunk_ends': 1024,
  'KvPush.chunk_prefix_hashes': 1024,
  'KvTransfer.snapshots': MAX_IMPORT_SNAPSHOTS
}

/** The schema nests 4 deep (SessionRequest > Step > Receipt); anything deeper is hostile. */
const MAX_DEPTH = 8

/** Where a message's oneof member sits in the frame (the bytes of the member's message). */
export interface OneofMember {
  readonly name: string
  readonly start: number
  readonly end: number
}

const VARINT = 0
const FIXED64 = 1
const LENGTH_DELIMITED = 2
const FIXED32 = 5

class Cursor {
  constructor(
    readonly bytes: Uint8Array,
    public pos: number,
    readonly end: number
  ) {}

  /** A varint's value (exact up to 2^53; larger values only need skipping or comparing). */
  varint(what: string): number {
    let value = 0
    let scale = 1
    for (let i = 0; i < 10; i++) {
      if (this.pos >= this.end) throw new MalformedMessageError(`${what}: truncated varint`)
      const b = this.bytes[this.pos++]
      value += (b & 0x7f) * scale
      if ((b & 0x80) === 0) return value
      scale *= 128
    }
    throw new MalformedMessageError(`${what}: varint longer than 10 bytes`)
  }

  skip(n: number, what: string): void {
    if (n > this.end - this.pos) throw new MalformedMessageError(`${what}: ${n} bytes announced, ${this.end - this.pos} left`)
    this.pos += n
  }
}

/** Entries in a packed run of `wireType` values between pos and end. */
function packedCount(c: Cursor, end: number, wireType: number, what: string): number {
  if (wireType === FIXED64 || wireType === FIXED32) {
    const size = wireType === FIXED64 ? 8 : 4
    if ((end - c.pos) % size !== 0) throw new MalformedMessageError(`${what}: packed run not a multiple of ${size} bytes`)
    const n = (end - c.pos) / size
    c.pos = end
    return n
  }
  const inner = new Cursor(c.bytes, c.pos, end)
  let n = 0
  while (inner.pos < end) {
    inner.varint(what)
    n++
  }
  c.pos = end
  return n
}

/**
 * Checks `bytes[start, end)` as a `type` message; returns the oneof member it sets last (the
 * one protobufjs keeps), if any. Throws MalformedMessageError.
 */
export function scanMessage(
  type: WireScanMessage,
  bytes: Uint8Array,
  start = 0,
  end = bytes.byteLength,
  depth = 0
): OneofMember | undefined {
  if (depth > MAX_DEPTH) throw new MalformedMessageError(`${type.name}: nested deeper than ${MAX_DEPTH}`)
  const c = new Cursor(bytes, start, end)
  let counts: Map<number, number> | undefined
  let member: OneofMember | undefined
  while (c.pos < end) {
    const key = c.varint(type.name)
    const id = Math.floor(key / 8)
    const wireType = key % 8
    if (id === 0) throw new MalformedMessageError(`${type.name}: field number 0`)
    const field = type.fieldsById[id] as WireScanField | undefined
    const what = field ? field.what : `${type.name} field ${id}`
    if (field === undefined) {
      skipUnknown(c, wireType, what)
      continue
    }
    const expected = field.wireType
    const packed = field.repeated && wireType === LENGTH_DELIMITED && expected !== LENGTH_DELIMITED
    if (wireType !== expected && !packed) {
      throw new MalformedMessageError(`${what}: wire type ${wireType}, the schema says ${expected}`)
    }
    let entries = 1
    if (wireType === VARINT) c.varint(what)
    else if (wireType === FIXED64) c.skip(8, what)
    else if (wireType === FIXED32) c.skip(4, what)
    else {
      const length = c.varint(what)
      const bodyStart = c.pos
      c.skip(length, what)
      if (packed) {
        c.pos = bodyStart
        entries = packedCount(c, bodyStart + length, expected, what)
      } else if (field.message !== undefined) {
        scanMessage(WIRE_SCAN_MESSAGES[field.message], bytes, bodyStart, bodyStart + length, depth + 1)
        if (field.oneof !== undefined) member = { name: field.name, start: bodyStart, end: bodyStart + length }
      }
    }
    if (field.repeated) {
      counts ??= new Map()
      const n = (counts.get(id) ?? 0) + entries
      const max = maxEntries(field)
      if (n > max) throw new MalformedMessageError(`${what}: more than ${max} entries`)
      counts.set(id, n)
    }
  }
  return member
}

function skipUnknown(c: Cursor, wireType: number, what: string): void {
  if (wireType === VARINT) c.varint(what)
  else if (wireType === FIXED64) c.skip(8, what)
  else if (wireType === FIXED32) c.skip(4, what)
  else if (wireType === LENGTH_DELIMITED) c.skip(c.varint(what), what)
  else throw new MalformedMessageError(`${what}: wire type ${wireType} (groups and types 6-7 are not accepted)`)
}

/**
 * Per field, once: a scan visits a field once per entry, and work per entry made a flood of empty
 * entries cost the node more CPU than the bytes it took to send (issue #17 fuzz). The generated
 * table carries each field's `Type.field_name` already; its cap is looked up once here.
 */
const MAX_ENTRIES = new WeakMap<WireScanField, number>()

function maxEntries(field: WireScanField): number {
  let max = MAX_ENTRIES.get(field)
  if (max === undefined) {
    max = REPEATED_LIMITS[field.what] ?? MAX_TIMINGS
    MAX_ENTRIES.set(field, max)
  }
  return max
}

/**
 * The oneof member a message sets last, found by walking its top-level fields only (no
 * recursion, no list counting): what a per-body size cap needs before the full scan.
 */
export function topLevelMember(type: WireScanMessage, bytes: Uint8Array): OneofMember | undefined {
  const c = new Cursor(bytes, 0, bytes.byteLength)
  let member: OneofMember | undefined
  while (c.pos < c.end) {
    const key = c.varint(type.name)
    const field = type.fieldsById[Math.floor(key / 8)] as WireScanField | undefined
    if (key % 8 === LENGTH_DELIMITED && field?.oneof !== undefined) {
      const length = c.varint(type.name)
      member = { name: field.name, start: c.pos, end: c.pos + length }
      c.skip(length, type.name)
    } else skipUnknown(c, key % 8, type.name)
  }
  return member
}

/** The first varint field `id` at the top level of bytes (a request id), or undefined. */
export function peekVarintField(bytes: Uint8Array, id: number): number | undefined {
  const c = new Cursor(bytes, 0, bytes.byteLength)
  try {
    while (c.pos < c.end) {
      const key = c.varint('peek')
      if (Math.floor(key / 8) === id && key % 8 === VARINT) return c.varint('peek')
      skipUnknown(c, key % 8, 'peek')
    }
  } catch {}
  return undefined
}

/**
 * The first string field `id` of the message in bytes[start, end), or undefined; read without
 * decoding the rest (a session id, to pick a request's size cap). Longer than `max` bytes: undefined.
 */
export function peekStringField(bytes: Uint8Array, start: number, end: number, id: number, max: number): string | undefined {
  const c = new Cursor(bytes, start, end)
  while (c.pos < end) {
    const key = c.varint('peek')
    const wireType = key % 8
    if (Math.floor(key / 8) === id && wireType === LENGTH_DELIMITED) {
      const length = c.varint('peek')
      if (length > max || length > end - c.pos) return undefined
      return new TextDecoder().decode(bytes.subarray(c.pos, c.pos + length))
    }
    skipUnknown(c, wireType, 'peek')
  }
  return undefined
}
