import { InvalidModelError } from './errors.js'
import type { GgufTensorInfo } from './formats/gguf-reader.js'
import { rowBytes } from './quant/codecs.js'
import type { ModelConfig } from './types.js'

/*
 * Tensors some families store fused or stacked, read as the engine's own names (issue 34):
 *  - phi3 `blk.N.attn_qkv` [qDim + 2 kvDim, dim] holds attn_q, attn_k, attn_v row by row, and
 *    `blk.N.ffn_up` [2 hidden, dim] holds the gate rows then the up rows (llama.cpp
 *    create_tensor_qkv / build_qkv splits the first; build_ffn LLM_FFN_SWIGLU with no gate
 *    tensor runs ggml_swiglu on the halves of the second);
 *  - mixture-of-experts `blk.N.ffn_{gate,up,down}_exps` [nExperts, rows, cols] hold one matrix
 *    per expert: `blk.N.ffn_gate_exps.E` is slab E (or the split tensor `blk.N.ffn_gate.E`).
 * Stored rows are self-contained in every GGUF type, so a row range is a matrix of its own and
 * reads only its bytes (a MoE step reads only the experts it uses).
 */

/** The stored tensor and row range behind a logical name, or undefined for a stored name. */
export function tensorView(
  name: string,
  c: ModelConfig,
  tensors: ReadonlyMap<string, GgufTensorInfo>
): GgufTensorInfo | undefined {
  const m = /^blk\.(\d+)\.(\w+?)(?:\.(\d+))?$/.exec(name)
  if (!m) return undefined
  const blk = `blk.${m[1]}.`
  const t = m[2]
  if (m[3] !== undefined) {
    if (!['ffn_gate_exps', 'ffn_up_exps', 'ffn_down_exps'].includes(t)) return undefined
    const e = Number(m[3])
    const s = tensors.get(`${blk}${t}.weight`)
    // Early Mixtral GGUFs store each expert apart: blk.N.ffn_gate.E.weight (llama.cpp's
    // LLM_TENSOR_FFN_GATE_EXP, "split experts"); the engine reads them as the stack's slabs.
    if (!s) return tensors.get(`${blk}${t.replace('_exps', '')}.${e}.weight`)

    if (s.ne.length !== 3 || e >= s.ne[2]) throw new InvalidModelError(`${s.name} has no expert ${e} (shape [${s.ne}])`)
    return rows(s, e * s.ne[1], s.ne[1], name)
  }
  if (t === 'ffn_up' && !c.moe && !tensors.has(`${blk}ffn_gate.weight`)) {
    const s = tensors.get(`${name}.weight`)
    return s && s.ne[1] === 2 * c.hiddenDim ? rows(s, c.hiddenDim, c.hiddenDim, name) : undefined
  }
  if (tensors.has(`${name}.weight`)) return undefined
  if (t === 'attn_q' || t === 'attn_k' || t === 'attn_v') {
    const s = tensors.get(`${blk}attn_qkv.weight`)
    if (!s) return undefined
    const at = t === 'attn_q' ? 0 : t === 'attn_k' ? c.qDim : c.qDim + c.kvDim
    return rows(s, at, t === 'attn_q' ? c.qDim : c.kvDim, name)
  }
  if (t === 'ffn_gate' && !c.moe) {
    const s = tensors.get(`${blk}ffn_up.weight`)
    if (!s || s.ne[1] !== 2 * c.hiddenDim) return undefined
    return rows(s, 0, c.hiddenDim, name)
  }
  return undefined
}

function rows(s: GgufTensorInfo, from: number, n: number, name: string): GgufTensorInfo {
  const cols = s.ne[0]
  const total = s.ne.slice(1).reduce((a, b) => a * b, 1)
  if (from + n > total) throw new InvalidModelError(`${s.name} [${s.ne}] has no rows ${from}..${from + n} for ${name}`)
  const rb = rowBytes(s.dtype, cols)
  return { name, ne: [cols, n], dtype: s.dtype, offset: s.offset + from * rb, sizeBytes: n * rb }
}
