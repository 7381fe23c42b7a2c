/**
 * The model's edge tensors over HTTP: a GGUF opened from a URL with range requests (RFC 9110
 * §14), the header first, then only the tensors the client runs (embeddings, its edge blocks,
 * final norm, head) and the small samples of every other tensor that the model id hashes
 * (shards/model/model-id.ts). The ranges are fetched up front, so the engine's synchronous reads
 * (shards/model/model-file.ts ByteSource) are served from memory; a read outside them is a typed error.
 */
import type { AbortOptions } from '@libp2p/interface'
import { type ByteSource, MODEL_ID_SAMPLE_BYTES, type ModelFile, openGgufModelFrom, readGgufHeader } from '../../shards/index.js'
import { ModelFetchError, RangeNotFetchedError, RangeNotSupportedError } from './errors.js'
import { FETCH_CONCURRENCY, HEADER_PREFETCH_BYTES, MAX_HEADER_BYTES, RANGE_MERGE_GAP_BYTES } from './options.js'

export interface ModelUrlInit {
  readonly url: string
  /** Blocks the client runs before and after the swarm's span. */
  readonly edgeFirst: number
  readonly edgeLast: number
  /** Extra request headers (e.g. the gateway's Authorization). */
  readonly headers?: Record<string, string>
  readonly signal?: AbortSignal
  /** First read of the header (default HEADER_PREFETCH_BYTES; tests make it small). */
  readonly headerPrefetchBytes?: number
  /** Ranges closer than this are fetched as one (default RANGE_MERGE_GAP_BYTES). */
  readonly mergeGapBytes?: number
  /**
   * Issue #35 (head on a peer): fetch of an untied head (`output.weight`) only runs of rows holding
   * at least this many, at secret random places (the client's secret rows come from them).
   */
  readonly headSecretRows?: number
}

/** Rows a run of the head holds: few requests, and still many places (docs/browser.md). */
const HEAD_ROWS_PER_RUN = 32

/** Secret random runs of rows of a head of `rows` rows, at least `want` rows in all: [first, count] each. */
function headRuns(rows: number, want: number): Array<[number, number]> {
  const runs = Math.max(1, Math.floor(rows / HEAD_ROWS_PER_RUN))
  const order = Array.from({ length: runs }, (_, r) => r)
  const draw = new Uint32Array(runs)
  globalThis.crypto.getRandomValues(draw)
  for (let i = runs - 1; i > 0; i--) {
    const j = draw[i] % (i + 1)
    ;[order[i], order[j]] = [order[j], order[i]]
  }
  const out: Array<[number, number]> = []
  let held = 0
  for (const r of order) {
    if (held >= Math.min(want, rows)) break
    const first = r * HEAD_ROWS_PER_RUN
    const count = r === runs - 1 ? rows - first : HEAD_ROWS_PER_RUN
    out.push([first, count])
    held += count
  }
  return out
}

/** A [start, end) byte range and its bytes once fetched. */
interface Chunk {
  readonly start: number
  readonly bytes: Uint8Array
}

/** Bytes fetched beforehand, served by offset. */
export class PrefetchedBytes implements ByteSource {
  private readonly chunks: Chunk[] = []
  private read_ = 0
  constructor(
    readonly path: string,
    readonly sizeBytes: number
  ) {}

  add(chunk: Chunk): void {
    this.chunks.push(chunk)
    this.chunks.sort((a, b) => a.start - b.start)
  }

  /** Bytes held (what the client downloaded). */
  heldBytes(): number {
    return this.chunks.reduce((n, c) => n + c.bytes.length, 0)
  }

  read(offset: number, length: number, what: string, into?: Uint8Array): Uint8Array {
    for (const c of this.chunks) {
      if (offset < c.start || offset + length > c.start + c.bytes.length) continue
      const src = c.bytes.subarray(offset - c.start, offset - c.start + length)
      // a fresh buffer (or the caller's), so f32 views of it are aligned (file-reader.ts does the same)
      const out = into ? into.subarray(0, length) : new Uint8Array(length)
      out.set(src)
      this.read_ += length
      return out
    }
    throw new RangeNotFetchedError(`${this.path}: ${what} needs bytes ${offset}..${offset + length}, which were not fetched`)
  }

  bytesRead(): number {
    return this.read_
  }

  close(): void {
    this.chunks.length = 0
  }
}

/** One ranged GET: [start, end) of the file; the file's total size from Content-Range. */
export async function fetchRange(
  url: string,
  start: number,
  end: number,
  headers: Record<string, string> = {},
  { signal }: AbortOptions = {}
): Promise<{ bytes: Uint8Array; totalBytes: number }> {
  let res: Response
  try {
    res = await fetch(url, { headers: { ...headers, range: `bytes=${start}-${end - 1}` }, signal })
  } catch (err) {
    throw new ModelFetchError(`cannot fetch ${url}: ${(err as Error).message}`, { cause: err })
  }
  if (res.status === 200) {
    await res.body?.cancel()
    throw new RangeNotSupportedError(`${url} ignored the Range header (200, not 206): serve the model with range support`)
  }
  if (res.status !== 206) throw new ModelFetchError(`${url} answered HTTP ${res.status} to bytes ${start}..${end}`)
  const m = /^bytes (\d+)-(\d+)\/(\d+)$/.exec(res.headers.get('content-range') ?? '')
  const bytes = new Uint8Array(await res.arrayBuffer())
  if (!m || Number(m[1]) !== start || bytes.length !== Number(m[2]) - start + 1) {
    throw new RangeNotSupportedError(
      `${url} answered bytes ${start}..${end} with Content-Range "${res.headers.get('content-range')}"`
    )
  }
  return { bytes, totalBytes: Number(m[3]) }
}

