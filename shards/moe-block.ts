import type { ExpertFfn, Kernels, MoeMatrices } from './kernels/kernels.js'
import type { Scratch } from './scratch.js'
import type { ModelConfig, MoeParams } from './types.js'

/*
 * The mixture-of-experts FFN (issue 34 item 1), op by op in llama.cpp's order
 * (src/llama-graph.cpp build_moe_ffn with LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX, LLM_FFN_SILU):
 *   logits = ffn_gate_inp · xb;  probs = softmax(logits);  the top-k experts by prob
 *   (ggml_argsort_top_k);  weights = their probs, ÷ their sum when normTopK (qwen3moe);
 *   out = Σ over the k slots, in slot order, of weight · down_e(silu(gate_e xb) ⊙ up_e xb);
 *   qwen2moe (src/models/qwen2moe.cpp) then adds its shared expert:
 *   out += down_s(silu(gate_s xb) ⊙ up_s xb) · sigmoid(ffn_gate_inp_shexp · xb).
 * The experts are ordinary quantised matrices (slabs of the stacked ffn_*_exps tensors,
 * shards/fused-tensors.ts) run by the same kernels as the dense FFN. Rows that chose the same
 * expert, across tokens and sessions of a batch, go through it in one matmul; a step computes
 * only the experts its rows chose.
 */

/** The routing of R rows: for row r, slot i: expert[r·k + i] with weight[r·k + i]. */
export interface Routing {
  readonly experts: Int32Array
  readonly weights: Float32Array
}

/** Softmax over each row's router logits, top-k, optional renormalisation (build_moe_ffn). */
export function route(logits: Float32Array, R: number, p: MoeParams): Routing {
  const { nExperts: n, nUsed: k } = p
  const experts = new Int32Array(R * k)
  const weights = new Float32Array(R * k)
  const probs = new Float32Array(n)
  const order = Array.from({ length: n }, (_, i) => i)
  for (let r = 0; r < R; r++) {
    // ggml_soft_max: max, exp(x − max) in float32, the sum in double, × 1/sum.
    let max = Number.NEGATIVE_INFINITY
    for (let e = 0; e < n; e++) max = Math.max(max, logits[r * n + e])
    let sum = 0
    for (let e = 0; e < n; e++) {
      probs[e] = Math.exp(logits[r * n + e] - max)
      sum += probs[e]
    }
    const inv = Math.fround(1 / sum)
    for (let e = 0; e < n; e++) probs[e] = Math.fround(probs[e] * inv)
    // Descending by probability; equal probabilities keep the lower index first.
    order.sort((a, b) => probs[b] - probs[a] || a - b)
    // ggml_sum_rows sums in double (ggml_vec_sum_f32), then build_moe_ffn clamps the sum to
    // f16's smallest normal before ggml_div.
    let wsum = 0
    for (let i = 0; i < k; i++) {
      experts[r * k + i] = order[i]
      weights[r * k + i] = probs[order[i]]
      wsum += probs[order[i]]
    }
    wsum = Math.max(Math.fround(wsum), 6.103515625e-5)
    if (p.normTopK) for (let i = 0; i < k; i++) weights[r * k + i] = Math.fround(weights[r * k + i] / wsum)
  }
  return { experts, weights }
}

/** Per-call buffers of the expert FFN (rows gathered per expert). */
const buffers = new WeakMap<
  Scratch,
  { rows: Float32Array; gu: Float32Array; g: Float32Array; u: Float32Array; y: Float32Array; slots: Float32Array }
>()

/**
 * y = down(silu(gate·x) ⊙ up·x) on n rows of x into b.y (b.g holds the activations). With
 * `up` absent, `gate` is [gate; up] stacked (block.ts loadMoe, same dtype): one matmul instead
 * of two, each output row still its own dot product, so the bits are the same.
 */
function swigluFfn(
  kernels: Kernels,
  x: Float32Array,
  n: number,
  f: ExpertFfn,
  h: number,
  b: ReturnType<typeof buffersFor>
): void {
  let [g, u] = [b.g, b.u]
  if (f.up) {
    kernels.matmul(g, x, f.gate, n)
    kernels.matmul(u, x, f.up, n)
  } else {
    kernels.matmul(b.gu, x, f.gate, n)
    if (n === 1) [g, u] = [b.gu.subarray(0, h), b.gu.subarray(h, 2 * h)]
    else
      for (let j = 0; j < n; j++) {
        g.set(b.gu.subarray(2 * j * h, (2 * j + 1) * h), j * h)
        u.set(b.gu.subarray((2 * j + 1) * h, (2 * j + 2) * h), j * h)
      }
  }
  kernels.swiglu(g, u, n * h)
  kernels.matmul(b.y, g, f.down, n)
}

