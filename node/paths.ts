import { existsSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { PackageRootNotFoundError } from './errors.js'

/** The package root (the folder with package.json), from source or from dist/. */
export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (let i = 0; i < 5; i++) {
    if (existsSync(join(dir, 'package.json'))) return dir
    dir = dirname(dir)
  }
  throw new PackageRootNotFoundError('cannot find the layerswarm package root')
}

/** The bundled default model (stories260K, GGUF with its tokenizer). */
export function defaultModelPath(): string {
  return join(packageRoot(), 'models', 'stories260K.gguf')
}
