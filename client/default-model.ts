import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { BundledModelNotFoundError } from './errors.js'

/**
 * The model file bundled with the package (stories260K, GGUF with its tokenizer), found from
 * this module's own location, so `createClient({ bootstrap })` works from any directory, as the
 * CLI's default does.
 */
export function bundledModelPath(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (let i = 0; i < 5; i++) {
    const candidate = join(dir, 'models', 'stories260K.gguf')
    if (existsSync(join(dir, 'package.json')) && existsSync(candidate)) return candidate
    dir = dirname(dir)
  }
  throw new BundledModelNotFoundError('cannot find the bundled models/stories260K.gguf above the layerswarm package')
}
