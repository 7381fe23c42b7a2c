import { createHash } from 'node:crypto'
import { chmodSync, readFileSync, writeFileSync } from 'node:fs'
import { errorCode } from '../shards/index.js'
import { type BuildCanarySetOptions, buildCanarySet, type Canary, type CanarySet } from './canary-set.js'
import { CanaryArgumentError, CanarySetMismatchError, CanarySetVersionError, CorruptCanarySetError } from './errors.js'

/*
 * Canary set file, little-endian:
 *   magic "LSCANRY2" (8 bytes; the digit is the format version) | u32 header length H | header JSON (UTF-8, H bytes, padded with
 *   spaces to a multiple of 4) | f32 data | SHA-256 of everything before it (32 bytes).
 * The data holds, per canary in order, inputs [L, dim] then outputs [L, dim] for each end.
 * The file is secret to the client (whoever holds it can answer canaries), so it is written 0600.
 */
const MAGIC_PREFIX = 'LSCANRY'
/** Format 2: canaries run to DEFAULT_CANARY_LENGTH positions (stop tokens masked), not ~40. */
export const CANARY_FILE_VERSION = 2
const MAGIC = `${MAGIC_PREFIX}${CANARY_FILE_VERSION}`
const DIGEST = 32

interface Header {
  readonly modelId: string
  readonly boundary: number
  readonly ends: number[]
  readonly dim: number
  readonly kernels: string
  readonly canaries: { text: string; tokens: number[]; promptLength: number }[]
}

export function saveCanarySet(path: string, set: CanarySet): void {
  if (typeof path !== 'string' || path.length === 0) throw new CanaryArgumentError('path must be a non-empty string')
  if (!set || !Array.isArray(set.canaries)) throw new CanaryArgumentError('saveCanarySet needs a canary set')
  const header: Header = {
    modelId: set.modelId,
    boundary: set.boundary,
    ends: [...set.ends],
    dim: set.dim,
    kernels: set.kernels,
    canaries: set.canaries.map((c) => ({ text: c.text, tokens: [...c.tokens], promptLength: c.promptLength }))
  }
  let json = Buffer.from(JSON.stringify(header), 'utf8')
  if (json.length % 4 !== 0) json = Buffer.concat([json, Buffer.alloc(4 - (json.length % 4), 0x20)])
  const floats = set.canaries.reduce((n, c) => n + c.inputs.length * (1 + set.ends.length), 0)
  const body = Buffer.alloc(12 + json.length + floats * 4)
  body.write(MAGIC, 0, 'latin1')
  body.writeUInt32LE(json.length, 8)
  json.copy(body, 12)
  const data = new Float32Array(body.buffer, body.byteOffset + 12 + json.length, floats)
  let off = 0
  for (const c of set.canaries) {
    for (const a of [c.inputs, ...c.outputs]) {
      data.set(a, off)
      off += a.length
    }
  }
  const digest = createHash('sha256').update(body).digest()
  writeFileSync(path, Buffer.concat([body, digest]), { mode: 0o600 })
  chmodSync(path, 0o600) // writeFileSync's mode applies only when it creates the file
}

export interface LoadCanarySetExpect {
  /** The model id the set must have been built for (computeModelId of the open model). */
  readonly modelId?: string
  /** The span boundary the set must be for. */
  readonly boundary?: number
}

