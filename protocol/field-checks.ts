/**
 * Field-level checks shared by the message codecs: every value that came from a peer
 * passes through one of these before the rest of the program sees it (docs/protocol.md).
 */
import { BadSpanError, MalformedMessageError } from './errors.js'
import { MAX_QUEUED_STEPS_FIELD } from './limits.js'
import type { DType, KvWireDType } from './types.js'

/** Wire values of `enum DType` in layerswarm.proto (keep in sync). */
export const DTYPE_VALUES: Record<DType, number> = { f32: 0, f16: 1, q8_0: 2 }
/** Every dtype this version can put on the wire, in enum order (the names used everywhere: CLI, SDK, reports). */
export const WIRE_DTYPES: readonly DType[] = ['f32', 'f16', 'q8_0']

export function dtypeFromWire(value: unknown, field: string): DType {
  const name = typeof value === 'number' ? WIRE_DTYPES[value] : undefined
  if (name === undefined) throw new MalformedMessageError(`${field}: unknown dtype ${String(value)}`)
  return name
}

/** An optional kv_dtype string field: absent or empty → undefined; anything but f32/f16/q8_0 is malformed. */
export function kvDtypeField(value: unknown, field: string): { kvDtype?: KvWireDType } {
  if (value === undefined || value === '') return {}
  if (value === 'f32' || value === 'f16' || value === 'q8_0') return { kvDtype: value }
  throw new MalformedMessageError(`${field}: unknown KV dtype ${JSON.stringify(String(value)).slice(0, 40)}`)
}

/** An optional queued_steps count (issue #18): absent or 0 → undefined (older peers); above the cap is malformed. */
export function queuedStepsField(value: unknown, field: string): { queuedSteps?: number } {
  if (value === undefined || value === 0) return {}
  return { queuedSteps: uint32Field(value, field, 0, MAX_QUEUED_STEPS_FIELD) }
}

export function dtypeToWire(dtype: DType, field: string): number {
  const value = DTYPE_VALUES[dtype]
  if (value === undefined) throw new MalformedMessageError(`${field}: unknown dtype ${String(dtype)}`)
  return value
}

/** The dtype a name means (f32, f16, q8_0: the proto enum's names in lower case); undefined for anything else. */
export function dtypeFromName(name: string): DType | undefined {
  return (WIRE_DTYPES as readonly string[]).includes(name) ? (name as DType) : undefined
}

/**
 * Capability lists (wire_dtypes) drop values this version does not know instead of
 * rejecting the whole message, so a newer peer's extra dtype does not hide it.
 */
export function dtypeListFromWire(values: unknown, field: string, max: number): DType[] {
  const list = arrayField(values, field, max)
  const out: DType[] = []
  for (const v of list) {
    const name = typeof v === 'number' ? WIRE_DTYPES[v] : undefined
    if (name !== undefined && !out.includes(name)) out.push(name)
  }
  return out
}

/** A protobufjs uint64: a Long when long.js is installed, else a number. */
interface LongLike {
  low: number
  high: number
  unsigned?: boolean
}

/** uint64 -> number, rejecting values above Number.MAX_SAFE_INTEGER (2^53 - 1). */
export function safeUint64(value: unknown, field: string): number {
  if (typeof value === 'number') {
    if (Number.isSafeInteger(value) && value >= 0) return value
  } else if (value != null && typeof value === 'object' && 'low' in value && 'high' in value) {
    const { low, high } = value as LongLike
    const hi = high >>> 0
    // 2^53 - 1 has high word 0x1fffff; anything above does not fit a double exactly.
    if (hi <= 0x1fffff) return hi * 0x1_0000_0000 + (low >>> 0)
  } else if (typeof value === 'string' && /^\d+$/.test(value)) {
    const n = Number(value)
    if (Number.isSafeInteger(n)) return n
  }
  throw new MalformedMessageError(`${field}: ${String(value)} is not an integer in [0, 2^53)`)
}

/** Checks an outgoing uint64 (we never send what we would refuse to receive). */
export function checkUint64(value: number, field: string): number {
  if (!Number.isSafeInteger(value) || value < 0) {
    throw new MalformedMessageError(`${field}: ${value} is not an integer in [0, 2^53)`)
  }
  return value
}

export function uint32Field(value: unknown, field: string, min = 0, max = 0xffffffff): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new MalformedMessageError(`${field}: ${String(value)} is not an integer in [${min}, ${max}]`)
  }
  return value
}

