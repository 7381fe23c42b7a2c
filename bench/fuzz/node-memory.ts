/**
 * Memory checkpoints of the fuzzed node (issue #17: "peak RSS of the node under a stated bound").
 * The node runs with `--metrics` and `node --expose-gc`, so each scrape of its
 * layerswarm_memory_bytes gauge follows a full collection: heap_used is then the live heap, which
 * grows with the frames only if the node keeps something per frame (a leak), while RSS also
 * moves with V8's heap sizing and the allocator. The verdict compares the second half of the run.
 */
import { readFileSync } from 'node:fs'
import { type LocalNode, startLocalNode } from '../../node/cli/local-swarm.js'
import { metricsUrl, sampleValue } from '../../node/cli/metrics-scrape.js'

const MIB = 1024 * 1024

/** The node's V8 heap in the fuzz (NODE_OPTIONS): part of the bound its memory must stay under. */
export const FUZZ_NODE_HEAP_MIB = 1024
/** The node's V8 semi-space (young generation) in the fuzz, set so the bound is explicit. */
export const FUZZ_NODE_SEMI_SPACE_MIB = 16

/** The fuzzed node: span 1:4, reference kernels, an ordinary host's heap, metrics on an OS-chosen port. */
export async function startMeasuredNode(model: string, heapMiB: number): Promise<LocalNode> {
  if (!Number.isSafeInteger(heapMiB) || heapMiB < 64) throw new RangeError('heapMiB: an integer >= 64')
  return await startLocalNode({
    model,
    layers: '1:4',
    args: ['--kernels', 'reference', '--metrics', '127.0.0.1:0'],
    // a heap that grew with the frames would kill it; --expose-gc lets each metrics scrape collect
    // first, so the live heap is what the checkpoints read
    env: {
      ...process.env,
      NODE_OPTIONS:
        `${process.env.NODE_OPTIONS ?? ''} --max-old-space-size=${heapMiB} --max-semi-space-size=${FUZZ_NODE_SEMI_SPACE_MIB} --expose-gc`.trim()
    }
  })
}

/** CPU seconds (user + system) a process used so far, or -1 once it is gone. */
export function cpuSeconds(pid: number): number {
  try {
    // fields 14 and 15 of /proc/PID/stat, in clock ticks (100 per second on Linux)
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')
    return (Number(fields[11]) + Number(fields[12])) / 100
  } catch {
    return -1
  }
}

/** The process's peak resident set (VmHWM), or -1 once it is gone. */
export function peakRssMiB(pid: number): number {
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('VmHWM:'))
    return Math.round(Number(line?.split(/\s+/)[1]) / 1024)
  } catch {
    return -1
  }
}

export interface MemoryCheckpoint {
  /** Frames the node had read when the checkpoint was taken. */
  readonly frames: number
  readonly seconds: number
  readonly rssMiB: number
  /** V8 heap in use; after a full GC when `afterGc`. */
  readonly heapUsedMiB: number
  readonly heapTotalMiB: number
  readonly externalMiB: number
  readonly arrayBuffersMiB: number
  readonly afterGc: boolean
  /** What the node holds for its peers (layerswarm_node_records): stop-signal links, rate-limited peers, streams, bytes in flight. */
  readonly records: Record<string, number>
}

/** The kinds of layerswarm_node_records (node/daemon/metrics.ts). */
export const NODE_RECORD_KINDS = ['stop_signal_links', 'rate_limited_peers', 'streams', 'bytes_in_flight'] as const

/** What the run says about the node's memory. */
export interface MemoryVerdict {
  /** The bound the node's RSS must stay under, and how it is made up. */
  readonly boundMiB: number
  readonly bound: string
  readonly peakRssMiB: number
  readonly withinBound: boolean
  /** Growth from the checkpoint at half the frames to the last one. */
  readonly secondHalf: {
    readonly frames: number
    readonly rssMiB: number
    readonly heapUsedMiB: number
    readonly externalMiB: number
    /** Live heap growth per 100,000 frames over the second half (after GC: a leak's slope). */
    readonly heapUsedMiBPer100kFrames: number
  }
  /** Plain words: whether live memory levelled off. */
  readonly verdict: string
}

/**
 * Live memory counts as level over the second half if the heap after GC grew by at most
 * LEVEL_HEAP_NOISE_MIB (it moves by about that with the streams and frames in flight at the
 * moment) plus LEVEL_HEAP_MIB_PER_100K per 100,000 frames. The leak fixed in issue #17 grew by
 * about 6 MiB per 100,000 frames; an allowance of 2 catches one of a third of its size.
 */
export const LEVEL_HEAP_NOISE_MIB = 1
export const LEVEL_HEAP_MIB_PER_100K = 2

const round = (x: number): number => Math.round(x * 10) / 10

/** Reads the node's memory gauges (a scrape runs a full GC first when the node has --expose-gc). */
export async function readNodeMemory(url: string, frames: number, seconds: number): Promise<MemoryCheckpoint> {
  const res = await fetch(url, { signal: AbortSignal.timeout(30_000) })
  const text = await res.text()
  const kind = (k: string): number => round(sampleValue(text, 'layerswarm_memory_bytes', `kind="${k}"`) / MIB)
  return {
    frames,
    seconds: Math.round(seconds),
    rssMiB: kind('rss'),
    heapUsedMiB: kind('heap_used'),
    heapTotalMiB: kind('heap_total'),
    externalMiB: kind('external'),
    arrayBuffersMiB: kind('array_buffers'),
    afterGc: sampleValue(text, 'layerswarm_memory_after_gc') === 1,
    records: Object.fromEntries(NODE_RECORD_KINDS.map((k) => [k, sampleValue(text, 'layerswarm_node_records', `kind="${k}"`)]))
  }
}

