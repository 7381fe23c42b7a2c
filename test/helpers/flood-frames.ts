/**
 * The amplification frames of issue #17, built byte by byte (protobuf encoding:
 * https://protobuf.dev/programming-guides/encoding/): repeated fields whose empty entries cost
 * 2-3 bytes on the wire and tens of bytes each once a decoder builds them.
 */
import { varint } from './raw-session.js'

const concat = (parts: Uint8Array[]): Uint8Array => {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0))
  let at = 0
  for (const p of parts) {
    out.set(p, at)
    at += p.byteLength
  }
  return out
}

/** A length-delimited field (wire type 2). */
export const lenField = (no: number, payload: Uint8Array): Uint8Array =>
  concat([varint(no * 8 + 2), varint(payload.byteLength), payload])

export const varintField = (no: number, value: number): Uint8Array => concat([varint(no * 8), varint(value)])

const text = (s: string): Uint8Array => new TextEncoder().encode(s)

/** `count` empty entries of repeated message/bytes field `no`, as one run of bytes. */
export function emptyEntries(no: number, count: number): Uint8Array {
  const one = lenField(no, new Uint8Array(0))
  const out = new Uint8Array(one.byteLength * count)
  for (let i = 0; i < count; i++) out.set(one, i * one.byteLength)
  return out
}

/** SessionRequest{request_id, open{session_id, next_hops: count × NextHop{}}}: the frame that killed a node. */
export function openNextHopsFlood(requestId: number, count: number): Uint8Array {
  return concat([varintField(1, requestId), lenField(2, concat([lenField(1, text('flood')), emptyEntries(7, count)]))])
}

/** SessionRequest{request_id, step{session_id, step_id, timings: count × HopTiming{}}}. */
export function stepTimingsFlood(requestId: number, sessionId: string, count: number): Uint8Array {
  const step = concat([lenField(1, text(sessionId)), varintField(2, 1), emptyEntries(22, count)])
  return concat([varintField(1, requestId), lenField(3, step)])
}

/** SessionRequest{request_id, import_kv{session_id, snapshots: count × empty}}. */
export function importSnapshotsFlood(requestId: number, sessionId: string, count: number): Uint8Array {
  return concat([varintField(1, requestId), lenField(31, concat([lenField(1, text(sessionId)), emptyEntries(3, count)]))])
}

/** SessionResponse{request_id, result{session_id, step_id, timings: count × HopTiming{}}}: a hostile hop's reply. */
export function resultTimingsFlood(requestId: number, sessionId: string, count: number): Uint8Array {
  const result = concat([lenField(1, text(sessionId)), varintField(2, 1), emptyEntries(4, count)])
  return concat([varintField(1, requestId), lenField(3, result)])
}

/** InfoResponse with `count` packed wire_dtypes (1 byte each on the wire). */
export function infoDtypesFlood(count: number): Uint8Array {
  return concat([
    lenField(1, text('m')),
    varintField(3, 4),
    varintField(4, 8),
    varintField(6, 1),
    lenField(11, new Uint8Array(count))
  ])
}
