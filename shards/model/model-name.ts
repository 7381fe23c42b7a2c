import { LLAMA_FTYPE } from '../quant/file-types.js'
import type { ModelFile } from './model-file.js'

/**
 * A name a person can read for a model (issue 33 item 5: `swarm` and `/v1/models` list models by
 * it), from the GGUF metadata llama.cpp's converter writes (ggml docs/gguf.md "General metadata"):
 * `general.basename` or `general.name`, `general.size_label` (else the parameter count worked out
 * from the shape), and the quantisation from `general.file_type` (else the matrices' dtype).
 * E.g. "Llama-3.2 1B Q4_K_M", "llama 260K F32". The model id, not this, is what routing keys on.
 */
export function readableModelName(model: Pick<ModelFile, 'metadata' | 'config' | 'weightDType'>): string {
  const text = (key: string): string | undefined => {
    const v = model.metadata.get(key)
    return typeof v === 'string' && v.trim() !== '' ? v.trim() : undefined
  }
  const base = text('general.basename') ?? text('general.name') ?? model.config.architecture
  const size = text('general.size_label') ?? sizeLabel(parameterCount(model.config))
  const ftype = model.metadata.get('general.file_type')
  const quant = FTYPE_NAMES.get(Number(ftype)) ?? model.weightDType.toUpperCase()
  const parts = [base, size, quant].filter((p, i, all) => !all.slice(0, i).some((q) => q.toLowerCase() === p.toLowerCase()))
  // a name is one line of at most 120 characters whatever the metadata holds (it goes on the wire)
  return parts
    .join(' ')
    .replace(/[\s\p{Cc}]+/gu, ' ')
    .trim()
    .slice(0, MAX_MODEL_NAME_LENGTH)
}

/** Longest readable name announced (protocol/limits.ts checks the same bound on the wire). */
export const MAX_MODEL_NAME_LENGTH = 120

const FTYPE_NAMES = new Map<number, string>(Object.entries(LLAMA_FTYPE).map(([name, n]) => [n, name.toUpperCase()]))

interface Shape {
  readonly dim: number
  readonly hiddenDim: number
  readonly nLayers: number
  readonly qDim: number
  readonly kvDim: number
  readonly vocabSize: number
  readonly tiedEmbeddings: boolean
}

/** Weights of a Llama-shaped model: embeddings (and head unless tied), attention and SwiGLU per block. */
export function parameterCount(c: Shape): number {
  const block = 2 * c.dim * c.qDim + 2 * c.dim * c.kvDim + 3 * c.dim * c.hiddenDim + 2 * c.dim
  return c.vocabSize * c.dim * (c.tiedEmbeddings ? 1 : 2) + c.nLayers * block + c.dim
}

/** 1.2B, 8B, 260K: the size labels Hugging Face and llama.cpp use. */
export function sizeLabel(params: number): string {
  for (const [unit, scale] of [
    ['T', 1e12],
    ['B', 1e9],
    ['M', 1e6],
    ['K', 1e3]
  ] as const) {
    if (params >= scale) {
      const v = params / scale
      return `${v >= 10 ? Math.round(v) : Number(v.toFixed(1))}${unit}`
    }
  }
  return String(params)
}
