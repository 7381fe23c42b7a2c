import { dequantizeRow, type ModelFile, type TensorName, type WeightMatrix } from '../../shards/index.js'

/**
 * An independent float64 forward for every supported family, written from the model cards /
 * Hugging Face modeling code rather than from the engine (which, for instance, runs NEOX RoPE as
 * NORM on reordered rows; this helper rotates the file's rows as the paper says):
 *  - llama (modeling_llama.py, GGUF layout): RoPE on adjacent pairs (2i, 2i+1) — llama.cpp's
 *    converter permutes HF's Q/K rows so that this is the same rotation; inverse frequencies
 *    base^(-2i/d), divided per pair by `rope_freqs` (llama3) or recomputed from the llama3
 *    formula (Meta's apply_scaling) when `llama3Factor` is given; linear scaling divides the
 *    position by the factor.
 *  - qwen2 (modeling_qwen2.py): q/k/v projections with bias; rotate_half RoPE, i.e. pairs
 *    (i, i + d/2).
 *  - qwen3 (modeling_qwen3.py): no bias; q_norm / k_norm (RMSNorm over head_dim) on each head
 *    before RoPE; head_dim from the config, so q has heads * head_dim rows.
 * One token at a time, float64 everywhere.
 */
export function createNaiveFamilyModel(model: ModelFile, opts: { llama3Factor?: number } = {}) {
  const c = model.config
  const arch = model.metadata.get('general.architecture') ?? c.architecture
  const neox = arch === 'qwen2' || arch === 'qwen3'
  const mat = (name: TensorName): number[][] => {
    const w: WeightMatrix = model.readMatrix(name)
    const row = new Float32Array(w.cols)
    return Array.from({ length: w.rows }, (_, r) => {
      dequantizeRow(w, r, row)
      return Array.from(row)
    })
  }
  const vec = (name: TensorName) => Array.from(model.readVector(name))
  const has = (name: TensorName) => model.hasTensor(name)
  const hd = c.headDim
  const layers = Array.from({ length: c.nLayers }, (_, l) => ({
    attnNorm: vec(`blk.${l}.attn_norm`),
    wq: mat(`blk.${l}.attn_q`),
    wk: mat(`blk.${l}.attn_k`),
    wv: mat(`blk.${l}.attn_v`),
    bq: has(`blk.${l}.attn_q.bias`) ? vec(`blk.${l}.attn_q.bias`) : null,
    bk: has(`blk.${l}.attn_k.bias`) ? vec(`blk.${l}.attn_k.bias`) : null,
    bv: has(`blk.${l}.attn_v.bias`) ? vec(`blk.${l}.attn_v.bias`) : null,
    qNorm: has(`blk.${l}.attn_q_norm`) ? vec(`blk.${l}.attn_q_norm`) : null,
    kNorm: has(`blk.${l}.attn_k_norm`) ? vec(`blk.${l}.attn_k_norm`) : null,
    wo: mat(`blk.${l}.attn_output`),
    ffnNorm: vec(`blk.${l}.ffn_norm`),
    w1: mat(`blk.${l}.ffn_gate`),
    w2: mat(`blk.${l}.ffn_down`),
    w3: mat(`blk.${l}.ffn_up`)
  }))
  const embed = mat('token_embd')
  const head = mat('output')
  const finalNorm = vec('output_norm')
  const keys: number[][][] = layers.map(() => [])
  const values: number[][][] = layers.map(() => [])

  // Inverse frequencies (HF: inv_freq = 1 / base^(arange(0, d, 2) / d)).
  const base = c.ropeTheta
  let invFreq = Array.from({ length: hd / 2 }, (_, i) => 1 / base ** ((2 * i) / hd))
  if (opts.llama3Factor !== undefined) {
    // modeling_rope_utils.py _compute_llama3_parameters, with the Llama 3.1 defaults.
    const factor = opts.llama3Factor
    const [low, high, old] = [1, 4, 8192]
    invFreq = invFreq.map((f) => {
      const wavelen = (2 * Math.PI) / f
      if (wavelen > old / low) return f / factor
      if (wavelen < old / high) return f
      const smooth = (old / wavelen - low) / (high - low)
      return (1 - smooth) * (f / factor) + smooth * f
    })
  } else if (has('rope_freqs')) {
    const ff = vec('rope_freqs')
    invFreq = invFreq.map((f, i) => f / ff[i])
  }
  const scaling = model.metadata.get(`${arch}.rope.scaling.type`)
  const posScale = scaling === 'linear' ? 1 / Number(model.metadata.get(`${arch}.rope.scaling.factor`)) : 1

  const matvec = (w: number[][], x: number[], b: number[] | null = null) =>
    w.map((row, r) => row.reduce((s, v, i) => s + v * x[i], 0) + (b ? b[r] : 0))
  const rmsnorm = (x: number[], w: number[]) => {
    const ss = x.reduce((s, v) => s + v * v, 0) / x.length + c.rmsEps
    return x.map((v, i) => (w[i] * v) / Math.sqrt(ss))
  }
  /** RoPE on each head of x in place: NORM pairs (2i, 2i+1) or NEOX pairs (i, i + d/2). */
  const rope = (x: number[], pos: number) => {
    for (let h = 0; h < x.length / hd; h++) {
      for (let i = 0; i < hd / 2; i++) {
        const angle = pos * posScale * invFreq[i]
        const [cos, sin] = [Math.cos(angle), Math.sin(angle)]
        const [ia, ib] = neox ? [h * hd + i, h * hd + i + hd / 2] : [h * hd + 2 * i, h * hd + 2 * i + 1]
        const [a, b] = [x[ia], x[ib]]
        x[ia] = a * cos - b * sin
        x[ib] = a * sin + b * cos
      }
    }
  }
  const headNorm = (x: number[], w: number[] | null) => {
    if (!w) return x
    const out: number[] = []
    for (let h = 0; h < x.length / hd; h++) out.push(...rmsnorm(x.slice(h * hd, (h + 1) * hd), w))
    return out
  }

  /** Logits after feeding `token` at position `pos` (positions must come in order). */
  function step(token: number, pos: number): number[] {
    let x = [...embed[token]]
    layers.forEach((L, l) => {
      const xb = rmsnorm(x, L.attnNorm)
      const q = headNorm(matvec(L.wq, xb, L.bq), L.qNorm)
      const k = headNorm(matvec(L.wk, xb, L.bk), L.kNorm)
      const v = matvec(L.wv, xb, L.bv)
      rope(q, pos)
      rope(k, pos)
      keys[l][pos] = k
      values[l][pos] = v
      const out = new Array(c.nHeads * hd).fill(0)
      for (let h = 0; h < c.nHeads; h++) {
        const kvh = Math.floor(h / (c.nHeads / c.nKvHeads)) * hd
        const scores = []
        for (let p = 0; p <= pos; p++) {
          let s = 0
          for (let i = 0; i < hd; i++) s += q[h * hd + i] * keys[l][p][kvh + i]
          scores.push(s / Math.sqrt(hd))
        }
        const max = Math.max(...scores)
        const e = scores.map((s) => Math.exp(s - max))
        const sum = e.reduce((a, b) => a + b, 0)
        for (let p = 0; p <= pos; p++) {
          for (let i = 0; i < hd; i++) out[h * hd + i] += (e[p] / sum) * values[l][p][kvh + i]
        }
      }
      const attnOut = matvec(L.wo, out)
      x = x.map((v, i) => v + attnOut[i])
      const xb2 = rmsnorm(x, L.ffnNorm)
      const g = matvec(L.w1, xb2)
      const u = matvec(L.w3, xb2)
      const hb = g.map((v, i) => (v / (1 + Math.exp(-v))) * u[i])
      const down = matvec(L.w2, hb)
      x = x.map((v, i) => v + down[i])
    })
    return matvec(head, rmsnorm(x, finalNorm))
  }
  return { step }
}
