import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto'
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import type { CanaryTraces } from './canary-set.js'
import {
  CanaryArgumentError,
  CanaryBankKeyError,
  CanaryBankLockedError,
  CanaryBankMismatchError,
  CorruptCanaryBankError
} from './errors.js'

/*
 * A canary bank: canary traces (secret inputs and the reference hidden states at every block
 * boundary, canary/trace.ts) built on a machine the user trusts, for a client that holds only its
 * edge blocks (issue 16). The whole content is secret (whoever reads it can answer canaries), so
 * it is sealed with AES-256-GCM under a 32-byte key only the client holds.
 *
 * File, little-endian:
 *   magic "LSBANK01" | u32 P | public header JSON (P bytes: format, modelId) | 12-byte nonce |
 *   ciphertext | 16-byte GCM tag.                 Associated data: every byte before the nonce.
 * Plaintext: u32 H | header JSON (H bytes, space-padded to a multiple of 4) | f32 data: per
 * canary, per level in `levels` order, the states [L, dim] entering that block.
 */
const MAGIC = 'LSBANK01'
const NONCE_BYTES = 12
const TAG_BYTES = 16
/** Bytes of a canary bank key (AES-256). */
export const CANARY_BANK_KEY_BYTES = 32

interface PublicHeader {
  readonly format: 1
  readonly modelId: string
}

interface SecretHeader {
  readonly modelId: string
  readonly kernels: string
  readonly dim: number
  readonly nLayers: number
  readonly levels: number[]
  readonly canaries: { text: string; tokens: number[]; promptLength: number }[]
}

function checkKey(key: Uint8Array): void {
  if (!(key instanceof Uint8Array) || key.length !== CANARY_BANK_KEY_BYTES) {
    throw new CanaryBankKeyError(`a canary bank key is ${CANARY_BANK_KEY_BYTES} bytes`)
  }
}

/**
 * The bank key kept at `path` (hex, mode 0600 in a 0700 folder), made with the OS CSPRNG on first
 * use. Keep it beside the client's canary secret; anyone holding it and the bank can answer canaries.
 */
export function loadOrCreateBankKey(path: string): Uint8Array {
  if (typeof path !== 'string' || path.length === 0) throw new CanaryArgumentError('key path must be a non-empty string')
  if (existsSync(path)) return loadBankKey(path)
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  const key = new Uint8Array(randomBytes(CANARY_BANK_KEY_BYTES))
  writeFileSync(path, `${Buffer.from(key).toString('hex')}\n`, { mode: 0o600, flag: 'wx' })
  return key
}

/** An existing bank key file; CanaryBankKeyError when it does not hold a 32-byte hex key. */
export function loadBankKey(path: string): Uint8Array {
  let text: string
  try {
    text = readFileSync(path, 'utf8').trim()
  } catch (err) {
    throw new CanaryBankKeyError(`cannot read the canary bank key ${path}: ${(err as Error).message}`, { cause: err })
  }
  if (!/^[0-9a-f]{64}$/i.test(text)) throw new CanaryBankKeyError(`${path} does not hold a 32-byte hex key`)
  chmodSync(path, 0o600) // a key must not stay readable by others
  return new Uint8Array(Buffer.from(text, 'hex'))
}

/** Seal canary traces (every level they hold) into a bank file at `path` (mode 0600). */
export function saveCanaryBank(path: string, traces: CanaryTraces, key: Uint8Array): void {
  if (typeof path !== 'string' || path.length === 0) throw new CanaryArgumentError('path must be a non-empty string')
  checkKey(key)
  if (!traces || !Array.isArray(traces.traces) || traces.traces.length === 0) {
    throw new CanaryArgumentError('a canary bank needs at least one canary trace')
  }
  const levels: number[] = []
  for (let k = 0; k <= traces.nLayers; k++) if (traces.traces.every((t) => t.states[k] !== undefined)) levels.push(k)
  if (levels.length === 0) throw new CanaryArgumentError('the traces hold no block boundary for every canary')
  const header: SecretHeader = {
    modelId: traces.modelId,
    kernels: traces.kernels,
    dim: traces.dim,
    nLayers: traces.nLayers,
    levels,
    canaries: traces.traces.map((t) => ({ text: t.text, tokens: [...t.tokens], promptLength: t.promptLength }))
  }
  let json = Buffer.from(JSON.stringify(header), 'utf8')
  if (json.length % 4 !== 0) json = Buffer.concat([json, Buffer.alloc(4 - (json.length % 4), 0x20)])
  const floats = traces.traces.reduce((n, t) => n + t.tokens.length * traces.dim * levels.length, 0)
  const plain = Buffer.alloc(4 + json.length + floats * 4)
  plain.writeUInt32LE(json.length, 0)
  json.copy(plain, 4)
  const data = new Float32Array(plain.buffer, plain.byteOffset + 4 + json.length, floats)
  let off = 0
  for (const t of traces.traces) {
    for (const k of levels) {
      const s = t.states[k] as Float32Array
      data.set(s.subarray(0, t.tokens.length * traces.dim), off)
      off += t.tokens.length * traces.dim
    }
  }
  const aad = publicPart({ format: 1, modelId: traces.modelId })
  const nonce = randomBytes(NONCE_BYTES)
  const cipher = createCipheriv('aes-256-gcm', key, nonce)
  cipher.setAAD(aad)
  const sealed = Buffer.concat([cipher.update(plain), cipher.final()])
  plain.fill(0)
  writeFileSync(path, Buffer.concat([aad, nonce, sealed, cipher.getAuthTag()]), { mode: 0o600 })
  chmodSync(path, 0o600) // writeFileSync's mode applies only when it creates the file
}

