/**
 * Injected network delay for WAN benchmarks and tests (issue 18 item 4): this VM has no
 * `tc netem`, so a host can delay every byte it sends on its TCP connections by a fixed one-way
 * delay and, optionally, pace them at a link bandwidth. When every host of a swarm (peers and
 * client) sends with one-way delay RTT/2, every link has round trip RTT. The bytes, their order
 * and everything above TCP (Noise, yamux, protobuf) are unchanged: only when they leave changes.
 *
 * Configured per host (HostInit.linkDelay) or, for node processes a benchmark starts, through the
 * environment: LAYERSWARM_LINK_DELAY_MS (one-way, ms) and LAYERSWARM_LINK_MBPS (megabits/s).
 */
import type { Socket } from 'node:net'
import type { MultiaddrConnection } from '@libp2p/interface'
import { InvalidLinkDelayError } from './errors.js'

export interface LinkDelay {
  /** Added to every byte this host sends (one way), in ms. */
  readonly oneWayMs: number
  /** Pace sends at this rate (megabits per second); 0 or absent: no bandwidth limit. */
  readonly megabitsPerSecond?: number
}

export const LINK_DELAY_ENV = 'LAYERSWARM_LINK_DELAY_MS'
export const LINK_MBPS_ENV = 'LAYERSWARM_LINK_MBPS'

/** Validate a link delay; undefined when it adds nothing. */
export function checkLinkDelay(d: LinkDelay | undefined): LinkDelay | undefined {
  if (d === undefined) return undefined
  const mbps = d.megabitsPerSecond ?? 0
  if (!Number.isFinite(d.oneWayMs) || d.oneWayMs < 0)
    throw new InvalidLinkDelayError(`link one-way delay must be a finite number of ms ≥ 0, got ${d.oneWayMs}`)
  if (!Number.isFinite(mbps) || mbps < 0)
    throw new InvalidLinkDelayError(`link bandwidth must be a finite number of Mbit/s ≥ 0, got ${mbps}`)
  return d.oneWayMs === 0 && mbps === 0 ? undefined : { oneWayMs: d.oneWayMs, megabitsPerSecond: mbps }
}

/** The delay the environment asks for (node processes started by `bench wan`), if any. */
export function linkDelayFromEnv(env: NodeJS.ProcessEnv = process.env): LinkDelay | undefined {
  const ms = env[LINK_DELAY_ENV]
  const mbps = env[LINK_MBPS_ENV]
  if ((ms === undefined || ms === '') && (mbps === undefined || mbps === '')) return undefined
  return checkLinkDelay({ oneWayMs: Number(ms || 0), megabitsPerSecond: Number(mbps || 0) })
}

interface Queued {
  readonly bytes: Uint8Array
  readonly dueMs: number
}

interface DelayableConnection {
  socket?: Socket
  sendData(data: Iterable<Uint8Array> & { byteLength: number; subarray(): Uint8Array }): {
    sentBytes: number
    canSendMore: boolean
  }
  sendClose(options?: unknown): Promise<void>
}

/**
 * Hold each chunk @libp2p/tcp would write until its due time: sent now + serialisation at the
 * link rate (after the chunks before it) + the one-way delay. One timer drains the queue in
 * order, so bytes leave in the order they were sent. A close waits for the queue to drain, as a
 * FIN follows the data on a real link. Backpressure is not simulated (the queue is in memory).
 */
export function delayWrites(maConn: MultiaddrConnection, delay: LinkDelay): MultiaddrConnection {
  const conn = maConn as unknown as DelayableConnection
  const socket = conn.socket
  if (socket === undefined || typeof socket.write !== 'function') return maConn
  const bytesPerMs = (delay.megabitsPerSecond ?? 0) > 0 ? ((delay.megabitsPerSecond as number) * 1e6) / 8 / 1000 : 0
  const queue: Queued[] = []
  let head = 0
  let wireFreeAtMs = 0
  let timer: NodeJS.Timeout | undefined
  let drained: (() => void) | undefined
  const flush = (): void => {
    timer = undefined
    const now = performance.now()
    while (head < queue.length && queue[head].dueMs <= now + 0.5) {
      const { bytes } = queue[head++]
      if (!socket.destroyed && !socket.writableEnded) socket.write(bytes)
    }
    if (head === queue.length) {
      queue.length = 0
      head = 0
      drained?.()
      drained = undefined
    } else schedule()
  }
  const schedule = (): void => {
    if (timer !== undefined || head >= queue.length) return
    timer = setTimeout(flush, Math.max(0, queue[head].dueMs - performance.now()))
  }
  conn.sendData = (data) => {
    const bytes = data.subarray().slice() // our own copy: the caller may reuse its buffers
    const now = performance.now()
    const departMs = bytesPerMs > 0 ? Math.max(now, wireFreeAtMs) + bytes.byteLength / bytesPerMs : now
    wireFreeAtMs = departMs
    queue.push({ bytes, dueMs: departMs + delay.oneWayMs })
    schedule()
    return { sentBytes: data.byteLength, canSendMore: true }
  }
  const close = conn.sendClose.bind(conn)
  conn.sendClose = async (options) => {
    if (head < queue.length) await new Promise<void>((resolve) => (drained = resolve))
    await close(options)
  }
  return maConn
}
