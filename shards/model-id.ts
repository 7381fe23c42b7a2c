import { createHash } from 'node:crypto'
import { extraBlockTensors } from './architectures.js'
import type { ModelFile } from './model-file.js'
import type { ModelConfig, TensorName } from './types.js'

/**
 * The config as hashed. A plain Llama 2 config hashes exactly as before the architecture fields
 * existed (ids in trust files stay valid); any other config hashes every field, so families,
 * head sizes and RoPE scalings never share an id.
 */
function idConfig(c: ModelConfig): object {
  const { qDim, ropeType, ropeFreqScale, ropeFreqFactors, qkvBias, qkNorm, ...legacy } = c
  const plain =
    c.architecture === 'llama' &&
    qDim === c.dim &&
    ropeType === 'norm' &&
    ropeFreqScale === 1 &&
    ropeFreqFactors === null &&
    !qkvBias &&
    !qkNorm
  return plain ? legacy : c
}

/** Bytes of each tensor that go into the id (first and last halves). */
export const SAMPLE_BYTES = 8192

/**
 * A model id: SHA-256 over the config and, for every tensor, its name, dtype and a sample of
 * its bytes. Peers with different files (other weights, dtype, shape) get different ids and
 * never mix, yet a peer computes it without reading the whole file (it may serve one span).
 */
export function computeModelId(model: ModelFile): string {
  const c = model.config
  const h = createHash('sha256')
  h.update(JSON.stringify(['layerswarm-model-v1', idConfig(c)]))
  const names: TensorName[] = ['token_embd', 'output_norm']
  if (!c.tiedEmbeddings) names.push('output')
  if (c.ropeFreqFactors) names.push('rope_freqs')
  for (let l = 0; l < c.nLayers; l++) {
    for (const t of [
      'attn_norm',
      'attn_q',
      'attn_k',
      'attn_v',
      'attn_output',
      'ffn_norm',
      'ffn_gate',
      'ffn_up',
      'ffn_down'
    ] as const) {
      names.push(`blk.${l}.${t}`)
    }
    for (const t of extraBlockTensors(c)) names.push(`blk.${l}.${t}`)
  }
  for (const name of names) {
    const sample = model.sampleTensor(name, SAMPLE_BYTES)
    h.update(`${name}:${sample.length}:`)
    h.update(sample)
  }
  return `lsm1-${h.digest('hex').slice(0, 40)}`
}
