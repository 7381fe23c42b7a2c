import { createHash } from 'node:crypto'
import type { ModelFile } from './model-file.js'
import type { TensorName } from './types.js'

/** Bytes of each tensor that go into the id (first and last halves). */
const SAMPLE_BYTES = 8192

/**
 * A model id: SHA-256 over the config and, for every tensor, its name, dtype and a sample of
 * its bytes. Peers with different files (other weights, dtype, shape) get different ids and
 * never mix, yet a peer computes it without reading the whole file (it may serve one span).
 */
export function computeModelId(model: ModelFile): string {
  const c = model.config
  const h = createHash('sha256')
  h.update(JSON.stringify(['layerswarm-model-v1', c]))
  const names: TensorName[] = ['token_embd', 'output_norm']
  if (!c.tiedEmbeddings) names.push('output')
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
  }
  for (const name of names) {
    const sample = model.sampleTensor(name, SAMPLE_BYTES)
    h.update(`${name}:${sample.length}:`)
    h.update(sample)
  }
  return `lsm1-${h.digest('hex').slice(0, 40)}`
}
