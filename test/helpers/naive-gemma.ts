import { f16ToF32, f32ToF16 } from '../../shards/f16.js'
import { dequantizeRow, type ModelFile, type TensorName, type WeightMatrix } from '../../shards/index.js'

/**
 * An independent float64 forward of Gemma 2 and Gemma 3, written from Hugging Face's
 * modeling_gemma2.py / modeling_gemma3.py and Google's gemma_pytorch, reading hyper-parameters
 * from the GGUF keys llama.cpp's converter writes (not from the engine's config):
 *  - hidden = embed(token) · √hidden_size;
 *  - per layer: h += post_attention_layernorm(attn(input_layernorm(h)));
 *    h += post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)));
 *  - Gemma's RMSNorm is x / rms(x) · (1 + w); llama.cpp's converter stores 1 + w, so the stored
 *    weight multiplies directly;
 *  - attention: q/k/v projections, (gemma3) q_norm / k_norm per head, rotate_half RoPE (pairs i,
 *    i + d/2) with the global base or, on sliding layers, rope_local_base_freq (gemma3) / the
 *    same base (gemma2); scores · query_pre_attn_scalar^-½ (head_dim here), then
 *    softcap·tanh(s / softcap) (gemma2), sliding-window mask (k_pos > q_pos − window) on layers
 *    i with (i + 1) % pattern ≠ 0, softmax;
 *  - mlp: down(gelu_tanh(gate(x)) · up(x)); `geluF16` rounds the gate and gelu's value to
 *    binary16 as ggml's CPU table does (ggml-cpu vec.h GGML_GELU_FP16), else exact;
 *  - logits = lm_head(norm(h)) (tied to the embedding), then final_logit_softcapping.
 * One token at a time, float64 everywhere.
 */
