import { InvalidArgumentError, OutOfCacheError, PositionError, UnknownSessionError, UnsupportedModelError } from '../errors.js'
import type { KvDType } from '../kv-cache.js'
import type { ModelFile } from '../model/model-file.js'
import type { ShardLike } from '../shard.js'
import type { BatchStep, SessionOptions } from '../shard-types.js'
import type { ModelConfig } from '../types.js'
import { flavourOf, type GgmlBackend } from './package.js'
import { type GgmlDevice, loadGgml, type NativeGgmlSpan, pickDevice } from './runtime.js'

export interface GgmlShardInit {
  readonly model: ModelFile
  readonly start: number
  readonly end: number
  readonly backend: GgmlBackend
  /** Index among that backend's devices (`--device`), 0 by default. */
  readonly device?: number
  /** f16 (default) or f32: the KV cache lives in the device's memory in that type. */
  readonly kvDType?: KvDType
  /** CPU backend threads (default: ggml's own choice). */
  readonly threads?: number
  readonly onProgress?: (loaded: number, total: number) => void
}

interface GgmlSession {
  readonly handle: number
  readonly start: number
  readonly end: number
  readonly maxLength: number
  length: number
}

/**
 * Blocks [start, end) of a GGUF model run by ggml on one device (issue 32), with Shard's
 * interface (shards/shard.ts): sessions with a preallocated KV cache on the device, steps of T
 * rows at startPos (below the length: a rewind first), forwardBatch across sessions in one graph,
 * and KV export/import in the engine's byte layout (kv-cache.ts), so sealed snapshots and
 * handoffs move between ggml and native nodes. Not bit-exact with the engine: ggml quantizes
 * activations and reduces in its own order (docs/verification.md, benign classes).
 */
export class GgmlShard implements ShardLike {
  readonly start: number
  readonly end: number
  readonly config: ModelConfig
  readonly kvDType: KvDType
  readonly backend: GgmlBackend
  readonly device: GgmlDevice
  readonly weightBytes: number
  private readonly span: NativeGgmlSpan
  private readonly sessions = new Map<string, GgmlSession>()
  private nextHandle = 1

