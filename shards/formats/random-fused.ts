import type { ModelConfig, TensorName, WeightDType } from '../types.js'

// How random phi3 and qwen3moe files store their matrices (issue 34): the engine reads
// `blk.N.attn_q` etc. by name (shards/fused-tensors.ts maps them onto the stored tensors), so a
// random model keeps those logical tensors, and the GGUF writer joins them as llama.cpp's
// converter lays them out: phi3's attn_qkv and gate-up ffn_up, the MoE experts' 3-D stacks.
// A joined tensor's bytes are its parts' bytes one after the other, so the in-memory model
// and the file hold the same weights.

/** A logical tensor of a random model, as random-model.ts describes it. */
export interface LogicalTensor {
  readonly name: TensorName
  readonly rows: number
  readonly cols: number
  readonly vector: boolean
  readonly dtype: WeightDType
}

/** A stored tensor: its GGUF name, shape (ne order) and the logical tensors it joins. */
export interface StoredTensor<T extends LogicalTensor> {
  readonly key: string
  readonly shape: number[]
  readonly dtype: WeightDType
  readonly parts: T[]
}

/** The MoE FFN tensors of block l, in place of ffn_gate / ffn_up / ffn_down. */
export function moeTensorNames(c: ModelConfig, l: number): Array<[TensorName, rows: number, cols: number]> {
  const m = c.moe
  if (!m) return []
  const out: Array<[TensorName, number, number]> = [[`blk.${l}.ffn_gate_inp`, m.nExperts, c.dim]]
  for (const [t, rows, cols] of [
    ['ffn_gate_exps', m.expertHidden, c.dim],
    ['ffn_down_exps', c.dim, m.expertHidden],
    ['ffn_up_exps', m.expertHidden, c.dim]
  ] as const) {
    for (let e = 0; e < m.nExperts; e++) out.push([`blk.${l}.${t}.${e}`, rows, cols])
  }
  // qwen2moe's shared expert, as Qwen2MoeModel writes it: the gate vector (rows 0), then the FFN.
  if (m.sharedHidden > 0)
    out.push(
      [`blk.${l}.ffn_gate_inp_shexp`, 0, c.dim],
      [`blk.${l}.ffn_gate_shexp`, m.sharedHidden, c.dim],
      [`blk.${l}.ffn_down_shexp`, c.dim, m.sharedHidden],
      [`blk.${l}.ffn_up_shexp`, m.sharedHidden, c.dim]
    )
  return out
}

/** Group logical tensors into stored ones (key = GGUF tensor name); parts of a group share the first part's dtype. */
export function storedTensors<T extends LogicalTensor>(
  c: ModelConfig,
  tensors: readonly T[],
  key: (n: TensorName) => string
): StoredTensor<T>[] {
  const groups = new Map<string, StoredTensor<T>>()
  for (const t of tensors) {
    const g = groupOf(c, t.name)
    const k = g ?? key(t.name)
    const known = groups.get(k)
    if (known) {
      known.parts.push(t)
      continue
    }
    groups.set(k, { key: k, shape: t.vector ? [t.cols] : [t.cols, t.rows], dtype: t.dtype, parts: [t] })
  }
  return [...groups.values()].map((s) => {
    if (s.parts.length === 1 || s.shape.length === 1) return s
    const rows = s.parts.reduce((n, p) => n + p.rows, 0)
    const stacked = /_exps\.weight$/.test(s.key)
    // Experts stack as [cols, rows, nExperts]; fused matrices as [cols, Σ rows].
    return { ...s, shape: stacked ? [s.shape[0], s.parts[0].rows, s.parts.length] : [s.shape[0], rows] }
  })
}

/** The stored tensor a logical tensor joins, or undefined when it is stored alone. */
function groupOf(c: ModelConfig, name: TensorName): string | undefined {
  const m = /^blk\.(\d+)\.(\w+?)(?:\.(\d+))?$/.exec(name)
  if (!m) return undefined
  if (m[3] !== undefined) return `blk.${m[1]}.${m[2]}.weight`
  if (c.architecture !== 'phi3') return undefined
  if (m[2] === 'attn_q' || m[2] === 'attn_k' || m[2] === 'attn_v') return `blk.${m[1]}.attn_qkv.weight`
  if (m[2] === 'ffn_gate' || m[2] === 'ffn_up') return `blk.${m[1]}.ffn_up.weight`
  return undefined
}