/** Read a canary set file; CorruptCanarySetError when it is damaged, CanarySetMismatchError when it is for another model or boundary. */
export function loadCanarySet(path: string, expect: LoadCanarySetExpect = {}): CanarySet {
  if (typeof path !== 'string' || path.length === 0) throw new CanaryArgumentError('path must be a non-empty string')
  const buf = readFileSync(path)
  const magic = buf.toString('latin1', 0, 8)
  if (buf.length >= 8 && magic.startsWith(MAGIC_PREFIX) && magic !== MAGIC) {
    // Format 1 held canaries of ~40 positions: decoys that short leave late positions unchecked.
    throw new CanarySetVersionError(
      `${path} is a canary set file of format ${magic.slice(MAGIC_PREFIX.length)}, this layerswarm reads format ${CANARY_FILE_VERSION}: rebuild it (buildCanarySet, or loadOrBuildCanarySet does it)`
    )
  }
  if (buf.length < 12 + DIGEST || magic !== MAGIC) {
    throw new CorruptCanarySetError(`${path} is not a canary set file`)
  }
  const body = buf.subarray(0, buf.length - DIGEST)
  if (
    !createHash('sha256')
      .update(body)
      .digest()
      .equals(buf.subarray(buf.length - DIGEST))
  ) {
    throw new CorruptCanarySetError(`${path}: checksum mismatch (truncated or altered)`)
  }
  const h = body.readUInt32LE(8)
  let header: Header
  try {
    if (h % 4 !== 0 || 12 + h > body.length) throw new CorruptCanarySetError('header length out of range')
    header = JSON.parse(body.toString('utf8', 12, 12 + h))
    checkHeader(header)
  } catch (e) {
    throw new CorruptCanarySetError(`${path}: bad header (${e instanceof Error ? e.message : String(e)})`, { cause: e })
  }
  if (expect.modelId !== undefined && expect.modelId !== header.modelId) {
    throw new CanarySetMismatchError(`${path} was built for model ${header.modelId}, not ${expect.modelId}`)
  }
  if (expect.boundary !== undefined && expect.boundary !== header.boundary) {
    throw new CanarySetMismatchError(`${path} is for boundary ${header.boundary}, not ${expect.boundary}`)
  }
  const per = header.canaries.map((c) => c.tokens.length * header.dim)
  const floats = per.reduce((n, x) => n + x * (1 + header.ends.length), 0)
  if (body.length !== 12 + h + floats * 4) throw new CorruptCanarySetError(`${path}: data size does not match the header`)
  const data = new Float32Array(body.buffer.slice(body.byteOffset + 12 + h, body.byteOffset + body.length))
  let off = 0
  const take = (n: number): Float32Array => data.subarray(off, (off += n))
  const canaries = header.canaries.map((c, i): Canary => {
    const inputs = take(per[i])
    const outputs = header.ends.map(() => take(per[i]))
    return { text: c.text, tokens: c.tokens, promptLength: c.promptLength, inputs, outputs }
  })
  return {
    modelId: header.modelId,
    boundary: header.boundary,
    ends: header.ends,
    dim: header.dim,
    kernels: header.kernels,
    canaries
  }
}

function checkHeader(h: Header): void {
  const int = (x: unknown, min: number): boolean => Number.isInteger(x) && (x as number) >= min
  if (!h || typeof h.modelId !== 'string' || typeof h.kernels !== 'string')
    throw new CorruptCanarySetError('missing model id or kernels')
  if (!int(h.boundary, 0) || !int(h.dim, 1)) throw new CorruptCanarySetError('bad boundary or dim')
  if (!Array.isArray(h.ends) || h.ends.length === 0 || !h.ends.every((e) => int(e, h.boundary + 1)))
    throw new CorruptCanarySetError('bad ends')
  if (!Array.isArray(h.canaries)) throw new CorruptCanarySetError('no canaries')
  for (const c of h.canaries) {
    if (typeof c.text !== 'string' || !Array.isArray(c.tokens) || c.tokens.length === 0 || !c.tokens.every((t) => int(t, 0))) {
      throw new CorruptCanarySetError('bad canary entry')
    }
    if (!int(c.promptLength, 1) || c.promptLength > c.tokens.length) throw new CorruptCanarySetError('bad prompt length')
  }
}

/**
 * The canary set saved at `path`; when there is none, or it is of an older format, a set built
 * anew from `build` and saved there. A file for another model or boundary
 * (CanarySetMismatchError) or a damaged one (CorruptCanarySetError) is not silently replaced.
 */
export function loadOrBuildCanarySet(path: string, build: BuildCanarySetOptions & { readonly modelId: string }): CanarySet {
  try {
    return loadCanarySet(path, { modelId: build.modelId, boundary: build.boundary })
  } catch (err) {
    const missing = errorCode(err) === 'ENOENT'
    if (!missing && !(err instanceof CanarySetVersionError)) throw err
  }
  const set = buildCanarySet(build)
  saveCanarySet(path, set)
  return set
}
