import { createHash } from 'node:crypto'
import type { ModelConfig, TensorName } from '../types.js'
import { extraBlockTensors } from './architectures.js'
import type { ModelFile } from './model-file.js'

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
  // phi3's longrope factors (rope_factors_short/long) are in the config; llama3's in rope_freqs.
  if (c.ropeFreqFactors && model.hasTensor('rope_freqs')) names.push('rope_freqs')
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
      if (!(c.moe && t.startsWith('ffn_') && t !== 'ffn_norm')) names.push(`blk.${l}.${t}`)
    }
    // A mixture's router and its first and last experts (sampling every expert would read MBs).
    if (c.moe) {
      names.push(`blk.${l}.ffn_gate_inp`)
      for (const e of new Set([0, c.moe.nExperts - 1]))
        for (const t of ['ffn_gate_exps', 'ffn_up_exps', 'ffn_down_exps'] as const) names.push(`blk.${l}.${t}.${e}`)
      if (c.moe.sharedHidden > 0)
        for (const t of ['ffn_gate_inp_shexp', 'ffn_gate_shexp', 'ffn_up_shexp', 'ffn_down_shexp'] as const)
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