/**
 * Checkpoints at every `1/parts` of `total` frames: call `poll(delivered)` as frames go (cheap,
 * never blocks), `finish()` after the run for the last one and the list.
 */
export function createMemoryCheckpoints(node: LocalNode, total: number, parts: number, t0: number, log?: (line: string) => void) {
  if (!Number.isSafeInteger(parts) || parts < 1) throw new RangeError('checkpoints: a positive integer')
  if (!Number.isSafeInteger(total) || total < 1) throw new RangeError('total frames: a positive integer')
  const url = metricsUrl(node)
  const taken: Promise<MemoryCheckpoint | undefined>[] = []
  let next = 0
  const take = (frames: number): void => {
    const read = readNodeMemory(url, frames, (performance.now() - t0) / 1000).then(
      (c) => {
        log?.(`node memory at ${frames} frames: ${JSON.stringify(c)}`)
        return c
      },
      () => undefined
    )
    taken.push(read)
  }
  return {
    url,
    poll(delivered: number): void {
      while (next <= parts && delivered >= (next * total) / parts) {
        take(Math.round((next * total) / parts))
        next++
      }
    },
    async finish(delivered: number): Promise<MemoryCheckpoint[]> {
      // the last part's checkpoint may have been taken at this very count already
      if (next <= parts || delivered > total) take(delivered)
      const all = (await Promise.all(taken)).filter((c): c is MemoryCheckpoint => c !== undefined)
      // a checkpoint the run passed while another was on its way may be later than one after it
      return all.sort((a, b) => a.frames - b.frames)
    }
  }
}

/**
 * The verdict over checkpoints. The bound: the node's RSS when it started serving (code, weights
 * of its span, libp2p) + its V8 old-space limit (all the heap it may grow to before V8 kills it) +
 * its young generation (two semi-spaces and new large objects, at most 3 semi-spaces) + the
 * node-wide budget of request bytes in flight (frames held outside the V8 heap while they are
 * read, protocol/byte-budget.ts) + the KV caches of a full session cap.
 */
export function memoryVerdict(
  checkpoints: readonly MemoryCheckpoint[],
  o: {
    readonly heapLimitMiB: number
    readonly semiSpaceMiB: number
    readonly bytesInFlightMiB: number
    /** KV caches at the node's session cap, each over the whole context. */
    readonly kvMiB: number
    readonly peakRssMiB: number
  }
): MemoryVerdict {
  const first = checkpoints[0]
  const last = checkpoints.at(-1)
  const startRss = first?.rssMiB ?? 0
  const boundMiB = Math.ceil(startRss + o.heapLimitMiB + 3 * o.semiSpaceMiB + o.bytesInFlightMiB + o.kvMiB)
  const bound =
    `RSS at start ${startRss} MiB + V8 old space ${o.heapLimitMiB} MiB + young generation 3 x ${o.semiSpaceMiB} MiB ` +
    `+ bytes in flight ${o.bytesInFlightMiB} MiB + KV caches at the session cap ${round(o.kvMiB)} MiB`
  const half = last === undefined ? undefined : checkpoints.find((c) => c.frames >= last.frames / 2)
  const d = (f: (c: MemoryCheckpoint) => number): number => (half && last ? round(f(last) - f(half)) : 0)
  const frames = half && last ? last.frames - half.frames : 0
  const heapSlope = frames > 0 ? round((d((c) => c.heapUsedMiB) / frames) * 100_000) : 0
  const afterGc = checkpoints.every((c) => c.afterGc)
  const level = d((c) => c.heapUsedMiB) <= LEVEL_HEAP_NOISE_MIB + (LEVEL_HEAP_MIB_PER_100K * frames) / 100_000
  const verdict =
    checkpoints.length < 3
      ? 'too few checkpoints to judge'
      : `${level ? 'level' : 'growing'}: live heap${afterGc ? ' (after GC)' : ' (no forced GC: a rough reading)'} ` +
        `${half?.heapUsedMiB} -> ${last?.heapUsedMiB} MiB and RSS ${half?.rssMiB} -> ${last?.rssMiB} MiB ` +
        `over the second half (${frames} frames; level means growth <= ${LEVEL_HEAP_NOISE_MIB} MiB + ${LEVEL_HEAP_MIB_PER_100K} MiB per 100,000 frames)`
  return {
    boundMiB,
    bound,
    peakRssMiB: o.peakRssMiB,
    withinBound: o.peakRssMiB > 0 && o.peakRssMiB <= boundMiB,
    secondHalf: {
      frames,
      rssMiB: d((c) => c.rssMiB),
      heapUsedMiB: d((c) => c.heapUsedMiB),
      externalMiB: d((c) => c.externalMiB),
      heapUsedMiBPer100kFrames: heapSlope
    },
    verdict
  }
}

/**
 * The node's records once traffic ended: read until stop-signal links, streams and bytes in flight
 * are back at or under `baseline` (refused streams are reset up to 10 s after their last frame),
 * or `ms` passed. A leak shows as a count that stays up.
 */
export async function settledRecords(
  url: string,
  baseline: Record<string, number>,
  ms = 30_000
): Promise<Record<string, number>> {
  const until = performance.now() + ms
  for (;;) {
    const { records } = await readNodeMemory(url, 0, 0)
    const settled = (['stop_signal_links', 'streams', 'bytes_in_flight'] as const).every((k) => records[k] <= (baseline[k] ?? 0))
    if (settled || performance.now() > until) return records
    await new Promise((r) => setTimeout(r, 500))
  }
}
