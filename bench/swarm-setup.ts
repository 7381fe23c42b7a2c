import { existsSync, renameSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createTokenizer, type ModelFile, parseShape, writeRandomModel } from '../shards/index.js'

/*
 * What the swarm benchmarks (swarm, load, wan, swarm-canary, big-swarm) set up before they
 * measure: the model file, the spans of the node processes and a prompt of a given length.
 */

/** A model file path, writing a random-weight GGUF for a shape name once. */
export function resolveModel(o: { readonly model: string; readonly dtype: 'f32' | 'f16' | 'q8_0'; readonly seed: number }): {
  path: string
  shape?: string
} {
  if (existsSync(o.model)) return { path: o.model }
  const shape = parseShape(o.model)
  const path = join(tmpdir(), `layerswarm-bench-${shape.name}-${o.dtype}-s${o.seed}.gguf`)
  if (!existsSync(path)) {
    process.stderr.write(`bench swarm: writing ${path}\n`)
    writeRandomModel(`${path}.part`, shape, { dtype: o.dtype, seed: o.seed })
    renameSync(`${path}.part`, path) // only once complete, so an interrupted write is never reused
  }
  return { path, shape: shape.name }
}

/** [start, end) spans of `peers` nearly equal parts of blocks [from, to). */
export function evenSpans(from: number, to: number, peers: number): Array<[number, number]> {
  const n = to - from
  if (peers < 1 || peers > n) throw new Error(`bench swarm: ${peers} peers cannot split ${n} remote blocks`)
  return Array.from({ length: peers }, (_, i) => [from + Math.floor((i * n) / peers), from + Math.floor(((i + 1) * n) / peers)])
}

/** A prompt text that encodes to `n` tokens: pieces spread over the vocabulary, each kept if it adds exactly one. */
export function promptText(model: ModelFile, n: number): string {
  const tokenizer = createTokenizer(model.vocabulary!)
  const v = model.config.vocabSize
  const count = (text: string): number => tokenizer.encode(text).length
  const base = count('')
  let text = ''
  for (let i = 0; count(text) - base < n && i < 100 * n; i++) {
    const next = text + tokenizer.decode([3 + ((i * 7919) % (v - 3))])
    if (count(next) === count(text) + 1) text = next
  }
  return text
}
