/**
 * The attack lanes of the node fuzz (issue #17). Each attacking host runs one lane per session
 * request type, each on its own session stream, and a few info lanes, all at once: the node
 * serves a stream's requests one at a time, so one lane per stream keeps it busy on all of them.
 * A session lane writes a window of length-prefixed frames in one stream write (as a real
 * attacker would; the node must split frames wherever the chunks fall), then reads the window's
 * replies. A frame counts as delivered once the node answered it or refused it at stream level;
 * frames written behind a stream-ending frame were never read by the node, so they do not count
 * and fresh frames are sent in their place on a new stream.
 */
import type { Multiaddr } from '@multiformats/multiaddr'
import {
  createMessageChannel,
  decodeSessionResponse,
  type Host,
  INFO_PROTOCOL,
  type MessageChannel,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS
} from '../../protocol/index.js'
import { schema } from '../../protocol/schema.js'
import { encode, type FrameContext, generate, mutate, validRequest } from './frames.js'
import { reflected } from './reflection.js'

/** Frames written at once on a session stream: a frame that ends its stream loses the ones behind it. */
export const WINDOW = 4
/** Info streams each attacker keeps open at once (the protocol takes one request per stream). */
export const INFO_PARALLEL = 4
/** Dials of a fresh stream before a lane gives up. */
const REOPEN_ATTEMPTS = 20
/** A reply the node owes that takes longer is counted as a timeout (the stream is then dropped). */
const REPLY_TIMEOUT_MS = 60_000

/** Counters shared by every lane of a run. */
export interface LaneTally {
  /** Frames the node read (answered, or refused at stream level), per message type. */
  readonly delivered: Record<string, number>
  readonly replies: Record<string, number>
  readonly mutations: Record<string, number>
  framesAnswered: number
  /** Frames written behind a stream-ending frame: never read by the node, replaced by fresh ones. */
  framesDropped: number
  streamsEnded: number
  /** New streams the node ended before their first reply (per-peer limits); the lane dialled again. */
  reopenRefused: number
  /** Replies that did not come within REPLY_TIMEOUT_MS. */
  replyTimeouts: number
  /** Replies our own decoder refused (the node must only send well-formed ones). */
  undecodableReplies: number
}

export function createTally(): LaneTally {
  return {
    delivered: {},
    replies: {},
    mutations: {},
    framesAnswered: 0,
    framesDropped: 0,
    streamsEnded: 0,
    reopenRefused: 0,
    replyTimeouts: 0,
    undecodableReplies: 0
  }
}

export interface LaneInit {
  readonly host: Host
  readonly target: Multiaddr[]
  readonly modelId: string
  readonly ctx: FrameContext
  readonly tally: LaneTally
  /** Frames this lane delivers. */
  readonly quota: number
  readonly signal?: AbortSignal
  /** Called after each window (progress lines, the honest session's pace). */
  readonly onProgress?: () => void
}

const count = (m: Record<string, number>, k: string, n = 1): void => {
  m[k] = (m[k] ?? 0) + n
}

function varint(n: number): number[] {
  const out: number[] = []
  while (n >= 128) {
    out.push((n % 128) | 0x80)
    n = Math.floor(n / 128)
  }
  out.push(n)
  return out
}

/** Frames as one buffer of length-prefixed frames (the framing of protocol/framing.ts). */
export function lengthPrefixed(frames: readonly Uint8Array[]): Uint8Array {
  const prefixes = frames.map((f) => varint(f.byteLength))
  const out = new Uint8Array(frames.reduce((n, f, i) => n + f.byteLength + prefixes[i].length, 0))
  let at = 0
  frames.forEach((f, i) => {
    out.set(prefixes[i], at)
    out.set(f, at + prefixes[i].length)
    at += prefixes[i].length + f.byteLength
  })
  return out
}

/** The channel's next frame; after `ms` without one the channel is reset and this rejects with a TimeoutError. */
async function readWithin(ch: MessageChannel, ms: number): Promise<Uint8Array | undefined> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const err = new DOMException(`no reply within ${ms} ms`, 'TimeoutError')
      ch.abort(err)
      reject(err)
    }, ms)
  })
  try {
    return await Promise.race([ch.read(), late])
  } finally {
    clearTimeout(timer)
  }
}

/** Writes raw bytes on the channel's stream, waiting for the stream to drain when it asks. */
async function writeRaw(ch: MessageChannel, bytes: Uint8Array): Promise<void> {
  if (ch.stream.send(bytes)) return
  await new Promise<void>((resolve) => {
    const done = (): void => {
      ch.stream.removeEventListener('drain', done)
      ch.stream.removeEventListener('close', done)
      resolve()
    }
    ch.stream.addEventListener('drain', done)
    ch.stream.addEventListener('close', done)
  })
}

