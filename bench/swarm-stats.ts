/**
 * Arithmetic for bench/swarm.ts: medians, per-hop latency from the client's `step` log events,
 * the bytes a decoded token puts on the wire, counted with the real session codecs, and CPU time.
 */
import { readFileSync } from 'node:fs'
import { type DType, encodeSessionRequest, encodeSessionResponse, encodeTensor, type HopTiming } from '../protocol/index.js'
import { parseShape } from '../shards/index.js'

export const median = (xs: number[]): number =>
  xs.length === 0 ? Number.NaN : [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]
export const round = (x: number, d = 3): number => Math.round(x * 10 ** d) / 10 ** d

/** One `step` log event of the client (client/session/remote-pipeline.ts); rttMs in relayed mode only. */
export interface StepEvent {
  readonly rows: number
  readonly ms: number
  readonly hops: Array<{ peerId: string; computeMs: number; rttMs?: number }>
}

const varintLength = (n: number): number => (n < 0x80 ? 1 : 1 + varintLength(Math.floor(n / 0x80)))

/**
 * Per-hop latency over the decode steps (1 row): each hop's compute; relayed, also its round
 * trip as the client saw it and the rest of it (network, codecs, queueing). `linkMs` spreads
 * what the remote span took beyond compute over the network traversals of one step:
 * 2 × hops relayed, hops + 1 chained.
 */
export function hopLatency(steps: StepEvent[], chained: boolean) {
  const decode = steps.filter((s) => s.rows === 1 && s.hops.length > 0)
  const n = decode[0]?.hops.length ?? 0
  const hops = Array.from({ length: n }, (_, i) => {
    const compute = decode.map((s) => s.hops[i].computeMs)
    const rtt = decode.map((s) => s.hops[i].rttMs ?? Number.NaN)
    return {
      peerId: decode[0].hops[i].peerId,
      computeMs: round(median(compute)),
      ...(chained ? {} : { rttMs: round(median(rtt)), overheadMs: round(median(rtt.map((r, j) => r - compute[j]))) })
    }
  })
  const beyondCompute = decode.map((s) => s.ms - s.hops.reduce((a, h) => a + h.computeMs, 0))
  return {
    decodeSteps: decode.length,
    remoteStepMs: round(median(decode.map((s) => s.ms))),
    linkMs: round(median(beyondCompute) / (chained ? n + 1 : 2 * n)),
    hops
  }
}

/** Bytes of one activation row of `dim` values in a wire dtype (Q8_0: 34 bytes per 32 values). */
export function rowBytes(dim: number, dtype: DType): number {
  return dtype === 'f32' ? dim * 4 : dtype === 'f16' ? dim * 2 : Math.ceil(dim / 32) * 34
}

/**
 * Bytes on the wire per decoded token. `activations`: the hidden-state rows alone (relayed:
 * to and from every hop; chained: into the first hop, between hops, back from the last).
 * `sessionFrames`: every session-protocol frame a decode step sends (length prefix + protobuf),
 * encoded with the real codecs (chained: also the acknowledgements and the client's await).
 * Transport framing (yamux headers, Noise tags: ~30 bytes per frame) is not counted.
 */
export function wireBytesPerToken(dim: number, dtype: DType, hops: number, chained: boolean, peerId: string) {
  const hidden = encodeTensor(new Float32Array(dim).fill(0.5), [1, dim], dtype)
  const sessionId = '00000000-0000-4000-8000-000000000000' // a randomUUID(), as the client uses
  const stepId = 1000
  const framed = (bytes: Uint8Array): number => varintLength(bytes.byteLength) + bytes.byteLength
  const timings = (n: number): HopTiming[] => Array.from({ length: n }, () => ({ peerId, computeMs: 1.2345 }))
  const step = (chain: boolean) =>
    framed(
      encodeSessionRequest({ requestId: stepId, type: 'step', step: { sessionId, stepId, startPosition: 100, hidden, chain } })
    )
  const result = (withHidden: boolean, n: number) =>
    framed(
      encodeSessionResponse({
        requestId: stepId,
        type: 'result',
        result: { sessionId, stepId, ...(withHidden ? { hidden } : {}), timings: timings(n) }
      })
    )
  if (!chained) return { activations: 2 * hops * rowBytes(dim, dtype), sessionFrames: hops * (step(false) + result(true, 1)) }
  const awaitReq = framed(encodeSessionRequest({ requestId: stepId, type: 'await', await: { sessionId, stepId } }))
  let acks = 0
  for (let i = 0; i < hops; i++) acks += result(false, hops - i) // hop i acknowledges with the timings of hops i..end
  return {
    activations: (hops + 1) * rowBytes(dim, dtype),
    sessionFrames: hops * step(true) + acks + awaitReq + result(true, 1)
  }
}

/** The benchmark shape a model file has (the targets are per shape), if it is one. */
export function knownShape(c: { dim: number; nLayers: number; vocabSize: number }): string | undefined {
  return ['110m', '1.1b'].find((name) => {
    const s = parseShape(name)
    return s.dim === c.dim && s.nLayers === c.nLayers && s.vocabSize === c.vocabSize
  })
}

/** The headline numbers of one mode's result, for the `runs` comparison. */
export function headline(r: unknown): Record<string, unknown> | undefined {
  if (r === undefined) return undefined
  const m = r as {
    decodeTokensPerSecond: number
    ratioToSingleProcess: number
    sameTokensAsSingleProcess: boolean
    latency: { tokenMs: number }
  }
  return {
    decodeTokensPerSecond: m.decodeTokensPerSecond,
    ratioToSingleProcess: m.ratioToSingleProcess,
    sameTokens: m.sameTokensAsSingleProcess,
    tokenMs: m.latency.tokenMs
  }
}

/**
 * CPU milliseconds this process and the given ones (node processes; all their threads) have
 * used so far, from /proc (Linux; a process gone or unreadable counts 0). On a shared host CPU
 * time per token moves far less than wall time between repeats (bench family-speed).
 */
export function swarmCpuMs(pids: readonly (number | undefined)[]): number {
  const self = process.cpuUsage()
  let ms = (self.user + self.system) / 1000
  for (const pid of pids) {
    if (pid === undefined) continue
    try {
      // fields after the parenthesised command: state is field 3; utime, stime are 14, 15 (clock ticks)
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      ms += ((Number(f[11]) + Number(f[12])) * 1000) / CLOCK_TICKS_PER_S
    } catch {
      // not Linux, or the process has exited
    }
  }
  return ms
}

/** USER_HZ: the unit of /proc/PID/stat times, 100 on Linux for x86 and arm (proc(5)). */
const CLOCK_TICKS_PER_S = 100
