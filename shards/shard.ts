import { batchBlockForward } from './batch-forward.js'
import { type BlockWeights, blockForward, blockWeightBytes, loadBlock, Scratch } from './block.js'
import { InvalidArgumentError, PositionError, UnknownSessionError } from './errors.js'
import type { Kernels } from './kernels/kernels.js'
import { createReferenceKernels } from './kernels/kernels-ref.js'
import { KV_INITIAL_POSITIONS, KvCache, type KvDType, kvAllocatorOf } from './kv-cache.js'
import type { BatchStep, SessionOptions, ShardInit } from './shard-types.js'
import type { ModelConfig } from './types.js'

export type { BatchStep, SessionOptions, ShardInit } from './shard-types.js'

/** Steps of fewer rows than this may run the whole span in one kernel call (Kernels.spanForward). */
const SPAN_CALL_MAX_ROWS = 8

/** Default ShardInit.maxStepRows: big enough that batched matmuls run at full speed. */
export const DEFAULT_MAX_STEP_ROWS = 64

interface Session {
  readonly cache: KvCache
  /** Index of the session's first block within this shard's blocks. */
  readonly first: number
  readonly start: number
  readonly end: number
}

/**
 * Blocks [start, end) of a model: their weights (read from the file, and nothing else) and a KV
 * cache per session. `forward` runs a batch of T hidden states at positions
 * startPos .. startPos+T-1; a startPos below the session's length rewinds it first.
 */
export class Shard {
  readonly start: number
  readonly end: number
  readonly config: ModelConfig
  readonly kernels: Kernels
  readonly kvDType: KvDType
  private readonly blocks: BlockWeights[] = []
  private readonly sessions = new Map<string, Session>()
  private readonly scratch: Scratch
  private readonly maxStepRows: number

