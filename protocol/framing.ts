/**
 * Length-prefixed frames (unsigned varint length, then the protobuf bytes) over a libp2p v3
 * stream, with a hard cap checked on the length prefix BEFORE the body is buffered or
 * decoded (docs/protocol.md). Built on @libp2p/utils' lpStream, which reads v3 streams
 * (EventTarget + send()) directly.
 */
import type { AbortOptions, Libp2p, PeerId, Stream } from '@libp2p/interface'
import { lpStream } from '@libp2p/utils'
import type { Multiaddr } from '@multiformats/multiaddr'
import { linkSignals } from './abort-link.js'
import type { ByteBudget } from './byte-budget.js'
import { MalformedMessageError, MessageTooLargeError, ProtocolError, RequestTimeoutError } from './errors.js'
import { REQUEST_STREAM_LIMITS } from './ids.js'
import { DEFAULT_MAX_MESSAGE_BYTES, FRAME_DEADLINE_MS, MIN_FRAME_BYTES_PER_SECOND } from './limits.js'

export interface MessageChannelInit {
  /** Largest frame accepted or sent (default 64 MiB). */
  maxMessageBytes?: number
  /**
   * Bytes that may sit unread in front of read() (default 2 × maxMessageBytes + 1 MiB, so
   * one full frame can be pipelined behind another). Beyond it the stream is reset.
   */
  maxBufferedBytes?: number
  /**
   * The cap for the next frame, asked before each read (at most maxMessageBytes): a node gives
   * a peer that holds no session MAX_CONTROL_BYTES, so a stranger's frame is refused on its
   * length prefix, before any of it is buffered.
   */
  frameCap?: () => number
  /** Node-wide bytes in flight: each frame reserves its length until the next read (byte-budget.ts). */
  budget?: ByteBudget
  /** Deadline of a frame from its first byte (default FRAME_DEADLINE_MS + length / MIN_FRAME_BYTES_PER_SECOND). */
  frameDeadlineMs?: number
}

/** How long a frame of `bytes` may take to arrive once it started. */
export function frameDeadlineMs(bytes: number, baseMs = FRAME_DEADLINE_MS): number {
  return baseMs + Math.ceil((bytes / MIN_FRAME_BYTES_PER_SECOND) * 1000)
}

/** One framed, bidirectional message channel over one stream. Use a single reader. */
export interface MessageChannel {
  readonly stream: Stream
  readonly maxMessageBytes: number
  /** Sends one frame; throws MessageTooLargeError locally if it exceeds the cap. */
  write(bytes: Uint8Array, options?: AbortOptions): Promise<void>
  /** Next frame, or undefined when the remote closed its side cleanly between frames. */
  read(options?: AbortOptions): Promise<Uint8Array | undefined>
  /** Closes our writable side after queued frames are sent; reading continues. The last frame read leaves the budget. */
  close(options?: AbortOptions): Promise<void>
  /** Resets the stream in both directions. */
  abort(err: Error): void
}

interface ByteList {
  byteLength: number
  get(index: number): number
}

function varintLength(value: number): number {
  let n = 1
  while (value >= 128) {
    value = Math.floor(value / 128)
    n++
  }
  return n
}

/**
 * One message per frame over a libp2p stream: a varint length, then the protobuf bytes; a frame
 * longer than the cap is refused before it is buffered.
 *
 * @example
 * ```ts
 * const channel = createMessageChannel(await host.dialProtocol(peer, SESSION_PROTOCOL))
 * await channel.write(encodeSessionRequest(request))
 * const reply = decodeSessionResponse((await channel.read())!)
 * ```
 */
