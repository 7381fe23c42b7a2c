import type { AbortOptions, PeerId } from '@libp2p/interface'
import type { Multiaddr } from '@multiformats/multiaddr'
import { request } from './framing.js'
import type { Host } from './host.js'
import { INFO_PROTOCOL } from './ids.js'
import { MAX_INFO_RESPONSE_BYTES } from './limits.js'
import { decodeInfoResponse, encodeInfoRequest } from './messages.js'
import type { InfoResponse } from './types.js'

/** Ask a peer what it serves; also returns the round trip in ms (stream open included). */
export async function fetchInfo(
  host: Host,
  target: PeerId | Multiaddr | Multiaddr[],
  { signal }: AbortOptions = {}
): Promise<{ info: InfoResponse; rttMs: number }> {
  const t0 = performance.now()
  // an InfoResponse is a few hundred bytes: a longer reply is refused on its length prefix
  const bytes = await request(host, target, INFO_PROTOCOL, encodeInfoRequest(), {
    signal,
    maxMessageBytes: MAX_INFO_RESPONSE_BYTES
  })
  const rttMs = performance.now() - t0
  return { info: decodeInfoResponse(bytes), rttMs }
}