  constructor(init: ShardInit) {
    const { model, start, end } = init
    const n = model.config.nLayers
    if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0 || end > n || start >= end) {
      throw new InvalidArgumentError(`span [${start}, ${end}) is not a non-empty range of the model's ${n} blocks`)
    }
    this.start = start
    this.end = end
    this.config = model.config
    this.kernels = init.kernels ?? createReferenceKernels()
    this.kvDType = init.kvDType ?? 'f32'
    for (let l = start; l < end; l++) {
      this.blocks.push(loadBlock(model, l, this.kernels))
      init.onProgress?.(l - start + 1, end - start)
    }
    this.scratch = new Scratch(this.config)
    const rows = init.maxStepRows ?? DEFAULT_MAX_STEP_ROWS
    if (!Number.isInteger(rows) || rows < 1) throw new InvalidArgumentError(`maxStepRows must be a positive integer, got ${rows}`)
    this.maxStepRows = rows
  }

  /** Open (or reopen, dropping the old cache) a session with a preallocated KV cache. */
  openSession(id: string, options: SessionOptions = {}): void {
    const maxLength = options.maxLength ?? this.config.seqLen
    if (maxLength > this.config.seqLen) {
      throw new InvalidArgumentError(`maxLength ${maxLength} exceeds the model's context of ${this.config.seqLen}`)
    }
    const start = options.start ?? this.start
    const end = options.end ?? this.end
    if (!Number.isInteger(start) || !Number.isInteger(end) || start < this.start || end > this.end || start >= end) {
      throw new InvalidArgumentError(`span [${start}, ${end}) is not inside this shard's blocks [${this.start}, ${this.end})`)
    }
    // Reopening drops the old cache first, so its memory is free for the new one.
    this.closeSession(id)
    const cache = new KvCache(end - start, this.config.kvDim, maxLength, this.kvDType, kvAllocatorOf(this.kernels))
    this.sessions.set(id, { cache, first: start - this.start, start, end })
  }

  /** The blocks [start, end) a session runs. */
  sessionSpan(id: string): [number, number] {
    const s = this.session(id)
    return [s.start, s.end]
  }

  hasSession(id: string): boolean {
    return this.sessions.has(id)
  }

  /** Tokens whose keys and values the session holds. */
  sessionLength(id: string): number {
    return this.cache(id).length
  }

  /** Forget positions from `length` on (rejected speculative tokens, a retried step). */
  rewind(id: string, length: number): void {
    const cache = this.cache(id)
    if (!Number.isInteger(length) || length < 0 || length > cache.length) {
      throw new PositionError(`cannot rewind session ${id} of length ${cache.length} to ${length}`)
    }
    cache.length = length
  }

  /** Bytes exportKv produces per position for a session (all its layers, keys and values). */
  kvBytesPerPosition(id: string): number {
    return this.cache(id).bytesPerPosition
  }

  /**
   * The keys and values of every block of the session's span for positions [from, to), in the
   * cache's dtype (this.kvDType): for each block in order, keys rows [from, to) then values rows
   * [from, to), kvDim values per row, little-endian. Written into `out` when given (reuse it:
   * fresh large buffers are slow). PositionError unless 0 <= from <= to <= length.
   */
  exportKv(id: string, from: number, to: number, out?: Uint8Array): Uint8Array {
    return this.cache(id).exportRows(from, to, out)
  }

  /**
   * Write exportKv bytes of the same span and dtype at positions from .. from+rows-1 and set the
   * session's length to from + rows (positions after that are forgotten). PositionError when
   * from > length (a gap); InvalidArgumentError for a size that is not whole positions or
   * another dtype; OutOfCacheError past maxLength. Returns the number of positions written.
   */
  importKv(id: string, from: number, data: Uint8Array, dtype: KvDType = this.kvDType): number {
    const cache = this.cache(id)
    if (dtype !== cache.dtype) throw new InvalidArgumentError(`KV data of dtype ${dtype} cannot go into a ${cache.dtype} cache`)
    return cache.importRows(from, data)
  }

  /** Drop a session and free its KV cache (in the kernels' memory when they allocated it). */
  closeSession(id: string): boolean {
    const s = this.sessions.get(id)
    if (!s) return false
    this.sessions.delete(id)
    s.cache.free()
    return true
  }

  /** Close every session (the kernel set itself belongs to the caller, who closes it). */
  close(): void {
    for (const id of [...this.sessions.keys()]) this.closeSession(id)
  }

  /** Let the kernel threads sleep until the next step (before a wait on the network: Kernels.rest). */
  rest(): void {
    this.kernels.rest?.()
  }

  /** Bytes of weights this shard holds (as stored: the bytes a decode step reads). */
  get weightBytes(): number {
    return this.blocks.reduce((n, b) => n + blockWeightBytes(b), 0)
  }

  get sessionCount(): number {
    return this.sessions.size
  }

  /** Bytes of KV cache the open sessions hold (preallocated to each one's max length). */
  /** KV positions a session holds now (its cache grows as it is filled: kv-cache.ts, issue #39). */
  kvPositionsHeld(id: string): number {
    return this.cache(id).capacity
  }

  /** KV positions a session opened with `maxLength` holds at open, and whether it grows from there. */
  kvAtOpen(maxLength: number): { positions: number; grows: boolean } {
    return { positions: Math.min(maxLength, KV_INITIAL_POSITIONS), grows: true }
  }

  get kvBytesHeld(): number {
    let n = 0
    for (const s of this.sessions.values()) n += s.cache.sizeBytes
    return n
  }

  /**
   * Run the span on hidden states [T, dim] at positions startPos .. startPos+T-1 and return the
   * output hidden states [T, dim] (a new array; the input is not modified). `onBlock` sees each
   * block finish (progress of a long prefill).
   */
  forward(id: string, hidden: Float32Array, startPos: number, onBlock?: (done: number, total: number) => void): Float32Array {
    const session = this.session(id)
    const cache = session.cache
    const { dim } = this.config
    if (hidden.length === 0 || hidden.length % dim !== 0) {
      throw new InvalidArgumentError(`hidden states of ${hidden.length} floats are not a whole number of ${dim}-wide rows`)
    }
    const T = hidden.length / dim
    if (!Number.isInteger(startPos) || startPos < 0 || startPos > cache.length) {
      throw new PositionError(`step at position ${startPos} does not continue session ${id} of length ${cache.length}`)
    }
    cache.reserve(startPos, T)
    const x = Float32Array.from(hidden)
    const step = Math.min(T, this.maxStepRows)
    // Row t's result depends only on rows before it (causal attention, per-row matmuls), so
    // pieces of `step` rows give the same bits as one batch. Progress counts block-equivalents.
    const blocks = session.end - session.start
    const pieces = Math.ceil(T / step)
    let reported = 0
    for (let p = 0; p < pieces; p++) {
      const at = p * step
      const rows = Math.min(step, T - at)
      const xs = x.subarray(at * dim, (at + rows) * dim)
      // A decode-sized step (under SPAN_CALL_MAX_ROWS rows) runs the whole span in one kernel
      // call where the kernels can: milliseconds in all, so per-block progress is not missed.
      if (rows < SPAN_CALL_MAX_ROWS && this.spanForward(session, xs, rows, startPos + at)) {
        const done = Math.floor(((p + 1) * blocks * blocks) / (pieces * blocks))
        if (done > reported) onBlock?.((reported = done), blocks)
        continue
      }
      for (let i = 0; i < blocks; i++) {
        blockForward(this.kernels, this.config, this.blocks[session.first + i], xs, rows, startPos + at, cache, i, this.scratch)
        const done = Math.floor(((p * blocks + i + 1) * blocks) / (pieces * blocks))
        if (done > reported) onBlock?.((reported = done), blocks)
      }
    }
    cache.length = startPos + T
    return x
  }

  /**
   * The steps of several different sessions of the same span as one batched forward
   * (shards/batch-forward.ts): each output equals forward(id, hidden, startPos) alone, bit for
   * bit. Every step is checked (session, span, shape, position, cache room) before any KV is
   * touched, so a bad step throws and no session changes. A single step runs as forward().
   */
  forwardBatch(steps: readonly BatchStep[]): Float32Array[] {
    if (steps.length === 1) return [this.forward(steps[0].id, steps[0].hidden, steps[0].startPos)]
    const { dim } = this.config
    const first = steps.length > 0 ? this.session(steps[0].id) : undefined
    const seen = new Set<string>()
    const parts = steps.map((st) => {
      const session = this.session(st.id)
      if (seen.has(st.id)) throw new InvalidArgumentError(`session ${st.id} appears twice in one batch`)
      seen.add(st.id)
      if (session.start !== first?.start || session.end !== first.end) {
        throw new InvalidArgumentError(`session ${st.id} runs another span than the batch's first session`)
      }
      if (st.hidden.length === 0 || st.hidden.length % dim !== 0) {
        throw new InvalidArgumentError(`hidden states of ${st.hidden.length} floats are not a whole number of ${dim}-wide rows`)
      }
      const rows = st.hidden.length / dim
      if (!Number.isInteger(st.startPos) || st.startPos < 0 || st.startPos > session.cache.length) {
        throw new PositionError(
          `step at position ${st.startPos} does not continue session ${st.id} of length ${session.cache.length}`
        )
      }
      session.cache.reserve(st.startPos, rows)
      return { rows, startPos: st.startPos, cache: session.cache }
    })
    if (!first) return []
    const total = parts.reduce((n, p) => n + p.rows, 0)
    const x = new Float32Array(total * dim)
    let at = 0
    for (const st of steps) {
      x.set(st.hidden, at)
      at += st.hidden.length
    }
    for (let i = 0; i < first.end - first.start; i++) {
      batchBlockForward(this.kernels, this.config, this.blocks[first.first + i], x, parts, i, this.scratch)
    }
    at = 0
    return parts.map((p) => {
      p.cache.length = p.startPos + p.rows
      const out = x.slice(at * dim, (at + p.rows) * dim)
      at += p.rows
      return out
    })
  }

  /** All blocks of the session's span in one kernels.spanForward call, false when not taken. */
  private spanForward(session: Session, x: Float32Array, T: number, startPos: number): boolean {
    const span = this.kernels.spanForward
    // Gemma 2/3 blocks run op by op (shards/family-block.ts), never in the fused span call.
    if (!span || this.config.family || this.config.moe) return false
    const n = session.end - session.start
    const ws = this.blocks.slice(session.first, session.first + n)
    const kvs = session.cache.layers.slice(0, n)
    return span.call(this.kernels, x, T, startPos, ws, kvs, this.config)
  }

  private session(id: string): Session {
    const s = this.sessions.get(id)
    if (!s) throw new UnknownSessionError(`no session ${id} on blocks [${this.start}, ${this.end})`)
    return s
  }

  private cache(id: string): KvCache {
    return this.session(id).cache
  }
}

/**
 * Loads blocks [start, end) of a model, ready to run sessions on them.
 *
 * @example
 * ```ts
 * const shard = createShard({ model: openModelFile('stories260K.gguf'), start: 0, end: 2 })
 * ```
 */
export function createShard(init: ShardInit): Shard {
  return new Shard(init)
}

/**
 * What serves a span to the node: the engine's Shard (shards/shard.ts) or a ggml span
 * (shards/ggml/ggml-shard.ts, issue 32). Shard's public members less its kernel set, which only
 * the engine has.
 */
export type ShardLike = Omit<{ [K in keyof Shard]: Shard[K] }, 'kernels'>