export function createMessageChannel(stream: Stream, init: MessageChannelInit = {}): MessageChannel {
  const maxMessageBytes = init.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES
  if (!Number.isSafeInteger(maxMessageBytes) || maxMessageBytes < 1) throw new RangeError('maxMessageBytes must be >= 1')
  const maxBuffered = init.maxBufferedBytes ?? 2 * maxMessageBytes + 1024 * 1024
  // Bytes that arrive before our listener is attached are held by the stream itself,
  // whose default cap (4 MiB) would reset streams carrying larger frames.
  if (stream.maxReadBufferLength < maxBuffered) stream.maxReadBufferLength = maxBuffered
  const maxLengthBytes = varintLength(maxMessageBytes)
  let lengthBytesSeen = 0
  let frameCap = maxMessageBytes
  const baseDeadlineMs = init.frameDeadlineMs ?? FRAME_DEADLINE_MS
  /** The running read's deadline: armed by the frame's first byte, re-armed once its length is known. */
  let deadline: { controller: AbortController; timer?: NodeJS.Timeout } | undefined
  const arm = (ms: number): void => {
    if (deadline === undefined) return
    clearTimeout(deadline.timer)
    const d = deadline
    d.timer = setTimeout(() => d.controller.abort(new RequestTimeoutError(`frame not complete within ${ms} ms`)), ms)
  }
  let reserved = 0
  const releaseReserved = (): void => {
    if (reserved > 0) init.budget?.release(reserved)
    reserved = 0
  }

  // Our own decoder: it records how far into a length prefix we are (to tell a clean end
  // of stream from a truncated frame) and refuses over-long prefixes itself, since lpStream
  // only checks the prefix length once a varint completes (a run of 0x80 bytes would loop).
  const lengthDecoder = (buf: ByteList): number => {
    if (lengthBytesSeen === 0) arm(baseDeadlineMs)
    lengthBytesSeen = buf.byteLength
    let value = 0
    let scale = 1
    for (let i = 0; i < buf.byteLength; i++) {
      const b = buf.get(i)
      value += (b & 0x7f) * scale
      if ((b & 0x80) === 0) {
        if (value > frameCap) throw new MessageTooLargeError(`frame of ${value} bytes exceeds the ${frameCap} byte cap`)
        init.budget?.reserve(value) // throws BusyError: this stream is refused, the others go on
        reserved = value
        arm(frameDeadlineMs(value, baseDeadlineMs))
        return value
      }
      scale *= 128
    }
    if (buf.byteLength >= maxLengthBytes)
      throw new MessageTooLargeError(`frame length prefix exceeds the ${maxMessageBytes} byte cap`)
    throw new RangeError('incomplete length prefix') // lpStream reads another byte
  }

  const lp = lpStream(stream, {
    maxDataLength: maxMessageBytes,
    maxBufferSize: maxBuffered,
    lengthDecoder,
    maxLengthLength: maxLengthBytes
  })
  let failure: Error | undefined
  let ended = false

  const fail = (err: Error): Error => {
    failure = err
    releaseReserved()
    return err
  }

  return {
    stream,
    maxMessageBytes,

    async write(bytes, { signal } = {}) {
      if (bytes.byteLength > maxMessageBytes) {
        throw new MessageTooLargeError(`refusing to send ${bytes.byteLength} bytes, cap is ${maxMessageBytes}`)
      }
      await lp.write(bytes, { signal })
    },

    async read({ signal } = {}) {
      releaseReserved() // the previous frame was handled: its bytes leave the budget
      if (failure !== undefined) throw failure
      if (ended) return undefined
      lengthBytesSeen = 0
      frameCap = Math.min(maxMessageBytes, init.frameCap?.() ?? maxMessageBytes)
      const controller = new AbortController()
      deadline = { controller }
      // the caller's signal (often a node's long-lived stop signal) aborts the read too, through a
      // listener removed when the read ends (not AbortSignal.any: protocol/abort-link.ts)
      const link = linkSignals([signal], controller)
      try {
        const frame = (await lp.read({ signal: controller.signal })).subarray()
        // Node hands out Buffers; callers get plain Uint8Array views (no copy)
        return frame.constructor === Uint8Array ? frame : new Uint8Array(frame.buffer, frame.byteOffset, frame.byteLength)
      } catch (err) {
        const e = err as Error
        if (controller.signal.aborted && signal?.aborted !== true) {
          // the deadline: a frame dripping in holds the stream and its buffer, so the stream goes
          releaseReserved()
          const timeout = controller.signal.reason as RequestTimeoutError
          stream.abort(timeout)
          throw fail(timeout)
        }
        if (e.name === 'UnexpectedEOFError') {
          if (lengthBytesSeen === 0) {
            ended = true
            return undefined
          }
          throw fail(new MalformedMessageError('stream ended in the middle of a frame', { cause: e }))
        }
        const tooLarge =
          e instanceof MessageTooLargeError || e.name === 'StreamBufferError' || e.name === 'InvalidDataLengthError'
        if (tooLarge || (e instanceof ProtocolError && e.code === 'BUSY')) {
          const refusal = e instanceof ProtocolError ? e : new MessageTooLargeError(e.message, { cause: e })
          // Drop the rest of the frame as it arrives instead of buffering it. yamux keeps
          // granting window, so the sender completes its write and can still read our
          // ErrorReply on the open writable side.
          if (stream.readStatus !== 'closed' && stream.readStatus !== 'closing') stream.closeRead().catch(() => {})
          throw fail(refusal)
        }
        // An abort between frames is harmless; one after part of a frame was consumed (or a
        // stream error) leaves the framing out of step, so the channel is finished.
        if (lengthBytesSeen > 0 || signal?.aborted !== true) fail(e)
        releaseReserved()
        throw e
      } finally {
        link.clear()
        clearTimeout(deadline.timer)
        deadline = undefined
      }
    },

    async close({ signal } = {}) {
      // closing: the last frame read was handled. A server that refused a frame reads no more,
      // so its reservation would otherwise stay in the node-wide budget for good (issue #17: the
      // fuzzed node's budget kept about 80 bytes per frame of streams long gone)
      if (deadline === undefined) releaseReserved() // (a read in progress keeps its frame's)
      await stream.close({ signal })
    },

    abort(err) {
      releaseReserved()
      stream.abort(err)
    }
  }
}

