import { readFileSync } from 'node:fs'
import { compileSchema, UnsupportedSchemaError } from '../../../shards/index.js'
import { BadOptionError } from '../errors.js'
import { checkReadableFile } from './checks.js'

/** `--json-schema FILE`: the schema, checked now (a keyword constrained sampling cannot enforce is refused up front). */
export function readJsonSchema(path: string): object {
  checkReadableFile(path, '--json-schema')
  let schema: unknown
  try {
    schema = JSON.parse(readFileSync(path, 'utf8'))
  } catch (err) {
    throw new BadOptionError(`--json-schema ${path}: not JSON (${(err as Error).message})`)
  }
  try {
    compileSchema(schema)
  } catch (err) {
    if (err instanceof UnsupportedSchemaError) throw new BadOptionError(`--json-schema ${path}: ${err.message}`)
    throw err
  }
  return schema as object
}
