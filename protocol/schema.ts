/**
 * Loads layerswarm.proto at runtime (the .proto is the source of truth, docs/protocol.md).
 * The file is looked up next to this module and then in `<ancestor>/protocol/`, so the same
 * code works from source (vitest) and from the compiled dist/protocol/*.js.
 */
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import protobuf from 'protobufjs'
import { ProtoFileNotFoundError } from './errors.js'

export const PROTO_FILE_NAME = 'layerswarm.proto'
const PACKAGE = 'layerswarm.v1'

/** Absolute path of layerswarm.proto, or throws if it cannot be found. */
export function protoPath(): string {
  const here = dirname(fileURLToPath(import.meta.url))
  const beside = join(here, PROTO_FILE_NAME)
  if (existsSync(beside)) return beside
  let dir = here
  for (let i = 0; i < 8; i++) {
    const candidate = join(dir, 'protocol', PROTO_FILE_NAME)
    if (existsSync(candidate) && existsSync(join(dir, 'package.json'))) return candidate
    const parent = dirname(dir)
    if (parent === dir) break
    dir = parent
  }
  throw new ProtoFileNotFoundError(`cannot find protocol/${PROTO_FILE_NAME} above ${here}`)
}

// keepCase false: fields become camelCase, which is what the TS interfaces use.
const root = protobuf.parse(readFileSync(protoPath(), 'utf8'), { keepCase: false }).root
// resolved now, so wire-scan.ts sees each field's message type before the first decode does
root.resolveAll()

function type(name: string): protobuf.Type {
  return root.lookupType(`${PACKAGE}.${name}`)
}

export const schema = {
  Tensor: type('Tensor'),
  InfoRequest: type('InfoRequest'),
  InfoResponse: type('InfoResponse'),
  SessionRequest: type('SessionRequest'),
  SessionResponse: type('SessionResponse'),
  Announcement: type('Announcement'),
  SignedAnnouncement: type('SignedAnnouncement'),
  AnnouncementsRequest: type('AnnouncementsRequest'),
  AnnouncementsResponse: type('AnnouncementsResponse')
}

/** The enum values as declared in the .proto, to check the TS constants against. */
export function protoEnumValues(name: 'DType' | 'ErrorCode'): Record<string, number> {
  return root.lookupEnum(`${PACKAGE}.${name}`).values
}