/** One session request type from one attacker, on one stream at a time, until `quota` frames were delivered. */
export async function sessionLane(type: string, o: LaneInit): Promise<void> {
  const { ctx, tally } = o
  let channel: MessageChannel | undefined
  let delivered = 0
  let requestId = 2
  const reopen = async (): Promise<MessageChannel> => {
    for (let attempt = 0; ; attempt++) {
      try {
        const ch = createMessageChannel(await o.host.dialProtocol(o.target, SESSION_PROTOCOL, SESSION_STREAM_LIMITS))
        // a session of our own, so steps and imports reach their deep paths (a duplicate is fine)
        await ch.write(
          schema.SessionRequest.encode({
            requestId: 1,
            open: { sessionId: 'fz', modelId: o.modelId, start: 1, end: 4, maxLength: 64, wireDtype: 0 }
          }).finish()
        )
        if ((await readWithin(ch, REPLY_TIMEOUT_MS)) === undefined) throw new Error('stream ended at once')
        return ch
      } catch (err) {
        // the node may end a new stream at once (its per-peer limits): back off and dial again
        tally.reopenRefused++
        if (attempt >= REOPEN_ATTEMPTS || o.signal?.aborted) throw err
        await new Promise((r) => setTimeout(r, 50 * (attempt + 1)))
      }
    }
  }
  try {
    while (delivered < o.quota && !o.signal?.aborted) {
      const ch = channel ?? (await reopen())
      channel = ch
      const n = Math.min(WINDOW, o.quota - delivered)
      const frames: Uint8Array[] = []
      for (let i = 0; i < n; i++) {
        // a quarter are valid requests at their limits (the deep paths), the rest schema-random
        const obj = ctx.rng() < 0.25 ? validRequest(type, ctx, o.modelId) : generate(reflected.SessionRequest, ctx, 0, type)
        // mostly a valid request id, so the node answers the request and keeps the stream
        if (ctx.rng() < 0.95) obj.requestId = requestId++
        const frame = mutate(encode(reflected.SessionRequest, obj, ctx), ctx)
        count(tally.mutations, frame.mutation)
        frames.push(frame.bytes)
      }
      void writeRaw(ch, lengthPrefixed(frames)).catch(() => {})
      let read = 0
      for (; read < n; read++) {
        let bytes: Uint8Array | undefined
        try {
          bytes = await readWithin(ch, REPLY_TIMEOUT_MS)
        } catch (err) {
          if ((err as Error).name === 'TimeoutError') tally.replyTimeouts++
          bytes = undefined
        }
        if (bytes === undefined) {
          // the stream ended without a stream-level reply: the frame in front was read and refused
          read++
          tally.streamsEnded++
          channel = undefined
          break
        }
        tally.framesAnswered++
        let ended = false
        try {
          const res = decodeSessionResponse(bytes)
          count(tally.replies, res.type === 'error' ? res.error.code : res.type)
          ended = res.type === 'error' && res.requestId === 0
        } catch {
          tally.undecodableReplies++
          ended = true
        }
        if (ended) {
          read++
          tally.streamsEnded++
          channel = undefined
          break
        }
      }
      delivered += read
      count(tally.delivered, type, read)
      tally.framesDropped += n - read
      if (channel === undefined) ch.abort(new Error('fuzz: next stream'))
      o.onProgress?.()
    }
  } finally {
    channel?.abort(new Error('fuzz: done'))
  }
}

/** InfoRequests from one attacker, INFO_PARALLEL streams at a time, until `quota` were delivered. */
export async function infoLanes(o: LaneInit): Promise<void> {
  const { ctx, tally } = o
  let claimed = 0
  const one = async (): Promise<void> => {
    while (claimed < o.quota && !o.signal?.aborted) {
      claimed++
      const frame = mutate(encode(reflected.InfoRequest, generate(reflected.InfoRequest, ctx), ctx), ctx)
      const stream = await o.host.dialProtocol(o.target, INFO_PROTOCOL).catch(() => undefined)
      if (stream === undefined) {
        // refused by the node's per-peer limits: another frame goes in its place
        claimed--
        tally.reopenRefused++
        await new Promise((r) => setTimeout(r, 50))
        continue
      }
      count(tally.mutations, frame.mutation)
      const ch = createMessageChannel(stream)
      await ch.write(frame.bytes).catch(() => {})
      await ch.close().catch(() => {})
      const r = await readWithin(ch, REPLY_TIMEOUT_MS).catch(() => undefined)
      count(tally.replies, r === undefined ? 'info-refused' : 'info-answered')
      if (r !== undefined) tally.framesAnswered++
      count(tally.delivered, 'info')
      ch.abort(new Error('done'))
      o.onProgress?.()
    }
  }
  await Promise.all(Array.from({ length: INFO_PARALLEL }, one))
}