function publicPart(h: PublicHeader): Buffer {
  const json = Buffer.from(JSON.stringify(h), 'utf8')
  const head = Buffer.alloc(12)
  head.write(MAGIC, 0, 'latin1')
  head.writeUInt32LE(json.length, 8)
  return Buffer.concat([head, json])
}

/** The model id a bank file says it was built for, read without the key. */
export function canaryBankModelId(path: string): string {
  return readPublic(readFileSync(path), path).header.modelId
}

function readPublic(buf: Buffer, path: string): { header: PublicHeader; end: number } {
  if (buf.length < 12 || buf.toString('latin1', 0, 8) !== MAGIC) throw new CorruptCanaryBankError(`${path} is not a canary bank`)
  const p = buf.readUInt32LE(8)
  if (12 + p + NONCE_BYTES + TAG_BYTES > buf.length) throw new CorruptCanaryBankError(`${path}: truncated`)
  let header: PublicHeader
  try {
    header = JSON.parse(buf.toString('utf8', 12, 12 + p))
  } catch (err) {
    throw new CorruptCanaryBankError(`${path}: bad public header`, { cause: err })
  }
  if (header?.format !== 1 || typeof header.modelId !== 'string') {
    throw new CorruptCanaryBankError(`${path}: unknown bank format ${String(header?.format)}`)
  }
  return { header, end: 12 + p }
}

/**
 * Open a bank with its key: CanaryBankLockedError when the key is not the bank's or the file was
 * altered (GCM tag), CanaryBankMismatchError when it is for another model than `modelId`.
 */
export function loadCanaryBank(path: string, key: Uint8Array, expect: { modelId?: string } = {}): CanaryTraces {
  if (typeof path !== 'string' || path.length === 0) throw new CanaryArgumentError('path must be a non-empty string')
  checkKey(key)
  const buf = readFileSync(path)
  const { header: pub, end } = readPublic(buf, path)
  if (expect.modelId !== undefined && pub.modelId !== expect.modelId) {
    throw new CanaryBankMismatchError(`${path} was built for model ${pub.modelId}, not ${expect.modelId}`)
  }
  let plain: Buffer
  try {
    const decipher = createDecipheriv('aes-256-gcm', key, buf.subarray(end, end + NONCE_BYTES))
    decipher.setAAD(buf.subarray(0, end))
    decipher.setAuthTag(buf.subarray(buf.length - TAG_BYTES))
    plain = Buffer.concat([decipher.update(buf.subarray(end + NONCE_BYTES, buf.length - TAG_BYTES)), decipher.final()])
  } catch (err) {
    throw new CanaryBankLockedError(`${path}: the key does not open this bank, or the file was altered`, { cause: err })
  }
  return parsePlain(plain, path, pub.modelId)
}

function parsePlain(plain: Buffer, path: string, modelId: string): CanaryTraces {
  const h = plain.length >= 4 ? plain.readUInt32LE(0) : -1
  let header: SecretHeader
  try {
    if (h < 0 || h % 4 !== 0 || 4 + h > plain.length) throw new CorruptCanaryBankError('header length out of range')
    header = JSON.parse(plain.toString('utf8', 4, 4 + h))
    checkHeader(header, modelId)
  } catch (err) {
    throw new CorruptCanaryBankError(`${path}: bad sealed header (${(err as Error).message})`, { cause: err })
  }
  const per = header.canaries.map((c) => c.tokens.length * header.dim)
  const floats = per.reduce((n, x) => n + x * header.levels.length, 0)
  if (plain.length !== 4 + h + floats * 4) throw new CorruptCanaryBankError(`${path}: data size does not match the header`)
  const data = new Float32Array(plain.buffer.slice(plain.byteOffset + 4 + h, plain.byteOffset + plain.length))
  plain.fill(0)
  let off = 0
  const traces = header.canaries.map((c, i) => {
    const states: (Float32Array | undefined)[] = Array.from({ length: header.nLayers + 1 }, () => undefined)
    for (const k of header.levels) states[k] = data.subarray(off, (off += per[i]))
    return { text: c.text, tokens: c.tokens, promptLength: c.promptLength, states }
  })
  return { modelId, kernels: header.kernels, dim: header.dim, nLayers: header.nLayers, traces }
}

function checkHeader(h: SecretHeader, modelId: string): void {
  const int = (x: unknown, min: number): boolean => Number.isInteger(x) && (x as number) >= min
  if (!h || h.modelId !== modelId || typeof h.kernels !== 'string') throw new CorruptCanaryBankError('model id or kernels')
  if (!int(h.dim, 1) || !int(h.nLayers, 1)) throw new CorruptCanaryBankError('bad dim or nLayers')
  if (!Array.isArray(h.levels) || h.levels.length === 0 || !h.levels.every((k) => int(k, 0) && k <= h.nLayers)) {
    throw new CorruptCanaryBankError('bad levels')
  }
  if (!Array.isArray(h.canaries) || h.canaries.length === 0) throw new CorruptCanaryBankError('no canaries')
  for (const c of h.canaries) {
    if (typeof c.text !== 'string' || !Array.isArray(c.tokens) || c.tokens.length < 2 || !c.tokens.every((t) => int(t, 0))) {
      throw new CorruptCanaryBankError('bad canary entry')
    }
    if (!int(c.promptLength, 1) || c.promptLength > c.tokens.length) throw new CorruptCanaryBankError('bad prompt length')
  }
}
