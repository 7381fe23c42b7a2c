import {
  createMessageChannel,
  decodeWeightsRequest,
  encodeWeightsResponse,
  type Host,
  MAX_WEIGHTS_REQUEST_BYTES,
  MAX_WEIGHTS_RESPONSE_BYTES,
  MalformedMessageError,
  REQUEST_STREAM_LIMITS,
  WEIGHTS_PROTOCOL,
  type WeightsResponseMessage
} from '../../protocol/index.js'
import type { WeightsSource } from '../../shards/index.js'
import { ByteRate } from './bandwidth.js'

/*
 * Issue 33, item 2: every node serves the chunks it holds (a whole file, or the span it fetched),
 * under an upload cap per peer and in total. A developer's node may flip a byte of every chunk it
 * serves (`--tamper-weights`), the liar the fetcher's checks are tested against.
 */

export interface SeederOptions {
  /** Upload cap over all peers, bytes/s (0: none). */
  readonly maxUploadBytesPerSecond?: number
  /** Upload cap per peer, bytes/s (0: none). */
  readonly maxPeerUploadBytesPerSecond?: number
  /** Flip one byte of every chunk served (a lying seeder, for tests and the bench). */
  readonly tamper?: boolean
  readonly log?: (event: Record<string, unknown>) => void
  readonly signal?: AbortSignal
}

export interface Seeder {
  /** Chunks and bytes served so far. */
  stats(): { chunks: number; bytes: number }
  /** Serve another model (e.g. one this node fetched later). */
  add(source: WeightsSource): void
  stop(): Promise<void>
}

/** Register /layerswarm/weights on `host`, serving `sources`. */
export async function serveWeights(host: Host, sources: readonly WeightsSource[], o: SeederOptions = {}): Promise<Seeder> {
  const byId = new Map(sources.map((s) => [s.id, s]))
  const total = new ByteRate(o.maxUploadBytesPerSecond ?? 0)
  const perPeer = new Map<string, ByteRate>()
  let chunks = 0
  let bytes = 0
  const respond = async (req: Uint8Array, peer: string, signal?: AbortSignal): Promise<WeightsResponseMessage> => {
    let r: ReturnType<typeof decodeWeightsRequest>
    try {
      r = decodeWeightsRequest(req)
    } catch (err) {
      return { errorCode: 'BAD_REQUEST', errorMessage: (err as Error).message }
    }
    const source = byId.get(r.contentId)
    if (!source) return { errorCode: 'NOT_FOUND', errorMessage: `this peer holds no ${r.contentId}` }
    if (r.kind === 'manifest') return { manifest: source.manifest }
    if (r.kind === 'have') return { have: source.haveBitmap() }
    if (!source.has(r.chunk)) return { errorCode: 'NOT_HELD', errorMessage: `chunk ${r.chunk} is not held here` }
    let data = source.readChunk(r.chunk)
    let rate = perPeer.get(peer)
    if (!rate) {
      rate = new ByteRate(o.maxPeerUploadBytesPerSecond ?? 0)
      perPeer.set(peer, rate)
    }
    await rate.take(data.length, { signal })
    await total.take(data.length, { signal })
    if (o.tamper) {
      data = Uint8Array.from(data)
      data[data.length >> 1] ^= 0x01
    }
    chunks++
    bytes += data.length
    return { chunk: data }
  }
  await host.handle(
    WEIGHTS_PROTOCOL,
    async (stream, connection) => {
      // a request is tiny: its cap is checked on the length prefix; only the reply may be a chunk
      const channel = createMessageChannel(stream, {
        maxMessageBytes: MAX_WEIGHTS_RESPONSE_BYTES,
        frameCap: () => MAX_WEIGHTS_REQUEST_BYTES
      })
      try {
        const req = await channel.read({ signal: o.signal })
        if (req === undefined) throw new MalformedMessageError('weights: stream closed without a request')
        const res = await respond(req, connection.remotePeer.toString(), o.signal)
        await channel.write(encodeWeightsResponse(res), { signal: o.signal })
        await channel.close({ signal: o.signal })
      } catch (err) {
        stream.abort(err as Error)
        o.log?.({ event: 'weights-serve-error', message: (err as Error).message })
      }
    },
    REQUEST_STREAM_LIMITS
  )
  return {
    stats: () => ({ chunks, bytes }),
    add: (s) => {
      byId.set(s.id, s)
    },
    async stop() {
      await host.unhandle(WEIGHTS_PROTOCOL)
      for (const s of byId.values()) s.close()
    }
  }
}