function buffersFor(s: Scratch, R: number, c: ModelConfig, p: MoeParams) {
  let b = buffers.get(s)
  const need = R * c.dim
  if (!b || b.rows.length < need || b.slots.length < need * p.nUsed) {
    const h = Math.max(p.expertHidden, p.sharedHidden)
    b = {
      rows: new Float32Array(need),
      gu: new Float32Array(2 * R * h),
      g: new Float32Array(R * h),
      u: new Float32Array(R * h),
      y: new Float32Array(need),
      slots: new Float32Array(need * p.nUsed)
    }
    buffers.set(s, b)
  }
  return b
}

/**
 * The MoE FFN on R rows: reads the normed rows in s.xb [R, dim], writes the FFN output there.
 * Returns the routing (tests and the canary detector look at it).
 */
export function moeForward(kernels: Kernels, c: ModelConfig, m: MoeMatrices, s: Scratch, R: number): Routing {
  const p = c.moe as MoeParams
  const { dim } = c
  const h = p.expertHidden
  const logits = new Float32Array(R * p.nExperts)
  kernels.matmul(logits, s.xb, m.router, R)
  const routing = route(logits, R, p)
  const b = buffersFor(s, R, c, p)
  for (let e = 0; e < p.nExperts; e++) {
    // The (row, slot) pairs that chose expert e, gathered into one batch.
    const picks: number[] = []
    for (let i = 0; i < R * p.nUsed; i++) if (routing.experts[i] === e) picks.push(i)
    if (picks.length === 0) continue
    const n = picks.length
    for (let j = 0; j < n; j++) {
      const r = Math.floor(picks[j] / p.nUsed)
      b.rows.set(s.xb.subarray(r * dim, (r + 1) * dim), j * dim)
    }
    swigluFfn(kernels, b.rows, n, m.experts[e], h, b)
    // ggml_mul(experts, weights): each expert's output row × its weight, in float32.
    picks.forEach((i, j) => {
      const wgt = routing.weights[i]
      for (let d = 0; d < dim; d++) b.slots[i * dim + d] = Math.fround(b.y[j * dim + d] * wgt)
    })
  }
  // qwen2moe's shared expert, on the normed rows still in s.xb.
  const shared = m.shared ? sharedExpert(kernels, c, m.shared, s.xb, R, b) : undefined
  // Σ over slots in slot order (build_moe_ffn adds the views one by one), then + the shared expert.
  for (let r = 0; r < R; r++) {
    for (let d = 0; d < dim; d++) {
      let acc = b.slots[r * p.nUsed * dim + d]
      for (let i = 1; i < p.nUsed; i++) acc = Math.fround(acc + b.slots[(r * p.nUsed + i) * dim + d])
      s.xb[r * dim + d] = shared ? Math.fround(acc + shared[r * dim + d]) : acc
    }
  }
  return routing
}

/** ggml_silu(x) / x, the sigmoid qwen2moe's graph builds (scalar path: x / (1 + expf(−x))). */
export function sharedGate(x: number): number {
  // At exactly 0 ggml gets 0/0 = NaN; the limit, 1/2, keeps the peer's output finite.
  if (x === 0) return 0.5
  return Math.fround(Math.fround(x / Math.fround(1 + Math.fround(Math.exp(-x)))) / x)
}

/**
 * qwen2moe's shared expert on the normed rows xb [R, dim]: down_s(swiglu) · sigmoid gate
 * (ggml_mul in float32), into b.y, which it returns; the caller adds it (ggml_add).
 */
function sharedExpert(
  kernels: Kernels,
  c: ModelConfig,
  m: NonNullable<MoeMatrices['shared']>,
  xb: Float32Array,
  R: number,
  b: ReturnType<typeof buffersFor>
): Float32Array {
  const { dim } = c
  const h = (c.moe as MoeParams).sharedHidden
  const gates = new Float32Array(R)
  kernels.matmul(gates, xb, m.gateInp, R)
  swigluFfn(kernels, xb, R, m, h, b)
  for (let r = 0; r < R; r++) {
    const gate = sharedGate(gates[r])
    for (let d = 0; d < dim; d++) b.y[r * dim + d] = Math.fround(b.y[r * dim + d] * gate)
  }
  return b.y
}