  constructor(init: GgmlShardInit) {
    const { model, start, end } = init
    const c = model.config
    if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0 || end > c.nLayers || start >= end)
      throw new InvalidArgumentError(`span [${start}, ${end}) is not a non-empty range of the model's ${c.nLayers} blocks`)
    // The ggml graph (shards/native/ggml/span.cc) builds the Llama / Qwen block only (issue 34).
    if (c.family || c.moe || c.architecture === 'phi3' || c.ropeDims || c.ropeYarn || c.ropeMagnitude)
      throw new UnsupportedModelError(
        `the ggml backends do not run ${c.architecture} files with these features yet; use --backend native or wasm`
      )
    if (model.format !== 'gguf')
      throw new InvalidArgumentError(`the ggml backends read GGUF files; ${model.path} is ${model.format}`)
    const kvDType = init.kvDType ?? 'f16'
    if (kvDType !== 'f16' && kvDType !== 'f32')
      throw new InvalidArgumentError(`the ggml backends keep f16 or f32 KV caches, not ${kvDType}`)
    const runtime = loadGgml(flavourOf(init.backend))
    this.device = pickDevice(runtime, init.backend, init.device ?? 0)
    this.span = new runtime.Span({
      path: model.path,
      start,
      end,
      ...c,
      freqFactors: c.ropeFreqFactors ? Float32Array.from(c.ropeFreqFactors) : undefined,
      kvDType,
      device: this.device.index,
      threads: init.threads ?? 0
    })
    init.onProgress?.(end - start, end - start)
    this.start = start
    this.end = end
    this.config = c
    this.kvDType = kvDType
    this.backend = init.backend
    this.weightBytes = this.span.info().weightBytes
  }

  openSession(id: string, options: SessionOptions = {}): void {
    const maxLength = options.maxLength ?? this.config.seqLen
    if (!Number.isInteger(maxLength) || maxLength < 1 || maxLength > this.config.seqLen)
      throw new InvalidArgumentError(`maxLength ${maxLength} is not within the model's context of ${this.config.seqLen}`)
    const start = options.start ?? this.start
    const end = options.end ?? this.end
    // One graph runs the shard's blocks; a sub-span session would need its own weights view.
    if (start !== this.start || end !== this.end)
      throw new InvalidArgumentError(`a ggml shard runs its whole span [${this.start}, ${this.end}), not [${start}, ${end})`)
    this.closeSession(id)
    const handle = this.nextHandle++
    this.span.openSession(handle, maxLength)
    this.sessions.set(id, { handle, start, end, maxLength, length: 0 })
  }

  sessionSpan(id: string): [number, number] {
    const s = this.session(id)
    return [s.start, s.end]
  }

  hasSession(id: string): boolean {
    return this.sessions.has(id)
  }

  sessionLength(id: string): number {
    return this.session(id).length
  }

  /** Forget positions from `length` on: later steps overwrite them, the mask hides the rest. */
  rewind(id: string, length: number): void {
    const s = this.session(id)
    if (!Number.isInteger(length) || length < 0 || length > s.length)
      throw new PositionError(`cannot rewind session ${id} of length ${s.length} to ${length}`)
    s.length = length
  }

  kvBytesPerPosition(id: string): number {
    this.session(id)
    return (this.end - this.start) * 2 * this.span.info().kvRowBytes
  }

  exportKv(id: string, from: number, to: number, out?: Uint8Array): Uint8Array {
    const s = this.session(id)
    if (!Number.isInteger(from) || !Number.isInteger(to) || from < 0 || from > to || to > s.length)
      throw new PositionError(`cannot export positions [${from}, ${to}) of session ${id} of length ${s.length}`)
    const bytes = (to - from) * this.kvBytesPerPosition(id)
    const into = out && out.byteLength >= bytes ? out.subarray(0, bytes) : new Uint8Array(bytes)
    this.span.exportKv(s.handle, from, to - from, into)
    return into
  }

  importKv(id: string, from: number, data: Uint8Array, dtype: KvDType = this.kvDType): number {
    const s = this.session(id)
    if (dtype !== this.kvDType) throw new InvalidArgumentError(`KV data of dtype ${dtype} cannot go into a ${this.kvDType} cache`)
    const per = this.kvBytesPerPosition(id)
    if (data.byteLength % per !== 0)
      throw new InvalidArgumentError(`${data.byteLength} bytes of KV are not whole positions of ${per} bytes`)
    if (!Number.isInteger(from) || from < 0 || from > s.length)
      throw new PositionError(`KV import at ${from} leaves a gap after session ${id}'s length ${s.length}`)
    const rows = data.byteLength / per
    if (from + rows > s.maxLength)
      throw new OutOfCacheError(`positions ${from}..${from + rows - 1} do not fit the KV cache of ${s.maxLength} positions`)
    this.span.importKv(s.handle, from, rows, data)
    s.length = from + rows
    return rows
  }

  closeSession(id: string): boolean {
    const s = this.sessions.get(id)
    if (!s) return false
    this.sessions.delete(id)
    this.span.closeSession(s.handle)
    return true
  }

  /** Close every session and free the device's weights (the span is unusable afterwards). */
  close(): void {
    for (const id of [...this.sessions.keys()]) this.closeSession(id)
    this.span.close()
  }

  /**
   * Run throwaway steps of the shapes a node meets (issue 32): a GPU backend compiles each
   * pipeline on first use, per op, weight type and size class, which on Mesa's lavapipe takes
   * minutes and would stall a client's step past its timeout. Covered: a 9-row prefill (small
   * matmul tiles), decode rows, and two sessions in one step (the node batches them; concat).
   * Prefills of 2-8 rows (ggml-vulkan's matrix-vector path has a pipeline per row count) and of
   * over 32 rows (medium and large tiles) still compile on first use. Drivers keep compiled
   * pipelines in a disk cache (Mesa: ~/.cache/mesa_shader_cache_db), so a machine pays once.
   * `extraPrefills` adds prefills of those row counts (cheap on a hardware GPU). Returns the
   * milliseconds taken.
   */
  warmUp(extraPrefills: readonly number[] = []): number {
    const began = performance.now()
    const { dim, seqLen } = this.config
    const n = Math.max(1, Math.min(9, seqLen - 2))
    const ids = ['\u0000warm-a', '\u0000warm-b']
    try {
      for (const rows of extraPrefills.filter((r) => r >= 1 && r <= seqLen)) {
        this.openSession(ids[1], { maxLength: rows })
        this.forward(ids[1], new Float32Array(rows * dim), 0)
      }
      for (const id of ids) this.openSession(id, { maxLength: Math.min(seqLen, n + 2) })
      this.forward(ids[0], new Float32Array(n * dim), 0)
      this.forwardBatch([
        { id: ids[1], hidden: new Float32Array(n * dim), startPos: 0 },
        { id: ids[0], hidden: new Float32Array(dim), startPos: Math.min(n, seqLen - 1) }
      ])
      this.forwardBatch([
        { id: ids[1], hidden: new Float32Array(dim), startPos: Math.min(n, seqLen - 1) },
        { id: ids[0], hidden: new Float32Array(dim), startPos: Math.min(n + 1, seqLen - 1) }
      ])
      this.forward(ids[0], new Float32Array(dim), Math.min(n + 1, seqLen - 1))
    } finally {
      for (const id of ids) this.closeSession(id)
    }
    return performance.now() - began
  }

  /** ggml's CPU threads sleep between graphs on their own. */
  rest(): void {}

  get sessionCount(): number {
    return this.sessions.size
  }

  /** ggml's KV is allocated whole at open (the native span's cache): held as asked. */
  kvPositionsHeld(id: string): number {
    const s = this.sessions.get(id)
    if (!s) throw new UnknownSessionError(`no session ${id} on blocks [${this.start}, ${this.end})`)
    return s.maxLength
  }

  kvAtOpen(maxLength: number): { positions: number; grows: boolean } {
    return { positions: maxLength, grows: false }
  }

  get kvBytesHeld(): number {
    let n = 0
    for (const [id, s] of this.sessions) n += s.maxLength * this.kvBytesPerPosition(id)
    return n
  }

  forward(id: string, hidden: Float32Array, startPos: number, onBlock?: (done: number, total: number) => void): Float32Array {
    const [out] = this.run([{ id, hidden, startPos }])
    onBlock?.(this.end - this.start, this.end - this.start)
    return out
  }

  /** Several sessions' steps as one graph (shared matmuls, attention per session). */
  forwardBatch(steps: readonly BatchStep[]): Float32Array[] {
    return steps.length === 0 ? [] : this.run(steps)
  }

  private run(steps: readonly BatchStep[]): Float32Array[] {
    const { dim } = this.config
    const seen = new Set<string>()
    // Every step is checked before any KV is touched: a bad step throws and no session changes.
    const parts = steps.map((st) => {
      const s = this.session(st.id)
      if (seen.has(st.id)) throw new InvalidArgumentError(`session ${st.id} appears twice in one batch`)
      seen.add(st.id)
      if (st.hidden.length === 0 || st.hidden.length % dim !== 0)
        throw new InvalidArgumentError(`hidden states of ${st.hidden.length} floats are not a whole number of ${dim}-wide rows`)
      const rows = st.hidden.length / dim
      if (!Number.isInteger(st.startPos) || st.startPos < 0 || st.startPos > s.length)
        throw new PositionError(`step at position ${st.startPos} does not continue session ${st.id} of length ${s.length}`)
      if (st.startPos + rows > s.maxLength)
        throw new OutOfCacheError(
          `positions ${st.startPos}..${st.startPos + rows - 1} do not fit the KV cache of ${s.maxLength} positions`
        )
      return { s, rows, startPos: st.startPos }
    })
    const total = parts.reduce((n, p) => n + p.rows, 0)
    const x = new Float32Array(total * dim)
    let at = 0
    for (const st of steps) {
      x.set(st.hidden, at)
      at += st.hidden.length
    }
    this.span.forward(
      x,
      Int32Array.from(parts, (p) => p.s.handle),
      Int32Array.from(parts, (p) => p.rows),
      Int32Array.from(parts, (p) => p.startPos),
      dim
    )
    at = 0
    return parts.map((p) => {
      p.s.length = p.startPos + p.rows
      const out = x.slice(at * dim, (at + p.rows) * dim)
      at += p.rows
      return out
    })
  }

  private session(id: string): GgmlSession {
    const s = this.sessions.get(id)
    if (!s) throw new UnknownSessionError(`no session ${id} on blocks [${this.start}, ${this.end})`)
    return s
  }
}