export function finiteField(value: unknown, field: string, min = 0): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min) {
    throw new MalformedMessageError(`${field}: ${String(value)} is not a finite number >= ${min}`)
  }
  return value
}

export interface StringRule {
  max: number
  /** Empty strings are refused unless allowed. */
  allowEmpty?: boolean
  /** Restrict to printable ASCII without spaces (ids that end up in logs and map keys). */
  token?: boolean
}

const TOKEN = /^[\x21-\x7e]*$/

export function stringField(value: unknown, field: string, rule: StringRule): string {
  if (typeof value !== 'string') throw new MalformedMessageError(`${field}: not a string`)
  if (value.length === 0 && rule.allowEmpty !== true) throw new MalformedMessageError(`${field}: empty`)
  if (value.length > rule.max) throw new MalformedMessageError(`${field}: longer than ${rule.max} characters`)
  if (rule.token === true && !TOKEN.test(value)) {
    throw new MalformedMessageError(`${field}: only printable ASCII without spaces is allowed`)
  }
  return value
}

/** A repeated field, at most `max` entries; typed lists keep their element type (generated wire types). */
export function arrayField<T>(value: readonly T[] | null | undefined, field: string, max: number): T[]
export function arrayField(value: unknown, field: string, max: number): unknown[]
export function arrayField(value: unknown, field: string, max: number): unknown[] {
  if (value == null) return []
  if (!Array.isArray(value)) throw new MalformedMessageError(`${field}: not a list`)
  if (value.length > max) throw new MalformedMessageError(`${field}: more than ${max} entries`)
  return value
}

export function bytesField(value: unknown, field: string, lengths?: number[]): Uint8Array {
  // an absent proto3 bytes field decodes to protobufjs' default, an empty array
  const bytes = value == null || (Array.isArray(value) && value.length === 0) ? new Uint8Array(0) : value
  if (!(bytes instanceof Uint8Array)) throw new MalformedMessageError(`${field}: not bytes`)
  if (lengths !== undefined && !lengths.includes(bytes.byteLength)) {
    throw new MalformedMessageError(`${field}: ${bytes.byteLength} bytes, expected ${lengths.join(' or ')}`)
  }
  // protobufjs hands out Buffers in Node; callers get plain Uint8Array views.
  return bytes.constructor === Uint8Array ? bytes : new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)
}

/** A block span [start, end) with start < end <= max. */
export function spanFields(start: unknown, end: unknown, field: string, max: number): { start: number; end: number } {
  const s = uint32Field(start, `${field}.start`)
  const e = uint32Field(end, `${field}.end`)
  if (s >= e || e > max) throw new BadSpanError(`${field}: invalid span [${s}, ${e}) (need start < end <= ${max})`)
  return { start: s, end: e }
}

/** Runs a decoder step, attaching the request id to any protocol error it throws. */
export function withRequestId<T>(requestId: number, fn: () => T): T {
  try {
    return fn()
  } catch (err) {
    if (err != null && typeof err === 'object' && 'code' in err) (err as { requestId?: number }).requestId = requestId
    throw err
  }
}

/** Backend names are short tokens (ggml-vulkan); device names are vendors' strings. */
const MAX_BACKEND_LENGTH = 32
const MAX_DEVICE_LENGTH = 256

/**
 * What runs a peer's span (issue 32), as InfoResponse and Announcement carry it: backend and
 * device absent when empty; device_memory_bytes absent when 0 (protobuf decodes an absent
 * uint64 as a zero Long). A device name is shown to people: printable ASCII with spaces only.
 */
export function hardwareFields(
  w: { backend?: unknown; device?: unknown; deviceMemoryBytes?: unknown },
  prefix: string
): { backend?: string; device?: string; deviceMemoryBytes?: number } {
  const backend = w.backend ? stringField(w.backend, `${prefix}backend`, { max: MAX_BACKEND_LENGTH, token: true }) : ''
  const device = w.device ? stringField(w.device, `${prefix}device`, { max: MAX_DEVICE_LENGTH }) : ''
  if (!/^[\x20-\x7e]*$/.test(device)) throw new MalformedMessageError(`${prefix}device: only printable ASCII is allowed`)
  const bytes = w.deviceMemoryBytes == null ? 0 : safeUint64(w.deviceMemoryBytes, `${prefix}device_memory_bytes`)
  return { ...(backend ? { backend } : {}), ...(device ? { device } : {}), ...(bytes > 0 ? { deviceMemoryBytes: bytes } : {}) }
}