export function createNaiveGemmaModel(model: ModelFile, opts: { geluF16?: boolean } = {}) {
  const arch = String(model.metadata.get('general.architecture'))
  const meta = (key: string, fallback: number): number => {
    const v = model.metadata.get(`${arch}.${key}`)
    return v === undefined ? fallback : Number(v)
  }
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
  const dim = meta('embedding_length', 0)
  const nLayers = meta('block_count', 0)
  const nHeads = meta('attention.head_count', 0)
  const nKv = meta('attention.head_count_kv', nHeads)
  const hd = meta('attention.key_length', dim / nHeads)
  const eps = meta('attention.layer_norm_rms_epsilon', 1e-6)
  const theta = meta('rope.freq_base', 10000)
  const gemma2 = arch === 'gemma2'
  const window = meta('attention.sliding_window', gemma2 ? 4096 : 0)
  const pattern = meta('attention.sliding_window_pattern', gemma2 ? 2 : 6)
  const localTheta = meta('rope.freq_base_swa', gemma2 ? theta : 10000)
  const attnCap = gemma2 ? meta('attn_logit_softcapping', 50) : 0
  const finalCap = meta('final_logit_softcapping', gemma2 ? 30 : 0)
  const layers = Array.from({ length: nLayers }, (_, l) => ({
    inNorm: vec(`blk.${l}.attn_norm`),
    wq: mat(`blk.${l}.attn_q`),
    wk: mat(`blk.${l}.attn_k`),
    wv: mat(`blk.${l}.attn_v`),
    qNorm: has(`blk.${l}.attn_q_norm`) ? vec(`blk.${l}.attn_q_norm`) : null,
    kNorm: has(`blk.${l}.attn_k_norm`) ? vec(`blk.${l}.attn_k_norm`) : null,
    wo: mat(`blk.${l}.attn_output`),
    postAttn: vec(`blk.${l}.post_attention_norm`),
    preFfn: vec(`blk.${l}.ffn_norm`),
    gate: mat(`blk.${l}.ffn_gate`),
    up: mat(`blk.${l}.ffn_up`),
    down: mat(`blk.${l}.ffn_down`),
    postFfn: vec(`blk.${l}.post_ffw_norm`),
    sliding: window > 0 && (pattern === 0 || (l + 1) % pattern !== 0)
  }))
  const embed = mat('token_embd')
  const head = has('output') && arch !== 'gemma2' ? mat('output') : embed
  const finalNorm = vec('output_norm')
  const keys: number[][][] = layers.map(() => [])
  const values: number[][][] = layers.map(() => [])

  const matvec = (w: number[][], x: number[]) => w.map((row) => row.reduce((s, v, i) => s + v * x[i], 0))
  const rmsnorm = (x: number[], w: number[]) => {
    const ss = x.reduce((s, v) => s + v * v, 0) / x.length + eps
    return x.map((v, i) => (w[i] * v) / Math.sqrt(ss))
  }
  const perHead = (x: number[], w: number[] | null) => {
    if (!w) return x
    const out: number[] = []
    for (let h = 0; h < x.length / hd; h++) out.push(...rmsnorm(x.slice(h * hd, (h + 1) * hd), w))
    return out
  }
  const rope = (x: number[], pos: number, base: number) => {
    for (let h = 0; h < x.length / hd; h++) {
      for (let i = 0; i < hd / 2; i++) {
        const angle = pos / base ** ((2 * i) / hd)
        const [cos, sin] = [Math.cos(angle), Math.sin(angle)]
        const [ia, ib] = [h * hd + i, h * hd + i + hd / 2]
        const [a, b] = [x[ia], x[ib]]
        x[ia] = a * cos - b * sin
        x[ib] = a * sin + b * cos
      }
    }
  }
  const f16 = (v: number) => (opts.geluF16 ? f16ToF32(f32ToF16(v)) : v)
  const gelu = (v: number) => {
    if (opts.geluF16 && v <= -10) return 0
    if (opts.geluF16 && v >= 10) return v
    const x = f16(v)
    return f16(0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3))))
  }
  const cap = (v: number, c: number) => (c > 0 ? c * Math.tanh(v / c) : v)

  /** Logits after feeding `token` at position `pos` (positions must come in order). */
  function step(token: number, pos: number): number[] {
    let h = embed[token].map((v) => v * Math.sqrt(dim))
    layers.forEach((L, l) => {
      const x = rmsnorm(h, L.inNorm)
      const q = perHead(matvec(L.wq, x), L.qNorm)
      const k = perHead(matvec(L.wk, x), L.kNorm)
      const v = matvec(L.wv, x)
      const base = L.sliding ? localTheta : theta
      rope(q, pos, base)
      rope(k, pos, base)
      keys[l][pos] = k
      values[l][pos] = v
      const out = new Array(nHeads * hd).fill(0)
      const from = L.sliding ? Math.max(0, pos - window + 1) : 0
      for (let hh = 0; hh < nHeads; hh++) {
        const kvh = Math.floor(hh / (nHeads / nKv)) * hd
        const scores: number[] = []
        for (let p = from; p <= pos; p++) {
          let s = 0
          for (let i = 0; i < hd; i++) s += q[hh * hd + i] * keys[l][p][kvh + i]
          scores.push(cap(s / Math.sqrt(hd), attnCap))
        }
        const max = Math.max(...scores)
        const e = scores.map((s) => Math.exp(s - max))
        const sum = e.reduce((a, b) => a + b, 0)
        for (let p = from; p <= pos; p++) {
          for (let i = 0; i < hd; i++) out[hh * hd + i] += (e[p - from] / sum) * values[l][p][kvh + i]
        }
      }
      const attn = rmsnorm(matvec(L.wo, out), L.postAttn)
      h = h.map((val, i) => val + attn[i])
      const y = rmsnorm(h, L.preFfn)
      const g = matvec(L.gate, y)
      const u = matvec(L.up, y)
      const mlp = rmsnorm(
        matvec(
          L.down,
          g.map((gv, i) => gelu(gv) * u[i])
        ),
        L.postFfn
      )
      h = h.map((val, i) => val + mlp[i])
    })
    return matvec(head, rmsnorm(h, finalNorm)).map((z) => cap(z, finalCap))
  }
  return { step }
}
