/**
 * Where layerswarm.proto lies, for tools that read the schema itself (the fuzzer's reflection,
 * tests that compare the generated code with it). The wire code does not: it is generated from
 * the .proto (`npm run gen:wire`, protocol/generated/) and parses nothing at run time.
 * Looked up next to this module and then in `<ancestor>/protocol/`, so it works from source
 * (vitest) and from the compiled dist/protocol/*.js.
 */
import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { ProtoFileNotFoundError } from './errors.js'

export const PROTO_FILE_NAME = 'layerswarm.proto'

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
