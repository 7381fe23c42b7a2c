/**
 * Canonical byte encodings shared by the derivations, tags and headers of crypto/: every
 * variable-length field is prefixed by its length, integers are big-endian, so two different
 * field lists never encode to the same bytes (no concatenation ambiguity).
 */
import { InvalidCryptoArgumentError } from './errors.js'

const utf8 = new TextEncoder()

/** Incremental writer of length-prefixed fields. */
export class FieldWriter {
  private readonly parts: Uint8Array[] = []
  private size = 0

  bytes(b: Uint8Array): this {
    this.u32(b.length)
    return this.raw(b)
  }

  string(s: string): this {
    return this.bytes(utf8.encode(s))
  }

  raw(b: Uint8Array): this {
    this.parts.push(b)
    this.size += b.length
    return this
  }

  u8(n: number): this {
    return this.raw(Uint8Array.of(n))
  }

  u32(n: number): this {
    const b = new Uint8Array(4)
    new DataView(b.buffer).setUint32(0, n)
    return this.raw(b)
  }

  u64(n: number): this {
    const b = new Uint8Array(8)
    new DataView(b.buffer).setBigUint64(0, BigInt(n))
    return this.raw(b)
  }

  finish(): Uint8Array {
    const out = new Uint8Array(this.size)
    let o = 0
    for (const p of this.parts) {
      out.set(p, o)
      o += p.length
    }
    return out
  }
}

export function utf8Bytes(s: string): Uint8Array {
  return utf8.encode(s)
}

export function assertBytes(name: string, value: unknown, length?: number): asserts value is Uint8Array {
  if (!(value instanceof Uint8Array)) throw new InvalidCryptoArgumentError(`${name} must be a Uint8Array`)
  if (length !== undefined && value.length !== length) {
    throw new InvalidCryptoArgumentError(`${name} must be ${length} bytes, got ${value.length}`)
  }
}

export function assertString(name: string, value: unknown, maxBytes = 1024): asserts value is string {
  if (typeof value !== 'string' || value.length === 0) throw new InvalidCryptoArgumentError(`${name} must be a non-empty string`)
  if (utf8.encode(value).length > maxBytes) throw new InvalidCryptoArgumentError(`${name} is longer than ${maxBytes} bytes`)
}

export function assertUint(name: string, value: unknown, max = Number.MAX_SAFE_INTEGER): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0 || value > max) {
    throw new InvalidCryptoArgumentError(`${name} must be an integer in [0, ${max}], got ${String(value)}`)
  }
}

/** A block span [start, end) with start < end, both u32. */
export function assertSpan(name: string, span: unknown): asserts span is readonly [number, number] {
  if (!Array.isArray(span) || span.length !== 2) throw new InvalidCryptoArgumentError(`${name} must be [start, end]`)
  assertUint(`${name}[0]`, span[0], 0xffffffff)
  assertUint(`${name}[1]`, span[1], 0xffffffff)
  if (span[0] >= span[1]) throw new InvalidCryptoArgumentError(`${name} [${span[0]}, ${span[1]}) is empty`)
}
