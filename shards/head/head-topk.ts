/**
 * The head's top-k (issue #35): what the hop running the LM head answers instead of a whole
 * vocabulary row. Per row, the k likeliest tokens in order (value descending, then id ascending:
 * the order argmax breaks ties in, so ids[0] is exactly the greedy token), their logits, and the
 * softmax mass of every other token, so the client samples exactly when the mass it needs lies
 * inside (client/head/remote-head-sampler.ts) and asks again for more when it does not.
 *
 * k adapts: the smallest k ≥ minK whose mass at the request's temperature reaches `mass`, at
 * most maxK. Values travel as the top logit in f32 and f16 gaps below it (a gap of g keeps
 * about 2^-11·g), or all in f32 when the request asks (the fallback's full row).
 */
import { InvalidArgumentError } from '../errors.js'
import { f16ToF32, f32ToF16 } from '../f16.js'

export interface TopKRequest {
  readonly minK: number
  readonly maxK: number
  /** 0: exactly minK. */
  readonly mass: number
  /** The softmax the mass is measured under; 0 counts as 1. */
  readonly temperature: number
  /** Also the row's log-sum-exp at temperature 1 (HeadRow.lse), for logprobs. */
  readonly logSumExp?: boolean
}

/** One row of a head reply. */
export interface HeadRow {
  /** Token ids, likeliest first (ties: lower id first). */
  readonly ids: Uint32Array
  /** Their logits (as the wire carried them). */
  readonly values: Float32Array
  /** Σ exp((x_j − values[0]) / T) over the tokens not in ids (T the request's temperature). */
  readonly tail: number
  /** log Σ exp(x_j) over the whole row at temperature 1, when the request asked it (logprobs are value − lse). */
  readonly lse?: number
}

/** A row's entries ranked (value descending, id ascending). */
function better(logits: Float32Array, a: number, b: number): boolean {
  return logits[a] > logits[b] || (logits[a] === logits[b] && a < b)
}

/** The `n` best indices of a row in rank order: a bounded min-heap, O(vocab log n). */
function bestIndices(logits: Float32Array, n: number): Uint32Array {
  const heap = new Uint32Array(n) // heap[0] is the worst kept
  let size = 0
  const siftDown = (i: number): void => {
    for (;;) {
      const l = 2 * i + 1
      const r = l + 1
      let w = i
      if (l < size && better(logits, heap[w], heap[l])) w = l
      if (r < size && better(logits, heap[w], heap[r])) w = r
      if (w === i) return
      const t = heap[i]
      heap[i] = heap[w]
      heap[w] = t
      i = w
    }
  }
  for (let id = 0; id < logits.length; id++) {
    if (size < n) {
      let i = size++
      heap[i] = id
      while (i > 0) {
        const p = (i - 1) >> 1
        if (!better(logits, heap[p], heap[i])) break
        const t = heap[i]
        heap[i] = heap[p]
        heap[p] = t
        i = p
      }
    } else if (better(logits, id, heap[0])) {
      heap[0] = id
      siftDown(0)
    }
  }
  return heap.slice(0, size).sort((a, b) => (better(logits, a, b) ? -1 : better(logits, b, a) ? 1 : 0))
}

/** The top-k of one row of logits under a request. */
export function headTopK(logits: Float32Array, req: TopKRequest): HeadRow {
  const vocab = logits.length
  if (vocab === 0) throw new InvalidArgumentError('cannot take the top-k of an empty row')
  const maxK = Math.min(vocab, req.maxK)
  const minK = Math.min(maxK, Math.max(1, req.minK))
  const t = req.temperature > 0 ? req.temperature : 1
  const order = bestIndices(logits, maxK)
  const top = logits[order[0]]
  let total = 0
  for (let i = 0; i < vocab; i++) total += Math.exp((logits[i] - top) / t)
  let k = minK
  let inside = 0
  for (let i = 0; i < k; i++) inside += Math.exp((logits[order[i]] - top) / t)
  if (req.mass > 0) {
    while (k < maxK && inside < req.mass * total) inside += Math.exp((logits[order[k++]] - top) / t)
  }
  const ids = order.slice(0, k)
  const values = new Float32Array(k)
  for (let i = 0; i < k; i++) values[i] = logits[ids[i]]
  const tail = k === vocab ? 0 : Math.max(0, total - inside)
  if (!req.logSumExp) return { ids, values, tail }
  // the same float64 sum, in index order, as shards/constrain/logprobs.ts over the client's row
  let sum1 = total
  if (t !== 1) {
    sum1 = 0
    for (let i = 0; i < vocab; i++) sum1 += Math.exp(logits[i] - top)
  }
  return { ids, values, tail, lse: top + Math.log(sum1) }
}

