import type { AbortOptions, PeerId } from '@libp2p/interface'
import { MalformedMessageError } from './errors.js'
import { bytesField, safeUint64, stringField, uint32Field } from './field-checks.js'
import { request } from './framing.js'
import { layerswarm } from './generated/layerswarm.js'
import { WIRE_SCAN_MESSAGES } from './generated/layerswarm-scan.js'
import type { Host } from './host.js'
import { PROTOCOL_VERSION } from './ids.js'
import { MAX_WEIGHTS_PIECES } from './limits.js'
import { decodeWire, encodeWire } from './messages.js'
import type { WireMessageType } from './schema.js'

/*
 * Issue 33: /layerswarm/weights — manifests, held-chunk bitmaps and chunks of a model's weights
 * (layerswarm.proto, "helper weights"). The codecs check shapes; what the bytes mean is checked
 * by the fetcher against the content id (shards/formats/weights-manifest.ts).
 */

/** One WeightsRequest, one WeightsResponse per stream. */
export const WEIGHTS_PROTOCOL = `/layerswarm/weights/${PROTOCOL_VERSION}`

/** A request is a few dozen bytes. */
export const MAX_WEIGHTS_REQUEST_BYTES = 256

/** A response carries at most one chunk (≤ 16 MiB) or a manifest. */
export const MAX_WEIGHTS_RESPONSE_BYTES = 24 << 20

export type WeightsRequestKind = 'manifest' | 'have' | 'chunk'
const KINDS: readonly WeightsRequestKind[] = ['manifest', 'have', 'chunk']

export interface WeightsRequestMessage {
  readonly contentId: string
  readonly kind: WeightsRequestKind
  readonly chunk: number
}

/** The wire form of a manifest (the same fields as shards' WeightsManifest). */
export interface WireWeightsManifest {
  readonly fileBytes: number
  readonly chunkBytes: number
  readonly legacyModelId: string
  readonly pieces: ReadonlyArray<{ name: string; offsetBytes: number; sizeBytes: number; chunkHashes: Uint8Array }>
}

export interface WeightsResponseMessage {
  readonly manifest?: WireWeightsManifest
  readonly have?: Uint8Array
  readonly chunk?: Uint8Array
  readonly errorCode?: string
  readonly errorMessage?: string
}

const v1 = layerswarm.v1
function messageType<P, D>(
  name: string,
  g: { encode(m: P): import('protobufjs').Writer; decode(b: Uint8Array): D }
): WireMessageType<P, D> {
  return { name, fieldsById: WIRE_SCAN_MESSAGES[name].fieldsById, encode: (m) => g.encode(m), decode: (b) => g.decode(b) }
}
const RequestType = messageType('WeightsRequest', v1.WeightsRequest)
const ResponseType = messageType('WeightsResponse', v1.WeightsResponse)

export function encodeWeightsRequest(r: WeightsRequestMessage): Uint8Array {
  return encodeWire(RequestType, { contentId: r.contentId, kind: KINDS.indexOf(r.kind) + 1, chunk: r.chunk })
}

export function decodeWeightsRequest(bytes: Uint8Array): WeightsRequestMessage {
  const m = decodeWire(RequestType, bytes, { maxMessageBytes: MAX_WEIGHTS_REQUEST_BYTES })
  const kind = KINDS[uint32Field(m.kind, 'WeightsRequest.kind', 1, KINDS.length) - 1]
  return {
    contentId: stringField(m.contentId, 'WeightsRequest.content_id', { max: 80, token: true }),
    kind,
    chunk: uint32Field(m.chunk, 'WeightsRequest.chunk')
  }
}

export function encodeWeightsResponse(r: WeightsResponseMessage): Uint8Array {
  return encodeWire(ResponseType, {
    manifest: r.manifest
      ? {
          fileBytes: r.manifest.fileBytes,
          chunkBytes: r.manifest.chunkBytes,
          legacyModelId: r.manifest.legacyModelId,
          pieces: r.manifest.pieces.map((p) => ({
            name: p.name,
            offset: p.offsetBytes,
            sizeBytes: p.sizeBytes,
            chunkHashes: p.chunkHashes
          }))
        }
      : null,
    have: r.have,
    chunk: r.chunk,
    errorCode: r.errorCode ?? '',
    errorMessage: r.errorMessage ?? ''
  })
}

export function decodeWeightsResponse(bytes: Uint8Array): WeightsResponseMessage {
  const m = decodeWire(ResponseType, bytes, { maxMessageBytes: MAX_WEIGHTS_RESPONSE_BYTES })
  const errorCode = stringField(m.errorCode, 'WeightsResponse.error_code', { max: 32, allowEmpty: true, token: true })
  const out: { -readonly [K in keyof WeightsResponseMessage]: WeightsResponseMessage[K] } = {}
  if (errorCode) {
    out.errorCode = errorCode
    out.errorMessage = stringField(m.errorMessage, 'WeightsResponse.error_message', { max: 1024, allowEmpty: true })
  }
  if (m.manifest) {
    const w = m.manifest
    if ((w.pieces?.length ?? 0) > MAX_WEIGHTS_PIECES) throw new MalformedMessageError('WeightsManifest.pieces: too many')
    out.manifest = {
      fileBytes: safeUint64(w.fileBytes, 'WeightsManifest.file_bytes'),
      chunkBytes: uint32Field(w.chunkBytes, 'WeightsManifest.chunk_bytes', 1),
      legacyModelId: stringField(w.legacyModelId, 'WeightsManifest.legacy_model_id', { max: 80, token: true }),
      pieces: (w.pieces ?? []).map((p, i) => ({
        name: stringField(p.name, `WeightsManifest.pieces[${i}].name`, { max: 256 }),
        offsetBytes: safeUint64(p.offset, `WeightsManifest.pieces[${i}].offset`),
        sizeBytes: safeUint64(p.sizeBytes, `WeightsManifest.pieces[${i}].size_bytes`),
        chunkHashes: bytesField(p.chunkHashes, `WeightsManifest.pieces[${i}].chunk_hashes`)
      }))
    }
  }
  const have = bytesField(m.have, 'WeightsResponse.have')
  if (have.length > 0) out.have = have
  const chunk = bytesField(m.chunk, 'WeightsResponse.chunk')
  if (chunk.length > 0) out.chunk = chunk
  return out
}

/** Ask one peer one weights question. */
export async function requestWeights(
  host: Host,
  peer: PeerId,
  req: WeightsRequestMessage,
  { signal }: AbortOptions = {}
): Promise<WeightsResponseMessage> {
  const bytes = await request(host, peer, WEIGHTS_PROTOCOL, encodeWeightsRequest(req), {
    signal,
    maxMessageBytes: MAX_WEIGHTS_RESPONSE_BYTES
  })
  return decodeWeightsResponse(bytes)
}
