/**
 * Exact-size protobuf encoding for the two messages that carry sealed KV snapshots (ImportKv
 * requests, KvSnapshot responses: megabytes each). protobufjs grows its output by doubling and
 * moves each nested message to insert its length, so every snapshot byte was copied three or
 * four times into fresh buffers, which on this kind of VM (first touch of new pages) cost more
 * than sealing it. Here the size is computed first and each byte copied once. The bytes are
 * standard protobuf (layerswarm.proto field numbers), decoded by protobufjs as any message.
 */
import { InternalError } from './errors.js'
import type { ImportKv } from './types.js'

type Field = readonly [number, Uint8Array | number | boolean]

const utf8 = new TextEncoder()

function varintBytes(v: number): number {
  let n = 1
  while (v >= 128) {
    v = Math.floor(v / 128)
    n++
  }
  return n
}

function fieldBytes([no, v]: Field): number {
  const key = varintBytes(no * 8)
  if (v instanceof Uint8Array) return key + varintBytes(v.length) + v.length
  return key + varintBytes(Number(v))
}

function writeVarint(buf: Uint8Array, at: number, v: number): number {
  while (v >= 128) {
    buf[at++] = (v % 128) | 0x80
    v = Math.floor(v / 128)
  }
  buf[at++] = v
  return at
}

/** Fields in order; a Uint8Array is length-delimited (wire type 2), a number or boolean a varint. */
function write(buf: Uint8Array, at: number, fields: readonly Field[]): number {
  for (const [no, v] of fields) {
    if (v instanceof Uint8Array) {
      at = writeVarint(buf, writeVarint(buf, at, no * 8 + 2), v.length)
      buf.set(v, at)
      at += v.length
    } else at = writeVarint(buf, writeVarint(buf, at, no * 8), Number(v))
  }
  return at
}

function size(fields: readonly Field[]): number {
  let n = 0
  for (const f of fields) n += fieldBytes(f)
  return n
}

/** An outer message { 1: requestId, <bodyField>: inner } in one buffer of its exact size. */
function envelope(requestId: number, bodyField: number, inner: readonly Field[]): Uint8Array {
  const innerBytes = size(inner)
  const total = fieldBytes([1, requestId]) + varintBytes(bodyField * 8) + varintBytes(innerBytes) + innerBytes
  const buf = new Uint8Array(total)
  let at = write(buf, 0, [[1, requestId]])
  at = writeVarint(buf, writeVarint(buf, at, bodyField * 8 + 2), innerBytes)
  at = write(buf, at, inner)
  if (at !== total) throw new InternalError(`bulk codec wrote ${at} of ${total} bytes`)
  return buf
}

/** SessionRequest { request_id = 1, import_kv = 31 { 1..6 } }, validated by the caller. */
export function encodeImportKvRequest(requestId: number, im: ImportKv): Uint8Array {
  const inner: Field[] = [
    [1, utf8.encode(im.sessionId)],
    [2, im.wrappedKey],
    ...im.snapshots.map((s): Field => [3, s]),
    [4, utf8.encode(im.snapshotSessionId)],
    [5, im.prefixHash]
  ]
  if (im.append) inner.push([6, true])
  return envelope(requestId, 31, inner)
}

/** SessionResponse { request_id = 1, snapshot = 30 { session_id = 1, snapshot = 2 } }. */
export function encodeSnapshotResponse(requestId: number, s: { sessionId: string; snapshot: Uint8Array }): Uint8Array {
  return envelope(requestId, 30, [
    [1, utf8.encode(s.sessionId)],
    [2, s.snapshot]
  ])
}
