import { readFileSync } from 'node:fs'
import protobuf from 'protobufjs'
import { describe, expect, it } from 'vitest'
import { MalformedMessageError } from '../../protocol/errors.js'
import { protoPath } from '../../protocol/proto-path.js'
import { schema } from '../../protocol/schema.js'
import { peekVarintField, REPEATED_LIMITS, scanMessage, topLevelMember } from '../../protocol/wire-scan.js'
import { infoDtypesFlood, lenField, openNextHopsFlood, resultTimingsFlood, varintField } from '../helpers/flood-frames.js'

describe('wire scan (allocation-free checks before decoding)', () => {
  it('has a limit for every repeated field of layerswarm.proto, and no limit for a field that is not there', () => {
    const root = protobuf.parse(readFileSync(protoPath(), 'utf8'), { keepCase: true }).root
    const repeated: string[] = []
    const walk = (ns: protobuf.NamespaceBase): void => {
      for (const obj of ns.nestedArray) {
        if (obj instanceof protobuf.Type) for (const f of obj.fieldsArray) if (f.repeated) repeated.push(`${obj.name}.${f.name}`)
        if (obj instanceof protobuf.Namespace) walk(obj)
      }
    }
    walk(root)
    expect(repeated.sort()).toEqual(Object.keys(REPEATED_LIMITS).sort())
  })

  it('counts entries, packed ones included, and refuses a list over its cap', () => {
    expect(() => scanMessage(schema.SessionRequest, openNextHopsFlood(1, 64))).not.toThrow()
    expect(() => scanMessage(schema.SessionRequest, openNextHopsFlood(1, 65))).toThrow(/next_hops: more than 64 entries/)
    expect(() => scanMessage(schema.SessionResponse, resultTimingsFlood(1, 's', 65))).toThrow(/timings: more than 64/)
    expect(() => scanMessage(schema.InfoResponse, infoDtypesFlood(16))).not.toThrow()
    expect(() => scanMessage(schema.InfoResponse, infoDtypesFlood(17))).toThrow(/wire_dtypes: more than 16/)
  })

  it('refuses wrong wire types, groups, long varints and lengths past the end', () => {
    const bad = [
      Uint8Array.of(0x0a, 0x01, 0x00), // request_id (varint) sent length-delimited
      Uint8Array.of(0x7b), // field 15, wire type 3 (group start)
      Uint8Array.of(0x08, ...new Uint8Array(10).fill(0xff), 0x01), // 11-byte varint
      Uint8Array.of(0x12, 0x05, 0x00), // open of 5 bytes, 1 left
      lenField(2, lenField(7, Uint8Array.of(0x1a, 0x02, 0x00))), // next_hops[0].start as bytes
      Uint8Array.of(0x00) // field 0
    ]
    for (const bytes of bad) expect(() => scanMessage(schema.SessionRequest, bytes)).toThrow(MalformedMessageError)
    // unknown fields are skipped (a newer peer's additions), as protobufjs does
    expect(() => scanMessage(schema.SessionRequest, Uint8Array.of(...varintField(1, 3), ...varintField(99, 7)))).not.toThrow()
  })

  it('finds the oneof body and the request id without decoding', () => {
    const bytes = openNextHopsFlood(42, 3)
    expect(topLevelMember(schema.SessionRequest, bytes)?.name).toBe('open')
    expect(peekVarintField(bytes, 1)).toBe(42)
  })
})
