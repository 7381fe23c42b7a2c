import { closeSync, openSync, readSync } from 'node:fs'
import { BadMagicError, InvalidArgumentError } from '../errors.js'
import { openGgufModel } from '../formats/gguf-model.js'
import { openLlama2cModel } from '../formats/llama2c-model.js'
import type { ModelFile } from './model-file.js'

export interface OpenModelOptions {
  /** llama2.c tokenizer.bin; by default tok<vocab>.bin or tokenizer.bin beside the model. */
  tokenizerPath?: string
}

/**
 * Open a model file by its contents: "GGUF" magic means GGUF, a `.bin` name means a llama2.c
 * checkpoint (which has no magic). Only headers are read here.
 */
export function openModelFile(path: string, options: OpenModelOptions = {}): ModelFile {
  if (typeof path !== 'string' || path.length === 0) throw new InvalidArgumentError('model path must be a non-empty string')
  const magic = new Uint8Array(4)
  const fd = openSync(path, 'r')
  let n: number
  try {
    n = readSync(fd, magic, 0, 4, 0)
  } finally {
    closeSync(fd)
  }
  if (n === 4 && String.fromCharCode(...magic) === 'GGUF') return openGgufModel(path)
  if (path.endsWith('.bin')) return openLlama2cModel(path, options)
  if (path.endsWith('.gguf')) return openGgufModel(path) // reports the bad magic
  throw new BadMagicError(`${path}: not a GGUF file and not a llama2.c .bin checkpoint`)
}