/** Bytes of one encoded row of k entries. */
function rowBytes(k: number, valuesF32: boolean, lse: boolean): number {
  return 4 + 4 + 8 + (lse ? 8 : 0) + 4 * k + (k - 1) * (valuesF32 ? 4 : 2)
}

/**
 * The plaintext of a head reply: rows in order (u32 k ‖ f32 top ‖ f64 tail ‖ [f64 lse] ‖ u32 ids ‖
 * values); `lse` when the request asked the log-sum-exp (every row then carries one).
 */
export function encodeHeadRows(rows: readonly HeadRow[], valuesF32: boolean, lse = false): Uint8Array {
  const out = new Uint8Array(rows.reduce((n, r) => n + rowBytes(r.ids.length, valuesF32, lse), 0))
  const dv = new DataView(out.buffer)
  let o = 0
  for (const r of rows) {
    const k = r.ids.length
    dv.setUint32(o, k, true)
    dv.setFloat32(o + 4, r.values[0], true)
    dv.setFloat64(o + 8, r.tail, true)
    o += 16
    if (lse) {
      if (r.lse === undefined) throw new InvalidArgumentError('a head row without the log-sum-exp its request asked')
      dv.setFloat64(o, r.lse, true)
      o += 8
    }
    for (let i = 0; i < k; i++, o += 4) dv.setUint32(o, r.ids[i], true)
    for (let i = 1; i < k; i++) {
      if (valuesF32) {
        dv.setFloat32(o, r.values[i], true)
        o += 4
      } else {
        dv.setUint16(o, f32ToF16(r.values[0] - r.values[i]), true)
        o += 2
      }
    }
  }
  return out
}

/** Rows of an opened head reply; InvalidArgumentError when the bytes do not hold `rows` rows of ids below `vocab`. */
export function decodeHeadRows(bytes: Uint8Array, rows: number, vocab: number, valuesF32: boolean, lse = false): HeadRow[] {
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const out: HeadRow[] = []
  let o = 0
  for (let r = 0; r < rows; r++) {
    if (o + 16 > bytes.length) throw new InvalidArgumentError(`head reply ends before row ${r}`)
    const k = dv.getUint32(o, true)
    if (k < 1 || k > vocab || o + rowBytes(k, valuesF32, lse) > bytes.length)
      throw new InvalidArgumentError(`head reply row ${r}: ${k} entries do not fit`)
    const values = new Float32Array(k)
    values[0] = dv.getFloat32(o + 4, true)
    const tail = dv.getFloat64(o + 8, true)
    if (!Number.isFinite(values[0]) || !(tail >= 0)) throw new InvalidArgumentError(`head reply row ${r}: bad top or tail`)
    o += 16
    let rowLse: number | undefined
    if (lse) {
      rowLse = dv.getFloat64(o, true)
      if (!(rowLse >= values[0])) throw new InvalidArgumentError(`head reply row ${r}: a log-sum-exp below the top logit`)
      o += 8
    }
    const ids = new Uint32Array(k)
    for (let i = 0; i < k; i++, o += 4) {
      ids[i] = dv.getUint32(o, true)
      if (ids[i] >= vocab) throw new InvalidArgumentError(`head reply row ${r}: token ${ids[i]} outside the vocabulary`)
    }
    for (let i = 1; i < k; i++) {
      if (valuesF32) {
        values[i] = dv.getFloat32(o, true)
        o += 4
      } else {
        values[i] = values[0] - f16ToF32(dv.getUint16(o, true))
        o += 2
      }
    }
    out.push(rowLse === undefined ? { ids, values, tail } : { ids, values, tail, lse: rowLse })
  }
  if (o !== bytes.length) throw new InvalidArgumentError(`head reply holds ${bytes.length - o} bytes past its rows`)
  return out
}
