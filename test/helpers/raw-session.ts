/**
 * A hostile peer's end of a /layerswarm/session stream: requests are protobuf-encoded straight
 * from wire objects, skipping the codecs' own validation, and raw bytes can be written without
 * framing, so tests can send what a well-behaved peer never would.
 */
import type { Stream } from '@libp2p/interface'
import type { Multiaddr } from '@multiformats/multiaddr'
import {
  createMessageChannel,
  decodeSessionResponse,
  type Host,
  type MessageChannel,
  SESSION_PROTOCOL,
  SESSION_STREAM_LIMITS,
  type SessionResponse
} from '../../protocol/index.js'
import { schema } from '../../protocol/schema.js'

export interface RawSession {
  readonly stream: Stream
  /** Sends one frame holding `wire` encoded as a SessionRequest, unchecked. */
  send(wire: Record<string, unknown>): Promise<void>
  /** Sends one well-framed frame of arbitrary bytes. */
  sendFrame(bytes: Uint8Array): Promise<void>
  /** Writes bytes with no framing at all (length prefixes of our own making). */
  sendRaw(bytes: Uint8Array): void
  /** The next response, or undefined once the node closed its side. */
  recv(): Promise<SessionResponse | undefined>
  /** send + recv. */
  request(wire: Record<string, unknown>): Promise<SessionResponse | undefined>
  /** Closes our writable side. */
  close(): Promise<void>
}

export async function openRawSession(host: Host, target: Multiaddr[]): Promise<RawSession> {
  const stream = await host.dialProtocol(target, SESSION_PROTOCOL, SESSION_STREAM_LIMITS)
  const channel: MessageChannel = createMessageChannel(stream)
  const raw: RawSession = {
    stream,
    send: (wire) => channel.write(schema.SessionRequest.encode(wire).finish()),
    sendFrame: (bytes) => channel.write(bytes),
    sendRaw: (bytes) => {
      stream.send(bytes)
    },
    async recv() {
      const bytes = await channel.read({ signal: AbortSignal.timeout(20_000) })
      return bytes === undefined ? undefined : decodeSessionResponse(bytes)
    },
    async request(wire) {
      await raw.send(wire)
      return await raw.recv()
    },
    close: () => channel.close()
  }
  return raw
}

/** Unsigned LEB128, the frame length prefix. */
export function varint(value: number): Uint8Array {
  const out: number[] = []
  while (value >= 0x80) {
    out.push((value % 0x80) | 0x80)
    value = Math.floor(value / 0x80)
  }
  out.push(value)
  return Uint8Array.from(out)
}

/** Deterministic bytes (xorshift32), so a failing garbage case can be replayed. */
export function garbage(n: number, seed: number): Uint8Array {
  const out = new Uint8Array(n)
  let x = seed >>> 0 || 1
  for (let i = 0; i < n; i++) {
    x ^= x << 13
    x ^= x >>> 17
    x ^= x << 5
    out[i] = x & 0xff
  }
  return out
}

/** The bytes of a Float32Array, as a tensor's data field carries them (little-endian hosts). */
export function f32Data(values: Float32Array): Uint8Array {
  return new Uint8Array(values.buffer.slice(values.byteOffset, values.byteOffset + values.byteLength))
}
