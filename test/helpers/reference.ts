import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
export const MODELS = join(ROOT, 'models')
export const GGUF_PATH = join(MODELS, 'stories260K.gguf')
export const BIN_PATH = join(MODELS, 'stories260K.bin')
export const TOK_PATH = join(MODELS, 'tok512.bin')
/** llama2.c's own outputs (test/vectors, provenance in its README). */
export const REFERENCE_DIR = join(ROOT, 'test', 'vectors')

export interface ReferenceLogits {
  pos: number
  input_token: number
  next_token: number
  is_generation_step: boolean
  values: number[]
}

export interface Reference {
  prompt: string
  prompt_tokens: number[]
  generated_tokens: number[]
  all_tokens: number[]
  text: string
  logits: ReferenceLogits[]
}

export function loadReference(name: 'stories260K_greedy_bos' | 'stories260K_greedy_once_upon_a_time'): Reference {
  return JSON.parse(readFileSync(join(REFERENCE_DIR, `${name}.json`), 'utf8')) as Reference
}

export function maxAbsDiff(a: ArrayLike<number>, b: ArrayLike<number>): number {
  if (a.length !== b.length) throw new Error(`length ${a.length} != ${b.length}`)
  let m = 0
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]))
  return m
}
