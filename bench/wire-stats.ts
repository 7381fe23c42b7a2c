/**
 * Measurements for bench/wire-compression.ts: bytes the processes of a local swarm put on TCP (read from
 * the kernel's tcp_info with `ss`, so Noise, yamux, protobuf, receipts and gossip are all in),
 * and the drift of logits against a reference.
 */
import { execFileSync } from 'node:child_process'
import { round } from './swarm-stats.js'

/**
 * bytes_sent of every TCP socket owned by one of `pids`, keyed by socket (local + peer address).
 * Each byte between two of these processes is counted once, by its sender.
 */
export function tcpBytesSent(pids: readonly number[]): Map<string, number> {
  const out = new Map<string, number>()
  const text = execFileSync('ss', ['-tinpH'], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 })
  // one socket: a line with the addresses and users:((...pid=N...)), then indented tcp_info lines
  const records = text.split(/\n(?=\S)/)
  for (const r of records) {
    const pid = /pid=(\d+)/.exec(r)
    if (!pid || !pids.includes(Number(pid[1]))) continue
    const sent = /bytes_sent:(\d+)/.exec(r)
    const addrs = r.trim().split(/\s+/).slice(3, 5).join(' ')
    out.set(`${pid[1]} ${addrs}`, sent ? Number(sent[1]) : 0)
  }
  return out
}

/** Bytes sent between two snapshots (sockets opened meanwhile count from zero). */
export function bytesSentSince(before: Map<string, number>, after: Map<string, number>): number {
  let total = 0
  for (const [k, v] of after) total += Math.max(0, v - (before.get(k) ?? 0))
  return total
}

export interface DriftSummary {
  /** Steps compared: up to and including the first step whose token differs (same context until then). */
  readonly steps: number
  /** ‖a − ref‖₂ / ‖ref‖₂ of the final logits, per step. */
  readonly relL2: { mean: number; max: number }
  /** max |a − ref| of the final logits, per step. */
  readonly maxAbs: { mean: number; max: number }
}

export function logitDrift(got: readonly Float32Array[], ref: readonly Float32Array[], steps: number): DriftSummary {
  const rel: number[] = []
  const abs: number[] = []
  for (let s = 0; s < steps; s++) {
    const a = got[s]
    const b = ref[s]
    let d2 = 0
    let r2 = 0
    let m = 0
    for (let i = 0; i < b.length; i++) {
      const d = a[i] - b[i]
      d2 += d * d
      r2 += b[i] * b[i]
      m = Math.max(m, Math.abs(d))
    }
    rel.push(Math.sqrt(d2) / Math.max(Math.sqrt(r2), 1e-30))
    abs.push(m)
  }
  const mean = (xs: number[]) => (xs.length ? xs.reduce((x, y) => x + y, 0) / xs.length : 0)
  const max = (xs: number[]) => (xs.length ? Math.max(...xs) : 0)
  return {
    steps,
    relL2: { mean: round(mean(rel), 8), max: round(max(rel), 8) },
    maxAbs: { mean: round(mean(abs), 6), max: round(max(abs), 6) }
  }
}

/** Index of the first differing token, or -1 when the sequences are equal. */
export function firstDivergence(a: readonly number[], b: readonly number[]): number {
  const n = Math.max(a.length, b.length)
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return i
  return -1
}
