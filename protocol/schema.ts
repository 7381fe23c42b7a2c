/**
 * The messages of layerswarm.proto (docs/protocol.md), from the code protobufjs's CLI generates from it
 * (`npm run gen:wire`: protocol/generated/, committed and checked by
 * test/protocol/generated-wire.test.ts; issue 36 step 4). Each entry pairs the generated encoder
 * and decoder with the table the allocation-free scan walks (protocol/wire-scan.ts) before any
 * decode. Nothing is parsed at run time; the codecs (protocol/*-codec.ts, messages.ts) validate.
 */
import type { Writer } from 'protobufjs'
import { layerswarm } from './generated/layerswarm.js'
import { WIRE_SCAN_MESSAGES } from './generated/layerswarm-scan.js'
import type { WireScanMessage } from './wire-scan-types.js'

const v1 = layerswarm.v1

/** Generated message classes as the codecs use them: encode, decode, and the scan table. */
export interface WireMessageType<Properties, Decoded> extends WireScanMessage {
  encode(message: Properties): Writer
  decode(bytes: Uint8Array): Decoded
}

interface GeneratedClass<Properties, Decoded> {
  encode(message: Properties, writer?: Writer): Writer
  decode(bytes: Uint8Array): Decoded
}

function messageType<P, D>(name: string, generated: GeneratedClass<P, D>): WireMessageType<P, D> {
  const table = WIRE_SCAN_MESSAGES[name]
  return {
    name,
    fieldsById: table.fieldsById,
    encode: (message) => generated.encode(message),
    decode: (bytes) => generated.decode(bytes)
  }
}

/** Properties (what we encode) and decoded message of each generated class. */
type Message<C> = C extends GeneratedClass<infer P, infer D> ? WireMessageType<P, D> : never

export const schema = {
  Tensor: messageType('Tensor', v1.Tensor) as Message<typeof v1.Tensor>,
  InfoRequest: messageType('InfoRequest', v1.InfoRequest) as Message<typeof v1.InfoRequest>,
  InfoResponse: messageType('InfoResponse', v1.InfoResponse) as Message<typeof v1.InfoResponse>,
  SessionRequest: messageType('SessionRequest', v1.SessionRequest) as Message<typeof v1.SessionRequest>,
  SessionResponse: messageType('SessionResponse', v1.SessionResponse) as Message<typeof v1.SessionResponse>,
  Announcement: messageType('Announcement', v1.Announcement) as Message<typeof v1.Announcement>,
  SignedAnnouncement: messageType('SignedAnnouncement', v1.SignedAnnouncement) as Message<typeof v1.SignedAnnouncement>,
  AnnouncementsRequest: messageType('AnnouncementsRequest', v1.AnnouncementsRequest) as Message<typeof v1.AnnouncementsRequest>,
  AnnouncementsResponse: messageType('AnnouncementsResponse', v1.AnnouncementsResponse) as Message<
    typeof v1.AnnouncementsResponse
  >,
  KvMoveRequest: messageType('KvMoveRequest', v1.KvMoveRequest) as Message<typeof v1.KvMoveRequest>,
  KvMoveResponse: messageType('KvMoveResponse', v1.KvMoveResponse) as Message<typeof v1.KvMoveResponse>
}

/** The generated message types (`wire.SessionRequest.$Properties`...), for the codecs. */
export import wire = layerswarm.v1

/** The enum values as declared in the .proto (own names only), to check the TS constants against. */
export function protoEnumValues(name: 'DType' | 'ErrorCode'): Record<string, number> {
  return { ...(v1[name] as unknown as Record<string, number>) }
}
