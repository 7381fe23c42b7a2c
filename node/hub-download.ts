import { createHash } from 'node:crypto'
import {
  createReadStream,
  createWriteStream,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync
} from 'node:fs'
import { dirname, join } from 'node:path'
import { Readable, Transform } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import type { AbortOptions } from '@libp2p/interface'
import { HubChecksumError, HubDownloadError } from './errors.js'
import {
  type HubSource,
  hubEndpoint,
  hubHeaders,
  hubStatusError,
  parseHubSource,
  resolveHubFile,
  resolveUrl
} from './hub-source.js'
import { layerswarmHome } from './identity.js'

/**
 * Downloads of Hub models into `$LAYERSWARM_HOME/models/hf/<org>/<repo>/<file>` (issue 33 item 6),
 * as huggingface_hub's file_download.py does it: a HEAD on the resolve URL without following the
 * redirect tells the size and the hash (X-Linked-Size / X-Linked-Etag for LFS files, where the
 * etag is the file's sha256; Content-Length / ETag otherwise, where it is the git blob sha1), then
 * a GET that follows the 302 to the CDN. The bytes go to `<file>.part`, so a dropped connection or
 * a killed process resumes with `Range: bytes=N-`; the finished file is hashed and renamed into
 * place only when the hash is the announced one.
 */
export interface HubProgress {
  readonly bytes: number
  readonly totalBytes: number
  readonly bytesPerSecond: number
  /** Time left at the current rate (undefined before any byte arrived). */
  readonly etaMs?: number
}

export interface HubDownloadOptions extends AbortOptions {
  readonly env?: NodeJS.ProcessEnv
  /** Default `$LAYERSWARM_HOME/models`. */
  readonly modelsDir?: string
  /** Attempts after a connection drops mid-file (each resumes where the last stopped); default 5. */
  readonly retries?: number
  readonly retryDelayMs?: number
  onProgress?(p: HubProgress): void
  log?(event: Record<string, unknown>): void
}

export interface HubDownload {
  readonly path: string
  readonly repo: string
  readonly file: string
  readonly revision: string
  readonly bytes: number
  readonly sha256?: string
  /** True when the file was already there and verified: nothing was fetched. */
  readonly cached: boolean
  /** Bytes fetched by this call (less than `bytes` after a resume). */
  readonly fetchedBytes: number
}

interface Remote {
  readonly size: number
  /** sha256 (64 hex) for LFS files, git blob sha1 (40 hex) for small ones; undefined if the Hub gave neither. */
  readonly etag?: string
}

const unquote = (v: string | null): string | undefined => v?.replace(/^W\//, '').replace(/"/g, '').trim() || undefined

async function headRemote(url: string, headers: Record<string, string>, signal?: AbortSignal): Promise<Remote> {
  let res: Response
  try {
    // no redirect: the 302 itself carries X-Linked-Etag / X-Linked-Size (the CDN's own headers differ)
    res = await fetch(url, { method: 'HEAD', redirect: 'manual', headers: { ...headers, 'accept-encoding': 'identity' }, signal })
  } catch (err) {
    throw new HubDownloadError(`HEAD ${url}: ${(err as Error).message}`)
  }
  if (res.status >= 400) throw hubStatusError(res, url)
  const size = Number(res.headers.get('x-linked-size') ?? res.headers.get('content-length') ?? Number.NaN)
  if (!Number.isSafeInteger(size) || size < 0) throw new HubDownloadError(`HEAD ${url}: no file size in the answer`)
  return { size, etag: unquote(res.headers.get('x-linked-etag') ?? res.headers.get('etag')) }
}

/** sha256 of the file, or the git blob sha1 (`sha1("blob <size>\0" + bytes)`) when that is what the Hub announced. */
async function hashFile(path: string, kind: 'sha256' | 'git-sha1'): Promise<string> {
  const h = createHash(kind === 'sha256' ? 'sha256' : 'sha1')
  if (kind === 'git-sha1') h.update(`blob ${statSync(path).size}\0`)
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer)
  return h.digest('hex')
}

const hashKind = (etag: string | undefined): 'sha256' | 'git-sha1' | undefined =>
  etag && /^[0-9a-f]{64}$/.test(etag) ? 'sha256' : etag && /^[0-9a-f]{40}$/.test(etag) ? 'git-sha1' : undefined