export interface RequestOptions extends AbortOptions {
  maxMessageBytes?: number
}

/**
 * One request, one response (e.g. /layerswarm/info): open a stream, send the frame, close
 * our side, read exactly one frame back.
 */
export async function request(
  node: Pick<Libp2p, 'dialProtocol'>,
  target: PeerId | Multiaddr | Multiaddr[],
  protocol: string,
  bytes: Uint8Array,
  options: RequestOptions = {}
): Promise<Uint8Array> {
  const { signal } = options
  const stream = await node.dialProtocol(target, protocol, { signal, ...REQUEST_STREAM_LIMITS })
  const channel = createMessageChannel(stream, { maxMessageBytes: options.maxMessageBytes })
  try {
    await channel.write(bytes, { signal })
    await channel.close({ signal })
    const reply = await channel.read({ signal })
    if (reply === undefined) throw new MalformedMessageError(`${protocol}: stream closed without a response`)
    return reply
  } catch (err) {
    stream.abort(err as Error)
    throw err
  }
}

export interface ServeRequestOptions extends AbortOptions {
  maxMessageBytes?: number
  /** Called with any failure; the stream has already been reset. */
  onError?(err: Error): void
}

/**
 * The responder side of request(): read one frame, answer with `respond`'s bytes, close.
 * Never throws (a libp2p handler that throws only gets its stream aborted anyway).
 */
export async function serveRequest(
  stream: Stream,
  respond: (request: Uint8Array, signal?: AbortSignal) => Uint8Array | Promise<Uint8Array>,
  options: ServeRequestOptions = {}
): Promise<void> {
  const { signal } = options
  const channel = createMessageChannel(stream, { maxMessageBytes: options.maxMessageBytes })
  try {
    const req = await channel.read({ signal })
    if (req === undefined) throw new MalformedMessageError('stream closed without a request')
    await channel.write(await respond(req, signal), { signal })
    await channel.close({ signal })
  } catch (err) {
    stream.abort(err as Error)
    options.onError?.(err as Error)
  }
}
