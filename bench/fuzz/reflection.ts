/**
 * The fuzzer builds random frames field by field from the schema itself, so it reads
 * layerswarm.proto with protobufjs's reflection (the wire code does not: it is generated,
 * protocol/generated/, issue 36). Names are camelCase, as the generated code uses.
 */
import { readFileSync } from 'node:fs'
import protobuf from 'protobufjs'
import { protoPath } from '../../protocol/index.js'

const root = protobuf.parse(readFileSync(protoPath(), 'utf8'), { keepCase: false }).root
root.resolveAll()

const type = (name: string): protobuf.Type => root.lookupType(`layerswarm.v1.${name}`)

/** The messages the fuzz lanes send, as reflected protobufjs types. */
export const reflected = {
  InfoRequest: type('InfoRequest'),
  InfoResponse: type('InfoResponse'),
  SessionRequest: type('SessionRequest'),
  SessionResponse: type('SessionResponse')
}