/** Download (or find, verified, in the cache) the model a Hub source names; returns its local path. */
export async function downloadHubModel(source: HubSource | string, o: HubDownloadOptions = {}): Promise<HubDownload> {
  const env = o.env ?? process.env
  const parsed = typeof source === 'string' ? parseHubSource(source) : source
  if (parsed === undefined)
    throw new HubDownloadError(`${String(source)} is not a Hub model (hf://org/repo/file.gguf or org/repo:QUANT)`)
  const endpoint = hubEndpoint(env)
  const headers = hubHeaders(env)
  const s = await resolveHubFile(parsed, endpoint, headers, { signal: o.signal })
  const url = resolveUrl(endpoint, s)
  const path = join(o.modelsDir ?? join(layerswarmHome(env), 'models'), 'hf', ...s.repo.split('/'), ...s.file.split('/'))
  const part = `${path}.part`
  const meta = `${path}.etag`
  const remote = await headRemote(url, headers, o.signal)
  const kind = hashKind(remote.etag)
  const base = {
    path,
    repo: s.repo,
    file: s.file,
    revision: s.revision,
    bytes: remote.size,
    ...(kind === 'sha256' ? { sha256: remote.etag } : {})
  }
  // verified before (the etag file is written only after a hash check): no second download, no re-hash
  if (existsSync(path) && statSync(path).size === remote.size && readIf(meta) === (remote.etag ?? `size:${remote.size}`))
    return { ...base, cached: true, fetchedBytes: 0 }
  mkdirSync(dirname(path), { recursive: true })
  // a partial file of another version of the file is no start to resume from
  if (existsSync(part) && readIf(`${part}.etag`) !== (remote.etag ?? `size:${remote.size}`)) rmSync(part, { force: true })
  writeFileSync(`${part}.etag`, remote.etag ?? `size:${remote.size}`)
  const fetchedBytes = await fetchWithResume(url, part, remote.size, headers, o)
  if (kind !== undefined) {
    const got = await hashFile(part, kind)
    if (got !== remote.etag) {
      // never resume from bytes that hash wrong: the next try starts clean
      rmSync(part, { force: true })
      rmSync(`${part}.etag`, { force: true })
      throw new HubChecksumError(
        `${s.repo}/${s.file}: the downloaded bytes hash to ${kind} ${got}, the Hub announced ${remote.etag}; the download was deleted`
      )
    }
  } else o.log?.({ event: 'hub-unverified', file: s.file, reason: 'the Hub sent no sha256/sha1 etag' })
  renameSync(part, path)
  rmSync(`${part}.etag`, { force: true })
  writeFileSync(meta, remote.etag ?? `size:${remote.size}`)
  return { ...base, cached: false, fetchedBytes }
}

function readIf(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8')
  } catch {
    return undefined
  }
}

/** GET with `Range: bytes=<have>-` until the part file holds `size` bytes; a dropped connection retries from where it stopped. */
async function fetchWithResume(
  url: string,
  part: string,
  size: number,
  headers: Record<string, string>,
  o: HubDownloadOptions
): Promise<number> {
  const retries = o.retries ?? 5
  const started = performance.now()
  let fetched = 0
  let lastError: Error | undefined
  for (let attempt = 0; attempt <= retries; attempt++) {
    o.signal?.throwIfAborted()
    const have = existsSync(part) ? statSync(part).size : 0
    if (have === size) return fetched
    if (have > size) rmSync(part, { force: true })
    if (attempt > 0) {
      o.log?.({ event: 'hub-resume', from: have, attempt, error: lastError?.message })
      await new Promise((r) => setTimeout(r, (o.retryDelayMs ?? 500) * attempt))
    }
    const from = have > size ? 0 : have
    let res: Response
    try {
      res = await fetch(url, {
        headers: { ...headers, 'accept-encoding': 'identity', ...(from > 0 ? { range: `bytes=${from}-` } : {}) },
        signal: o.signal
      })
    } catch (err) {
      lastError = err as Error
      continue
    }
    if (res.status === 401 || res.status === 403 || res.status === 404) throw hubStatusError(res, url)
    if (res.status !== 200 && res.status !== 206) {
      await res.body?.cancel()
      lastError = new HubDownloadError(`GET ${url}: HTTP ${res.status}`)
      continue
    }
    // a server that ignores Range answers 200 with the whole file: start over rather than append
    const offset = res.status === 206 ? from : 0
    const counted = new TransformCounter(() => {
      const bytes = offset + counted.bytes
      const secs = (performance.now() - started) / 1000
      const rate = secs > 0 ? (fetched + counted.bytes) / secs : 0
      o.onProgress?.({
        bytes,
        totalBytes: size,
        bytesPerSecond: rate,
        ...(rate > 0 ? { etaMs: ((size - bytes) / rate) * 1000 } : {})
      })
    })
    const file = createWriteStream(part, { flags: offset > 0 ? 'a' : 'w' })
    try {
      if (res.body === null) throw new HubDownloadError(`GET ${url}: no body`)
      await pipeline(Readable.fromWeb(res.body as never), counted.stream, file)
    } catch (err) {
      if (o.signal?.aborted) throw err
      lastError = err as Error
    } finally {
      // a write in flight when the connection died still lands: the next attempt's offset must come after it
      if (!file.closed) await new Promise<void>((resolve) => file.once('close', () => resolve()))
    }
    // what reached the file, not what passed the counter: bytes still buffered when a connection dies are lost and fetched again
    fetched += (existsSync(part) ? statSync(part).size : 0) - offset
  }
  const have = existsSync(part) ? statSync(part).size : 0
  if (have === size) return fetched
  throw new HubDownloadError(
    `GET ${url}: ${have} of ${size} bytes after ${retries + 1} attempts (${lastError?.message ?? 'short body'}); run again to resume`
  )
}

/** Counts the bytes passing through a pipeline. */
class TransformCounter {
  bytes = 0
  readonly stream: Transform
  constructor(onBytes: (n: number) => void) {
    this.stream = new Transform({
      transform: (chunk: Buffer, _enc, cb) => {
        this.bytes += chunk.length
        onBytes(chunk.length)
        cb(null, chunk)
      }
    })
  }
}
