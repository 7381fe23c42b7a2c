import { randomBytes } from 'node:crypto'
import { closeSync, constants, fstatSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Detector, DetectorRecord, DriftModel } from '../../canary/index.js'
import { serializeDriftModel } from '../../canary/index.js'
import { sha256 } from '../../protocol/index.js'
import { errorCode } from '../../shards/index.js'
import { InvalidTrustFileError, TrustFileExposedError } from '../errors.js'

interface TrustFileV1 {
  version: 1
  /** Per model id: the detector's fingerprint and its peers' records. */
  models: Record<string, { fingerprint: string; savedAtMs: number; peers: DetectorRecord[] }>
}

/**
 * What a detector's records mean depends on its benign model, prior, bound and rate grid: records
 * are carried over only to a detector with the same ones.
 */
export function detectorFingerprint(benign: DriftModel, detector: Detector): string {
  const text = JSON.stringify([serializeDriftModel(benign), detector.prior, detector.bound, detector.rates])
  return Buffer.from(sha256(new TextEncoder().encode(text))).toString('hex')
}

/** Larger than any trust file a client writes (a few hundred bytes per peer): a bound on what is parsed. */
const MAX_TRUST_FILE_BYTES = 16 * 1024 * 1024

/**
 * The file's text, read as the identity file is (node/identity.ts, issue #39): the file named,
 * never a symlink's target (O_NOFOLLOW), a regular file, owner-only (no group or other bits).
 * Undefined when there is no file.
 */
function readText(path: string): string | undefined {
  let fd: number
  try {
    fd = openSync(path, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0))
  } catch (e) {
    const code = errorCode(e)
    if (code === 'ENOENT') return undefined
    if (code === 'ELOOP')
      throw new TrustFileExposedError(`trust file ${path} is a symbolic link; name the file itself`, { cause: e })
    throw new InvalidTrustFileError(`cannot read trust file ${path}: ${(e as Error).message}`, { cause: e })
  }
  try {
    const st = fstatSync(fd)
    if (!st.isFile()) throw new InvalidTrustFileError(`trust file ${path} is not a regular file`)
    if (process.platform !== 'win32' && (st.mode & 0o077) !== 0)
      throw new TrustFileExposedError(
        `trust file ${path} has mode ${(st.mode & 0o777).toString(8)}; others may read or change its convictions (chmod 600 ${path})`
      )
    if (st.size > MAX_TRUST_FILE_BYTES)
      throw new InvalidTrustFileError(`trust file ${path} has ${st.size} bytes, more than ${MAX_TRUST_FILE_BYTES}`)
    return readFileSync(fd, 'utf8')
  } finally {
    closeSync(fd)
  }
}

function read(path: string): TrustFileV1 | undefined {
  const text = readText(path)
  if (text === undefined) return undefined
  let f: TrustFileV1
  try {
    f = JSON.parse(text) as TrustFileV1
  } catch (e) {
    throw new InvalidTrustFileError(`trust file ${path} is not JSON`, { cause: e })
  }
  if (f?.version !== 1 || !f.models || typeof f.models !== 'object' || Array.isArray(f.models))
    throw new InvalidTrustFileError(`trust file ${path} is not a version 1 trust file`)
  return f
}

/**
 * The peers' records a client kept for `modelId` under the same detector (empty when the file is
 * absent, or was written for another detector). Throws InvalidTrustFileError on a file that is
 * not a trust file; a malformed record is the detector's to refuse (restore()).
 */
export function loadTrust(path: string, modelId: string, fingerprint: string): DetectorRecord[] {
  const entry = read(path)?.models[modelId]
  if (!entry || entry.fingerprint !== fingerprint) return []
  if (!Array.isArray(entry.peers)) throw new InvalidTrustFileError(`trust file ${path}: peers of ${modelId} is not a list`)
  return entry.peers
}

/**
 * Write the records for `modelId` (other models' entries are kept), readable by the owner only,
 * through a temporary file and a rename, so a crash mid-write never leaves half a file.
 */
export function saveTrust(path: string, modelId: string, fingerprint: string, peers: DetectorRecord[]): void {
  const f = read(path) ?? { version: 1, models: {} }
  f.models[modelId] = { fingerprint, savedAtMs: Date.now(), peers }
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  // An unpredictable temporary name, created exclusively (O_CREAT | O_EXCL: an existing file or a
  // symlink planted at that name makes the write fail instead of being followed, issue #17).
  const tmp = `${path}.${randomBytes(16).toString('hex')}.tmp`
  try {
    writeFileSync(tmp, `${JSON.stringify(f)}\n`, { mode: 0o600, flag: 'wx' })
    renameSync(tmp, path) // replaces a symlink at `path` itself rather than writing through it
  } catch (err) {
    rmSync(tmp, { force: true })
    throw err
  }
}

/**
 * Restore a detector's records from a trust file. Returns the peers it says were convicted, or
 * undefined when the file could not be read (logged as `trust-file-ignored`: a file we cannot
 * read is not ours to overwrite, so evidence starts afresh and the file stays).
 */
export function restoreTrustFile(
  path: string,
  modelId: string,
  benign: DriftModel,
  detector: Detector,
  log?: (e: Record<string, unknown>) => void
): string[] | undefined {
  try {
    const records = loadTrust(path, modelId, detectorFingerprint(benign, detector))
    detector.restore(records)
    const excluded = records.filter((r) => r.excluded).map((r) => r.peerId)
    log?.({ event: 'trust-file', path, peers: records.length, excluded: excluded.length })
    return excluded
  } catch (err) {
    log?.({ event: 'trust-file-ignored', path, code: errorCode(err), message: (err as Error).message })
    return undefined
  }
}

/** Save a detector's records to its trust file; a failure is logged (`trust-file-unsaved`), not thrown. */
export function saveTrustFile(
  path: string,
  modelId: string,
  benign: DriftModel,
  detector: Detector,
  log?: (e: Record<string, unknown>) => void
): void {
  try {
    saveTrust(path, modelId, detectorFingerprint(benign, detector), detector.records())
  } catch (err) {
    log?.({ event: 'trust-file-unsaved', path, message: (err as Error).message })
  }
}
