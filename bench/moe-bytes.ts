import { type ModelFile, rowBytes } from '../shards/index.js'

/*
 * Weight bytes of a mixture-of-experts model's experts (issue 34: "a MoE step reads only its
 * active experts; show it with the bytes read per token"). A decode step routes its one token
 * to exactly nUsed distinct experts per block (moe-block.ts computes only those), so of each
 * block's nExperts expert FFNs it reads nUsed: the bytes below are exact for decode, counted
 * from the stored tensors' types and shapes.
 */
export interface ExpertBytes {
  readonly experts: number
  readonly expertsUsed: number
  /** All experts' gate, up and down matrices in blocks [start, end). */
  readonly expertBytesHeld: number
  /** The ones one decoded token reads. */
  readonly expertBytesPerToken: number
}

export function expertBytes(model: ModelFile, start = 0, end = model.config.nLayers): ExpertBytes | undefined {
  const p = model.config.moe
  const info = model.matrixInfo?.bind(model)
  if (!p || !info) return undefined
  let held = 0
  let used = 0
  for (let l = start; l < end; l++) {
    let one = 0
    for (const t of ['ffn_gate_exps', 'ffn_up_exps', 'ffn_down_exps'] as const) {
      const m = info(`blk.${l}.${t}.0`)
      one += rowBytes(m.dtype, m.cols) * m.rows
    }
    held += one * p.nExperts
    used += one * p.nUsed
  }
  return { experts: p.nExperts, expertsUsed: p.nUsed, expertBytesHeld: held, expertBytesPerToken: used }
}
