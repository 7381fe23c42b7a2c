import protobuf from 'protobufjs'
import { describe, expect, it } from 'vitest'
import {
  type Announcement,
  decodeAnnouncement,
  decodeInfoResponse,
  encodeAnnouncement,
  encodeInfoResponse,
  type InfoResponse,
  MalformedMessageError,
  protoPath
} from '../../protocol/index.js'
import { MAX_QUEUED_STEPS_FIELD } from '../../protocol/limits.js'

// queued_steps (issue #18): a node's batch queue length in InfoResponse (field 40) and
// Announcement (field 12); absent from older peers (read as none), capped against hostile values.

const info: InfoResponse = {
  modelId: 'model-1',
  version: '1.0.0',
  nLayers: 8,
  dim: 64,
  start: 2,
  end: 6,
  throughput: 42,
  freeCacheTokens: 1000,
  maxSessions: 4,
  activeSessions: 3,
  wireDtypes: ['f32'],
  x25519PublicKey: new Uint8Array(0)
}

const announcement: Announcement = {
  peerId: '12D3KooWexample',
  modelId: 'model-1',
  start: 0,
  end: 4,
  throughput: 10,
  freeCacheTokens: 512,
  wireDtypes: ['f32'],
  version: '1',
  addrs: ['/ip4/127.0.0.1/tcp/1'],
  issuedAtMs: 1_000,
  expiresAtMs: 2_000
}

describe('queued_steps on the wire', () => {
  it('round-trips in info and announcements; 0 and absent both read as none', () => {
    expect(decodeInfoResponse(encodeInfoResponse({ ...info, queuedSteps: 7 })).queuedSteps).toBe(7)
    expect(decodeInfoResponse(encodeInfoResponse({ ...info, queuedSteps: 0 })).queuedSteps).toBeUndefined()
    expect(decodeInfoResponse(encodeInfoResponse(info))).toEqual(info) // an older peer's info
    expect(decodeAnnouncement(encodeAnnouncement({ ...announcement, queuedSteps: 3 })).queuedSteps).toBe(3)
    expect(decodeAnnouncement(encodeAnnouncement(announcement))).toEqual(announcement)
  })

  it('a value past the cap is MALFORMED, on encode and on decode', async () => {
    const big = MAX_QUEUED_STEPS_FIELD + 1
    expect(() => encodeInfoResponse({ ...info, queuedSteps: big })).toThrow(MalformedMessageError)
    expect(() => encodeAnnouncement({ ...announcement, queuedSteps: big })).toThrow(MalformedMessageError)
    // a hostile peer writing the field itself
    const root = await protobuf.load(protoPath())
    const T = root.lookupType('layerswarm.v1.InfoResponse')
    const wire = T.encode(
      T.fromObject({ ...info, wireDtypes: [0], queuedSteps: big, x25519PublicKey: new Uint8Array(0) })
    ).finish()
    expect(() => decodeInfoResponse(wire)).toThrow(MalformedMessageError)
  })
})