/** Sorted [start, end) ranges with those closer than `gap` merged. */
export function mergeRanges(ranges: ReadonlyArray<[number, number]>, gap: number): Array<[number, number]> {
  const sorted = [...ranges].filter(([s, e]) => e > s).sort((a, b) => a[0] - b[0])
  const out: Array<[number, number]> = []
  for (const [s, e] of sorted) {
    const last = out[out.length - 1]
    if (last && s <= last[1] + gap) last[1] = Math.max(last[1], e)
    else out.push([s, e])
  }
  return out
}

/** Whether a GGUF tensor name belongs to the client: not a block's, or one of its edge blocks'. */
function isEdgeTensor(name: string, nLayers: number, edgeFirst: number, edgeLast: number): boolean {
  const m = /^blk\.(\d+)\./.exec(name)
  if (!m) return true
  const layer = Number(m[1])
  return layer < edgeFirst || layer >= nLayers - edgeLast
}

/**
 * Open the GGUF at `url` for a client with `edgeFirst` and `edgeLast` blocks: what it downloads
 * is the header, its tensors and 8 KiB samples of the rest; `fetchedBytes` says how much.
 */
export async function openModelUrl(init: ModelUrlInit): Promise<{
  model: ModelFile
  fetchedBytes: number
  totalBytes: number
  /** With headSecretRows and an untied head: the head rows fetched (the client's secret rows come from them). */
  headReadable?: (id: number) => boolean
}> {
  const { url, headers, signal } = init
  let prefix = init.headerPrefetchBytes ?? HEADER_PREFETCH_BYTES
  for (;;) {
    const first = await fetchRange(url, 0, prefix, headers, { signal })
    const size = first.totalBytes
    const source = new PrefetchedBytes(url, size)
    source.add({ start: 0, bytes: first.bytes })
    let header: ReturnType<typeof readGgufHeader>
    try {
      header = readGgufHeader(source)
    } catch (err) {
      // the header runs past what was fetched: fetch twice as much (up to the file or the cap)
      if (err instanceof RangeNotFetchedError && prefix < Math.min(size, MAX_HEADER_BYTES)) {
        prefix = Math.min(prefix * 2, size, MAX_HEADER_BYTES)
        continue
      }
      throw err
    }
    let nLayers = 0
    for (const name of header.tensors.keys()) {
      const m = /^blk\.(\d+)\./.exec(name)
      if (m) nLayers = Math.max(nLayers, Number(m[1]) + 1)
    }
    const ranges: Array<[number, number]> = []
    const half = Math.floor(MODEL_ID_SAMPLE_BYTES / 2)
    let headReadable: ((id: number) => boolean) | undefined
    // the head's runs are never merged with what lies between them (that would fetch the head)
    const headRanges: Array<[number, number]> = []
    const head = init.headSecretRows !== undefined ? header.tensors.get('output.weight') : undefined
    if (head && head.ne.length === 2 && head.sizeBytes > MODEL_ID_SAMPLE_BYTES) {
      const rows = head.ne[1]
      const rowBytes = head.sizeBytes / rows
      const held = new Set<number>()
      for (const [first, count] of headRuns(rows, init.headSecretRows ?? 0)) {
        headRanges.push([head.offset + first * rowBytes, head.offset + (first + count) * rowBytes])
        for (let i = first; i < first + count; i++) held.add(i)
      }
      headReadable = (id) => held.has(id)
    }
    for (const [name, t] of header.tensors) {
      const end = t.offset + t.sizeBytes
      if (headReadable && t === head) {
        ranges.push([t.offset, t.offset + half], [end - half, end])
      } else if (isEdgeTensor(name, nLayers, init.edgeFirst, init.edgeLast) || t.sizeBytes <= MODEL_ID_SAMPLE_BYTES) {
        ranges.push([t.offset, end])
      } else {
        ranges.push([t.offset, t.offset + half], [end - half, end])
      }
    }
    const wanted = [...mergeRanges(ranges, init.mergeGapBytes ?? RANGE_MERGE_GAP_BYTES), ...mergeRanges(headRanges, 0)].filter(
      ([, e]) => e > first.bytes.length
    )
    let next = 0
    const worker = async (): Promise<void> => {
      while (next < wanted.length) {
        const [s, e] = wanted[next++]
        // a range reaching past the prefix is fetched whole: a read must lie inside one chunk
        source.add({ start: s, bytes: (await fetchRange(url, s, e, headers, { signal })).bytes })
      }
    }
    await Promise.all(Array.from({ length: Math.min(FETCH_CONCURRENCY, wanted.length) }, worker))
    const fetchedBytes = source.heldBytes()
    return { model: openGgufModelFrom(source), fetchedBytes, totalBytes: size, ...(headReadable ? { headReadable } : {}) }
  }
}
